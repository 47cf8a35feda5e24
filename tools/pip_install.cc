// pip_install: Python packages into the session's virtual environment (/workspace/.venv,
// made on first use with the template's site packages visible), from the server's package
// service only, so run_code and run_command python see them in later calls. Wheels only
// unless the policy allows sdists. What was installed comes from pip's --report.
#include "packages/service.h"
#include "policies/package_env.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_tools.h"
#include "tools/package_install.h"

namespace mcpcell::tools {
namespace {

using packages::Registry;
using policies::kSystemPython;
using policies::kVenvDir;
using policies::kVenvPython;

constexpr uint64_t kMaxReportBytes = 16 << 20;

// `pip` and `pip3` in the venv's bin, so `run_command "pip install x"` installs there too
// (the venv is made --without-pip, which is fast; its python finds the template's pip).
constexpr char kPipShim[] =
    "#!/workspace/.venv/bin/python\n"
    "# mcpcell: the template's pip, run by this virtual environment's python.\n"
    "import sys\n"
    "from pip._internal.cli.main import main\n"
    "sys.exit(main())\n";

// Makes the venv when its python is missing. nullopt: ready.
// The caller holds the cell's install lock (InstallRun::WaitForOtherInstalls): two calls
// that both found no venv would both run `venv`, and the second rewrites pyvenv.cfg while
// the first one's pip starts ("No module named pip": the system site-packages unseen).
std::optional<mcp::ToolResult> EnsureVenv(InstallRun& run) {
  if (run.channel().Stat(kVenvPython, /*follow_symlinks=*/true)) return std::nullopt;
  // A venv left half made (a call killed while making it) is made again over it; venv
  // may fail once on what is there ("File exists") and a second run succeeds.
  for (int attempt = 0;; ++attempt) {
    auto made =
        run.Run({kSystemPython, "-m", "venv", "--system-site-packages", "--without-pip", kVenvDir});
    if (made.error) return made.error;
    if (made.exit_code == 0) break;
    if (attempt == 1) {
      return mcp::ToolResult::Error("pip_install: could not create the virtual environment " +
                                    std::string(kVenvDir) + " (exit code " +
                                    std::to_string(made.exit_code) + "):\n" + run.Output());
    }
  }
  for (const char* name : {"pip", "pip3"}) {
    const std::string path = std::string(kVenvDir) + "/bin/" + name;
    if (Status st = run.channel().WriteFile(path, kPipShim, 0755); !st) {
      return SandboxError("pip_install", st.error(), "Could not write " + path + ".");
    }
  }
  return std::nullopt;
}

// pip_install's own steps: the venv, then `pip install --report`, which says what it
// installed.
std::optional<mcp::ToolResult> InstallIntoVenv(InstallCall& call, bool upgrade) {
  InstallRun& run = call.run;
  if (auto error = EnsureVenv(run)) return error;
  const std::string report = "/tmp/.mcpcell/pip-report-" + run.call_id() + ".json";
  if (Status st = run.channel().Mkdir("/tmp/.mcpcell", 0755, /*parents=*/true); !st)
    return SandboxError("pip_install", st.error());
  std::vector<std::string> argv = {kVenvPython,
                                   "-m",
                                   "pip",
                                   "install",
                                   "--no-input",
                                   "--disable-pip-version-check",
                                   "--no-cache-dir",
                                   "--progress-bar",
                                   "off",
                                   "--index-url",
                                   packages::kPypiIndexUrl,
                                   "--trusted-host",
                                   packages::kServiceHost,
                                   "--report",
                                   report};
  // Wheels only: an sdist's build runs its setup code at install time.
  if (!call.config.packages.allow_sdist) argv.insert(argv.end(), {"--only-binary", ":all:"});
  if (upgrade) argv.push_back("--upgrade");
  argv.push_back("--");
  for (const packages::Requirement& req : call.requirements) argv.push_back(req.raw);

  InstallRun::Outcome outcome = run.Run(argv);
  if (outcome.error) return outcome.error;
  InstallSummary& summary = call.summary;
  summary.exit_code = outcome.exit_code;
  summary.output = run.Output();
  summary.refused = run.Refusals();
  // pip writes the report after resolving, before installing: it lists what was installed
  // only when pip succeeded.
  if (outcome.exit_code == 0) {
    auto text = ReadCellFile(run.channel(), report, kMaxReportBytes, nullptr);
    if (!text) return SandboxError("pip_install", text.error(), "pip wrote no report.");
    auto installed = ParsePipReport(*text);
    if (!installed) return SandboxError("pip_install", installed.error());
    summary.installed = std::move(*installed);
  }
  (void)run.channel().Remove(report);
  return std::nullopt;
}

mcp::ToolResult Install(const ToolEnv& env, mcp::Context& ctx, const PackageInstallArgs& args) {
  return RunPackageInstall(
      env, ctx, Registry::kPypi, "pip_install", "sha256", args.packages,
      [&args](InstallCall& call) { return InstallIntoVenv(call, args.upgrade); });
}

}  // namespace

mcp::Tool MakePipInstallTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "pip_install";
  tool.title = "Install Python packages in the sandbox";
  tool.description =
      "Installs Python packages (pip requirement strings) into this session's virtual "
      "environment at /workspace/.venv, which python3 in run_code and run_command uses from "
      "then on. Packages come only through the server's package cache from the registries "
      "the policy allows, checked against its allow/deny rules before anything is "
      "downloaded; wheels only unless the policy allows sdists. Returns what was installed "
      "(name, version, source, sha256) and what was refused and why.";
  tool.input_schema = PackagesInputSchema(
      "[\"requests==2.32.3\", \"numpy>=2\"]",
      {{"upgrade",
        {{"type", "boolean"},
         {"description", "upgrade packages already installed to the newest allowed version"}}}});
  tool.output_schema = InstallOutputSchema("sha256");
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", false},
                      {"idempotentHint", true},
                      {"openWorldHint", true}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) {
    auto args = ParsePackageInstallArgs(json, /*offers_upgrade=*/true);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return Install(env, ctx, *args);
  };
  return tool;
}

}  // namespace mcpcell::tools
