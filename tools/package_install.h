// The shared engine of pip_install and npm_install (docs/packages.md): argument checks,
// the policy gate that runs before anything does, the install program's run in the cell,
// and the result.
//
// Order of a call: ParsePackages (every entry a requirement packages::ParseRequirement
// accepts, else an isError naming the entry) → CheckPackagesPolicy (mode, registry, then
// each requirement against packages.allow/deny; one refusal and nothing runs) → the tool
// acquires the cell and runs its steps through an InstallRun (output streamed as progress,
// cancellation and the session's end kill the process group, one timeout for the call) →
// BuildInstallResult (what was installed, what the package service or the egress proxy
// refused during the call, the exit code and a bounded tail of the output).
// Threading: an InstallRun belongs to the handler thread of one call.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/context.h"
#include "mcp/features.h"
#include "packages/rules.h"
#include "sandbox/cell_session.h"
#include "tools/output_capture.h"
#include "tools/progress_streamer.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

inline constexpr size_t kMaxPackagesPerCall = 64;

// A package tool's arguments: the requirements as given, and `upgrade` where the tool
// offers it (pip_install). Strict (tools/tool_args.h); the entries are parsed later, by
// ParsePackages.
struct PackageInstallArgs {
  std::vector<std::string> packages;
  bool upgrade = false;
};
Result<PackageInstallArgs> ParsePackageInstallArgs(const mcp::Json& json, bool offers_upgrade);

// arguments.packages, each entry a requirement of `registry` (1..64 of them).
struct ParsedPackages {
  std::vector<packages::Requirement> requirements;
  std::optional<mcp::ToolResult> error;  // set: the entry that does not parse, named
};
ParsedPackages ParsePackages(const std::vector<std::string>& entries, packages::Registry registry,
                             const std::string& tool);

// The registry package tool `tool` installs from: pip_install pypi, npm_install npm;
// nullopt for any other tool.
std::optional<packages::Registry> PackageToolRegistry(std::string_view tool);

// Why a package tool of `registry` can install nothing at all under `config`, naming the
// policy key (`packages.mode = "disabled"`, `registry "npm" is not in packages.registries`);
// nullopt when it may install something. The one predicate behind both the tool's refusal
// (CheckPackagesPolicy) and its absence from tools/list (cell_tools.h ToolOffReason).
std::optional<std::string> PackageToolOff(const CellToolsConfig& config,
                                          packages::Registry registry);

// nullopt: every requirement may go on; else the isError result (PackageToolOff, or the
// refused requirements with their rules, nothing installed).
std::optional<mcp::ToolResult> CheckPackagesPolicy(
    const CellToolsConfig& config, packages::Registry registry,
    const std::vector<packages::Requirement>& requirements, const std::string& tool);

// A warning to the client (tools/client_log.h, "package_refused"), related to the call,
// for each requirement a CheckPackagesPolicy result refused by the package rules; none
// when the tool is off (the result says so, and tools/list did not offer it).
void LogPolicyRefusals(const mcp::Context& ctx, const std::string& tool,
                       const mcp::ToolResult& refusal);

// The input schema: {packages: [...]} plus `extra` properties.
mcp::Json PackagesInputSchema(const std::string& example, mcp::Json extra_properties);
// The output schema: installed [{name, version, source, <hash_key>}], refused [{package,
// reason}], exit_code, output.
mcp::Json InstallOutputSchema(const std::string& hash_key);

struct InstalledPackage {
  std::string name, version, source, hash;
};
struct RefusedPackage {
  std::string package, reason;
};

// What pip's installation report (`pip install --report`, https://pip.pypa.io/en/stable/
// reference/installation-report/) says it installs: name, version, download URL, sha256.
// The report comes from the cell, so anything unexpected is skipped or refused, never
// trusted to have the right types.
Result<std::vector<InstalledPackage>> ParsePipReport(std::string_view text);

// npm's hidden lockfile (node_modules/.package-lock.json): each installed package by its
// name ("pkg", "@scope/pkg"; a nested copy by its full path), links skipped.
struct LockedPackage {
  std::string version, resolved, integrity;
  bool operator==(const LockedPackage&) const = default;
};
Result<std::map<std::string, LockedPackage>> ParseNpmLockfile(std::string_view text);

// The package a refusal line of the service or the proxy is about ("" when it names none).
std::string PackageOfLine(const std::string& line);

// One call's programs in the cell: each Run appends its output to one bounded capture.
class InstallRun {
 public:
  InstallRun(const ToolEnv& env, mcp::Context& ctx, sandbox::CellLease& lease,
             const CellToolsConfig& config, std::string tool);
  ~InstallRun();

  // Runs argv in the cell (cwd empty: /workspace) within what is left of the call's time.
  // An error result when it could not run, was cancelled or timed out; else its exit code.
  struct Outcome {
    int exit_code = 0;
    std::optional<mcp::ToolResult> error;
  };
  Outcome Run(const std::vector<std::string>& argv, const std::string& cwd = "");

  // The output so far, head and tail kept.
  std::string Output() const;
  // What the package service and the egress proxy refused for this session since the
  // InstallRun began, one entry per line (the package named when the line quotes one).
  std::vector<RefusedPackage> Refusals() const;
  sandbox::CellLease& channel();
  const std::string& call_id() const { return call_id_; }

  // Waits until no other install of this cell runs, then keeps the others waiting until
  // this InstallRun ends: package managers do not guard one environment against two
  // installs at once (pip and the venv it needs, npm's node_modules and its hidden
  // lockfile, which npm_install diffs to say what was installed). An error result when
  // the call is cancelled, its session ends or its time runs out while it waits.
  std::optional<mcp::ToolResult> WaitForOtherInstalls();

 private:
  const ToolEnv& env_;
  mcp::Context& ctx_;
  sandbox::CellLease& lease_;
  const std::string tool_;
  const std::string call_id_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::seconds timeout_;
  uint64_t refusal_cursor_ = 0;
  std::shared_ptr<std::stop_source> stop_;
  OutputCapture output_;
  ProgressStreamer progress_;
  std::shared_ptr<std::timed_mutex> install_lock_;  // this cell's; outlives the guard
  std::unique_lock<std::timed_mutex> install_guard_;
};

struct InstallSummary {
  // Default member initializers so designated initializers build under -Wextra.
  std::string tool = {};      // "pip_install"
  std::string hash_key = {};  // "sha256" / "integrity"
  std::vector<InstalledPackage> installed = {};
  std::vector<RefusedPackage> refused = {};
  int exit_code = 0;
  std::string output = {};
  std::vector<std::string> notes = {};  // lines put before the lists (cell replaced, ...)
};
// isError when the program failed (nothing or not everything was installed).
mcp::ToolResult BuildInstallResult(const InstallSummary& summary);

// What a package tool's own steps work with once the shared start is done.
struct InstallCall {
  InstallRun& run;
  const CellToolsConfig& config;  // the session's
  const std::vector<packages::Requirement>& requirements;
  InstallSummary& summary;  // the steps fill installed, refused, exit_code, output
};
// A tool's own steps: an error result ends the call with it; nullopt, the summary is built.
using InstallSteps = std::function<std::optional<mcp::ToolResult>(InstallCall&)>;

// One package tool call, the start every package tool shares first: ParsePackages,
// CheckPackagesPolicy (its refusals logged to the client too), the cell acquired, an
// InstallRun begun, the cell's other installs waited for. Then `steps`, then
// BuildInstallResult. `hash_key` names the hash in the result ("sha256", "integrity").
mcp::ToolResult RunPackageInstall(const ToolEnv& env, mcp::Context& ctx,
                                  packages::Registry registry, const std::string& tool,
                                  const std::string& hash_key,
                                  const std::vector<std::string>& packages,
                                  const InstallSteps& steps);

}  // namespace mcpcell::tools
