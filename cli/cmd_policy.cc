// `mcpcell policy check FILE|NAME`: loads a profile with the strict loader and prints the
// cell spec it compiles to (exit 1 and the loader's file:line:column error otherwise).
// `mcpcell policy show [NAME|FILE]`: prints the effective policy (every key, defaults
// filled in) as a profile file; without NAME, the one `mcpcell serve` uses by default.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/command.h"
#include "policies/compiler.h"
#include "policies/loader.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

struct PolicyArgs {
  std::string target;
  std::string state_dir = sandbox::DefaultStateDir();  // mounting it is refused
};

int Check(const PolicyArgs& a) {
  auto policy = policies::ResolvePolicy(a.target, {a.state_dir});
  if (!policy) {
    std::fprintf(stderr, "mcpcell policy check: %s\n", policy.error().message.c_str());
    return 1;
  }
  auto spec = policies::CompileCellSpec(*policy, "check", a.state_dir, "");
  if (!spec) {
    std::fprintf(stderr, "mcpcell policy check: %s\n", spec.error().message.c_str());
    return 1;
  }
  std::printf("%s: ok (policy \"%s\")\n%s", policy->source.c_str(), policy->name.c_str(),
              policies::DescribeCellSpec(*spec).c_str());
  return 0;
}

int Show(const PolicyArgs& a) {
  auto policy = policies::ResolvePolicy(a.target.empty() ? "default" : a.target, {a.state_dir});
  if (!policy) {
    std::fprintf(stderr, "mcpcell policy show: %s\n", policy.error().message.c_str());
    return 1;
  }
  std::string names;
  for (const auto& n : policies::ShippedPolicyNames()) names += (names.empty() ? "" : ", ") + n;
  std::printf("# shipped profiles: %s\n%s", names.c_str(),
              policies::DescribePolicy(*policy).c_str());
  return 0;
}

const bool kRegistered = RegisterCommand("policy", [](CLI::App& parent, int* exit_code) {
  CLI::App* cmd = parent.add_subcommand("policy", kPolicySummary);
  cmd->require_subcommand(1);
  auto check_args = std::make_shared<PolicyArgs>();
  CLI::App* check = cmd->add_subcommand(
      "check", "Validate a profile (file or shipped name) and print the cell spec it compiles to");
  check->add_option("FILE", check_args->target, "Profile file (.toml) or shipped name")->required();
  check
      ->add_option("--state-dir", check_args->state_dir,
                   "The server's state dir (mounting it is refused)")
      ->capture_default_str();
  check->callback([check_args, exit_code] { *exit_code = Check(*check_args); });

  auto show_args = std::make_shared<PolicyArgs>();
  CLI::App* show = cmd->add_subcommand("show", "Print the effective policy (default: \"default\")");
  show->add_option("NAME", show_args->target, "Shipped profile name or a .toml file");
  show->add_option("--state-dir", show_args->state_dir,
                   "The server's state dir (mounting it is refused)")
      ->capture_default_str();
  show->callback([show_args, exit_code] { *exit_code = Show(*show_args); });
});

}  // namespace
}  // namespace mcpcell::cli
