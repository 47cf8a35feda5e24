// pip_install: Python packages into the session's virtual environment (/workspace/.venv,
// made on first use with the template's site packages visible), from the server's package
// service only, so run_code and run_command python see them in later calls. Wheels only
// unless the policy allows sdists. What was installed comes from pip's --report.
#include "packages/service.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_tools.h"
#include "tools/package_env.h"
#include "tools/package_install.h"

namespace mcpcell::tools {
namespace {

using packages::Registry;

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
std::optional<mcp::ToolResult> EnsureVenv(InstallRun& run) {
  if (run.channel().Stat(kVenvPython, /*follow_symlinks=*/true)) return std::nullopt;
  auto made =
      run.Run({kSystemPython, "-m", "venv", "--system-site-packages", "--without-pip", kVenvDir});
  if (made.error) return made.error;
  if (made.exit_code != 0) {
    return mcp::ToolResult::Error("pip_install: could not create the virtual environment " +
                                  std::string(kVenvDir) + " (exit code " +
                                  std::to_string(made.exit_code) + "):\n" + run.Output());
  }
  for (const char* name : {"pip", "pip3"}) {
    const std::string path = std::string(kVenvDir) + "/bin/" + name;
    if (sandbox::Status st = run.channel().WriteFile(path, kPipShim, 0755); !st) {
      return SandboxError("pip_install", st.error(), "Could not write " + path + ".");
    }
  }
  return std::nullopt;
}

// "sha256=<hex>" (pip 23.0's archive_info.hash) or archive_info.hashes.sha256.
std::string Sha256Of(const mcp::Json& download_info) {
  const mcp::Json* archive =
      download_info.contains("archive_info") && download_info["archive_info"].is_object()
          ? &download_info["archive_info"]
          : nullptr;
  if (!archive) return "";
  if (auto h = archive->find("hashes"); h != archive->end() && h->is_object()) {
    if (auto s = h->find("sha256"); s != h->end() && s->is_string()) return s->get<std::string>();
  }
  if (auto h = archive->find("hash"); h != archive->end() && h->is_string()) {
    const std::string& v = h->get_ref<const std::string&>();
    if (v.rfind("sha256=", 0) == 0) return v.substr(7);
  }
  return "";
}

// The packages of pip's installation report (https://pip.pypa.io/en/stable/reference/
// installation-report/): one entry per distribution it installs.
sandbox::Result<std::vector<InstalledPackage>> ParseReport(const std::string& text) {
  mcp::Json report = mcp::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("install") || !report["install"].is_array()) {
    return sandbox::Error::Msg("pip's report is not a JSON object with an \"install\" list");
  }
  std::vector<InstalledPackage> out;
  for (const mcp::Json& item : report["install"]) {
    if (!item.is_object()) continue;
    InstalledPackage p;
    const mcp::Json metadata = item.value("metadata", mcp::Json::object());
    if (metadata.is_object()) {
      p.name = metadata.value("name", "");
      p.version = metadata.value("version", "");
    }
    const mcp::Json download = item.value("download_info", mcp::Json::object());
    if (download.is_object()) {
      p.source = download.value("url", "");
      p.hash = Sha256Of(download);
    }
    if (!p.name.empty()) out.push_back(std::move(p));
  }
  return out;
}

mcp::ToolResult Install(const ToolEnv& env, mcp::Context& ctx, const mcp::Json& args) {
  ParsedPackages parsed = ParsePackages(args, Registry::kPypi, "pip_install");
  if (parsed.error) return *parsed.error;
  const CellToolsConfig* session_config = SessionConfig(env, ctx);
  if (!session_config) return mcp::ToolResult::Error("pip_install: no policy for this session");
  if (auto refused =
          CheckPackagesPolicy(*session_config, Registry::kPypi, parsed.requirements, "pip_install"))
    return *refused;

  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const CellToolsConfig& config = *acquired.config;
  InstallRun run(env, ctx, *acquired.lease, config, "pip_install");
  InstallSummary summary{.tool = "pip_install", .hash_key = "sha256"};
  if (!acquired.lease->replaced_reason().empty())
    summary.notes.push_back(acquired.lease->replaced_reason());

  if (auto error = EnsureVenv(run)) return *error;
  const std::string report = "/tmp/.mcpcell/pip-report-" + run.call_id() + ".json";
  if (sandbox::Status st = run.channel().Mkdir("/tmp/.mcpcell", 0755, /*parents=*/true); !st)
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
  if (!config.packages.allow_sdist) argv.insert(argv.end(), {"--only-binary", ":all:"});
  if (args.value("upgrade", false)) argv.push_back("--upgrade");
  argv.push_back("--");
  for (const packages::Requirement& req : parsed.requirements) argv.push_back(req.raw);

  InstallRun::Outcome outcome = run.Run(argv);
  if (outcome.error) return *outcome.error;
  summary.exit_code = outcome.exit_code;
  summary.output = run.Output();
  summary.refused = run.Refusals();
  // pip writes the report after resolving, before installing: it lists what was installed
  // only when pip succeeded.
  if (outcome.exit_code == 0) {
    auto text = ReadCellFile(run.channel(), report, kMaxReportBytes, nullptr);
    if (!text) return SandboxError("pip_install", text.error(), "pip wrote no report.");
    auto installed = ParseReport(*text);
    if (!installed) return SandboxError("pip_install", installed.error());
    summary.installed = std::move(*installed);
  }
  (void)run.channel().Remove(report);
  return BuildInstallResult(summary);
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
  tool.handler = [&env](const mcp::Json& args, mcp::Context& ctx) {
    return Install(env, ctx, args);
  };
  return tool;
}

}  // namespace mcpcell::tools
