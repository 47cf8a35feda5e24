// npm_install: npm packages into /workspace/node_modules (NODE_PATH points there, so node in
// run_code and run_command requires them from any directory), from the server's package
// service only, lifecycle scripts off unless the policy allows them. What was installed is
// the difference of node_modules/.package-lock.json (npm's hidden lockfile) before and after.
#include "packages/service.h"
#include "policies/package_env.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_tools.h"
#include "tools/package_install.h"

namespace mcpcell::tools {
namespace {

using packages::Registry;

constexpr uint64_t kMaxLockfileBytes = 32 << 20;
constexpr char kHiddenLockfile[] = "/workspace/node_modules/.package-lock.json";

// The hidden lockfile's packages; a missing file is an empty install.
Result<std::map<std::string, LockedPackage>> ReadLockfile(const sandbox::CellLease& channel) {
  if (!channel.Stat(kHiddenLockfile, /*follow_symlinks=*/true)) {
    return std::map<std::string, LockedPackage>{};
  }
  auto text = ReadCellFile(channel, kHiddenLockfile, kMaxLockfileBytes, nullptr);
  if (!text) return text.error();
  auto parsed = ParseNpmLockfile(*text);
  if (!parsed) return parsed.error().Wrap(kHiddenLockfile);
  return parsed;
}

// npm_install's own steps: `npm install` between two reads of the hidden lockfile, whose
// difference is what it installed.
std::optional<mcp::ToolResult> InstallIntoWorkspace(InstallCall& call) {
  InstallRun& run = call.run;
  auto before = ReadLockfile(run.channel());
  if (!before) return SandboxError("npm_install", before.error());
  std::vector<std::string> argv = {"npm",
                                   "install",
                                   "--no-audit",
                                   "--no-fund",
                                   "--no-update-notifier",
                                   "--no-progress",
                                   "--loglevel=warn",
                                   std::string("--registry=") + packages::kNpmRegistryUrl};
  // Lifecycle scripts (preinstall, install, postinstall) are install-time code.
  argv.push_back(call.config.packages.allow_install_scripts ? "--ignore-scripts=false"
                                                            : "--ignore-scripts");
  argv.push_back("--");
  for (const packages::Requirement& req : call.requirements) argv.push_back(req.raw);

  InstallRun::Outcome outcome = run.Run(argv, "/workspace");
  if (outcome.error) return outcome.error;
  InstallSummary& summary = call.summary;
  summary.exit_code = outcome.exit_code;
  summary.output = run.Output();
  summary.refused = run.Refusals();
  auto after = ReadLockfile(run.channel());
  if (!after) return SandboxError("npm_install", after.error());
  for (const auto& [name, pkg] : *after) {
    auto old = before->find(name);
    if (old != before->end() && old->second == pkg) continue;
    summary.installed.push_back({name, pkg.version, pkg.resolved, pkg.integrity});
  }
  return std::nullopt;
}

}  // namespace

mcp::Tool MakeNpmInstallTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "npm_install";
  tool.title = "Install npm packages in the sandbox";
  tool.description =
      "Installs npm packages (\"name\", \"name@1.2.3\", \"@scope/name@^1\") into "
      "/workspace/node_modules, which node in run_code and run_command requires from then on. "
      "Packages come only through the server's package cache from the registries the policy "
      "allows, checked against its allow/deny rules before anything is downloaded; install "
      "scripts do not run unless the policy allows them. Returns what was installed (name, "
      "version, source, integrity) and what was refused and why.";
  tool.input_schema =
      PackagesInputSchema("[\"left-pad@1.3.0\", \"lodash@^4\"]", mcp::Json::object());
  tool.output_schema = InstallOutputSchema("integrity");
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", false},
                      {"idempotentHint", true},
                      {"openWorldHint", true}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) {
    auto args = ParsePackageInstallArgs(json, /*offers_upgrade=*/false);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return RunPackageInstall(env, ctx, Registry::kNpm, "npm_install", "integrity", args->packages,
                             InstallIntoWorkspace);
  };
  return tool;
}

}  // namespace mcpcell::tools
