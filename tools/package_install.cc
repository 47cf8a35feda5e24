#include "tools/package_install.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>

#include "base/utf8.h"
#include "policies/package_env.h"
#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"
#include "tools/client_log.h"
#include "tools/exec_runner.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {

// Output kept in the result: pip and npm say what failed at the end.
constexpr size_t kKeptOutputBytes = 12 * 1024;

std::string RegistryKey(packages::Registry r) { return std::string(packages::RegistryName(r)); }

// obj[key] when it is a string, else "" (the JSON comes from the cell).
std::string StringField(const mcp::Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const mcp::Json* ObjectField(const mcp::Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

// archive_info.hashes.sha256, or archive_info.hash "sha256=<hex>" (pip 23.0 writes only
// the latter).
std::string ReportSha256(const mcp::Json& download_info) {
  const mcp::Json* archive = ObjectField(download_info, "archive_info");
  if (!archive) return "";
  if (const mcp::Json* hashes = ObjectField(*archive, "hashes")) {
    if (std::string h = StringField(*hashes, "sha256"); !h.empty()) return h;
  }
  std::string hash = StringField(*archive, "hash");
  return hash.rfind("sha256=", 0) == 0 ? hash.substr(7) : "";
}

}  // namespace

Result<std::vector<InstalledPackage>> ParsePipReport(std::string_view text) {
  mcp::Json report = mcp::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("install") || !report["install"].is_array()) {
    return Error::Msg("pip's report is not a JSON object with an \"install\" list");
  }
  std::vector<InstalledPackage> out;
  for (const mcp::Json& item : report["install"]) {
    const mcp::Json* metadata = ObjectField(item, "metadata");
    if (!metadata) continue;
    InstalledPackage p{StringField(*metadata, "name"), StringField(*metadata, "version"), "", ""};
    if (const mcp::Json* download = ObjectField(item, "download_info")) {
      p.source = StringField(*download, "url");
      p.hash = ReportSha256(*download);
    }
    if (!p.name.empty()) out.push_back(std::move(p));
  }
  return out;
}

Result<std::map<std::string, LockedPackage>> ParseNpmLockfile(std::string_view text) {
  mcp::Json lock = mcp::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const mcp::Json* packages = ObjectField(lock, "packages");
  if (!packages) return Error::Msg("not a JSON object with \"packages\"");
  static constexpr std::string_view kPrefix = "node_modules/";
  std::map<std::string, LockedPackage> out;
  for (const auto& [path, entry] : packages->items()) {
    if (!entry.is_object()) continue;
    if (auto link = entry.find("link"); link != entry.end() && link->is_boolean() && *link)
      continue;
    size_t at = path.rfind(kPrefix);
    if (at == std::string::npos || path.size() == at + kPrefix.size()) continue;
    std::string name = at == 0 ? path.substr(kPrefix.size()) : path;
    out[name] = LockedPackage{StringField(entry, "version"), StringField(entry, "resolved"),
                              StringField(entry, "integrity")};
  }
  return out;
}

// The package a refusal line is about: its first "quoted" word (the rules and the service
// quote the package), else the name in an artifact's file name ("pkg-1.0-py3-none-any.whl",
// "pkg-1.0.tar.gz", "pkg-1.0.0.tgz"), else "".
std::string PackageOfLine(const std::string& line) {
  if (size_t open = line.find('"'); open != std::string::npos) {
    size_t close = line.find('"', open + 1);
    if (close != std::string::npos && close > open + 1 && close - open <= 220)
      return line.substr(open + 1, close - open - 1);
  }
  for (const char* ext : {".whl", ".tar.gz", ".tgz", ".zip"}) {
    size_t end = line.find(ext);
    if (end == std::string::npos) continue;
    size_t start = line.find_last_of(" /:", end);
    start = start == std::string::npos ? 0 : start + 1;
    std::string file = line.substr(start, end - start);
    // The version starts at the first "-<digit>" (wheel names escape '-' as '_').
    for (size_t i = 0; i + 1 < file.size(); ++i) {
      if (file[i] == '-' && std::isdigit(static_cast<unsigned char>(file[i + 1])) && i > 0)
        return file.substr(0, i);
    }
  }
  return "";
}

Result<PackageInstallArgs> ParsePackageInstallArgs(const mcp::Json& json, bool offers_upgrade) {
  ArgReader reader(json, offers_upgrade ? std::vector<std::string>{"packages", "upgrade"}
                                        : std::vector<std::string>{"packages"});
  PackageInstallArgs args;
  args.packages = reader.StringArray("packages");
  if (offers_upgrade) args.upgrade = reader.OptionalBool("upgrade").value_or(false);
  if (Status st = reader.Finish(); !st) return st.error();
  return args;
}

ParsedPackages ParsePackages(const std::vector<std::string>& list, packages::Registry registry,
                             const std::string& tool) {
  ParsedPackages out;
  if (list.empty() || list.size() > kMaxPackagesPerCall) {
    out.error = mcp::ToolResult::Error("arguments.packages: give 1 to " +
                                       std::to_string(kMaxPackagesPerCall) + " packages, got " +
                                       std::to_string(list.size()));
    return out;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string& raw = list[i];
    const std::string where =
        "arguments.packages[" + std::to_string(i) + "] \"" + ToValidUtf8(raw.substr(0, 200)) + "\"";
    // An entry is one requirement, never an option of the installer.
    if (!raw.empty() && raw[0] == '-') {
      out.error = mcp::ToolResult::Error(where +
                                         ": starts with '-': options are not accepted, "
                                         "only package requirements");
      return out;
    }
    auto req = packages::ParseRequirement(registry, raw);
    if (!req) {
      out.error = mcp::ToolResult::Error(where + ": " + req.error().message + " (" + tool +
                                         " takes " + RegistryKey(registry) + " requirements)");
      return out;
    }
    out.requirements.push_back(std::move(*req));
  }
  return out;
}

std::optional<packages::Registry> PackageToolRegistry(std::string_view tool) {
  if (tool == "pip_install") return packages::Registry::kPypi;
  if (tool == "npm_install") return packages::Registry::kNpm;
  return std::nullopt;
}

std::optional<std::string> PackageToolOff(const CellToolsConfig& config,
                                          packages::Registry registry) {
  if (config.packages.mode == policies::PackagesMode::kDisabled)
    return std::string("packages.mode = \"disabled\"");
  return packages::CheckRegistryEnabled(config.packages, registry);
}

std::optional<mcp::ToolResult> CheckPackagesPolicy(
    const CellToolsConfig& config, packages::Registry registry,
    const std::vector<packages::Requirement>& requirements, const std::string& tool) {
  const policies::PackagesPolicy& p = config.packages;
  if (auto off = PackageToolOff(config, registry)) {
    if (p.mode == policies::PackagesMode::kDisabled) {
      return mcp::ToolResult::Error(tool + ": packages are disabled by policy " +
                                    config.policy_name + " (" + *off +
                                    "); nothing was installed. Ask the operator for a policy "
                                    "that enables them.");
    }
    return mcp::ToolResult::Error(tool + ": " + *off + " (policy " + config.policy_name +
                                  "); nothing was installed.");
  }
  mcp::Json refused = mcp::Json::array();
  std::string text;
  for (const packages::Requirement& req : requirements) {
    if (auto why = packages::CheckRequirement(p, req)) {
      refused.push_back({{"package", req.raw}, {"reason", *why}});
      text += "  " + req.raw + ": " + *why + "\n";
    }
  }
  if (refused.empty()) return std::nullopt;
  mcp::ToolResult r = mcp::ToolResult::Text(
      tool + ": refused by policy " + config.policy_name + " before anything was downloaded; " +
      "nothing was installed (" + std::to_string(refused.size()) + " of " +
      std::to_string(requirements.size()) + " requested refused):\n" + text +
      "Remove the refused ones to install the others.");
  r.structured_content = {{"installed", mcp::Json::array()},
                          {"refused", std::move(refused)},
                          {"exit_code", -1},
                          {"output", ""}};
  r.is_error = true;
  return r;
}

void LogPolicyRefusals(const mcp::Context& ctx, const std::string& tool,
                       const mcp::ToolResult& refusal) {
  const mcp::Json& result = refusal.structured_content;
  if (!result.is_object()) return;
  auto refused = result.find("refused");
  if (refused == result.end() || !refused->is_array()) return;
  for (const mcp::Json& item : *refused) {
    LogCallWarning(
        ctx, kEventPackageRefused,
        tool + " refused " + StringField(item, "package") + ": " + StringField(item, "reason"));
  }
}

mcp::Json PackagesInputSchema(const std::string& example, mcp::Json extra_properties) {
  mcp::Json properties = {{"packages",
                           {{"type", "array"},
                            {"minItems", 1},
                            {"maxItems", kMaxPackagesPerCall},
                            {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 1024}}},
                            {"description", "what to install, e.g. " + example}}}};
  for (auto& [key, value] : extra_properties.items()) properties[key] = value;
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", {"packages"}},
          {"additionalProperties", false}};
}

mcp::Json InstallOutputSchema(const std::string& hash_key) {
  auto string = [](const char* d) { return mcp::Json{{"type", "string"}, {"description", d}}; };
  mcp::Json installed_item = {
      {"type", "object"},
      {"properties",
       {{"name", string("package name")},
        {"version", string("installed version")},
        {"source", string("where the artifact came from (the server's package service URL)")},
        {hash_key, string(hash_key == "sha256" ? "sha256 of the artifact (hex)"
                                               : "the tarball's Subresource Integrity hash")}}},
      {"required", {"name", "version"}},
      {"additionalProperties", false}};
  mcp::Json refused_item = {{"type", "object"},
                            {"properties",
                             {{"package", string("the requirement or package refused")},
                              {"reason", string("why, naming the policy rule")}}},
                            {"required", {"package", "reason"}},
                            {"additionalProperties", false}};
  return {{"type", "object"},
          {"properties",
           {{"installed",
             {{"type", "array"},
              {"items", installed_item},
              {"description", "what this call installed (dependencies included)"}}},
            {"refused",
             {{"type", "array"},
              {"items", refused_item},
              {"description", "what the policy, the package service or the proxy refused"}}},
            {"exit_code",
             {{"type", "integer"},
              {"description", "the installer's exit status; -1 when it did not run"}}},
            {"output", string("the installer's output (head and tail when long)")}}},
          {"required", {"installed", "refused", "exit_code", "output"}},
          {"additionalProperties", false}};
}

InstallRun::InstallRun(const ToolEnv& env, mcp::Context& ctx, sandbox::CellLease& lease,
                       const CellToolsConfig& config, std::string tool)
    : env_(env),
      ctx_(ctx),
      lease_(lease),
      tool_(std::move(tool)),
      call_id_(NewCallId()),
      timeout_(config.max_timeout),
      stop_(std::make_shared<std::stop_source>()),
      output_(kKeptOutputBytes),
      progress_(ctx, config) {
  // An install may take as long as the longest call the policy allows.
  deadline_ = std::chrono::steady_clock::now() + timeout_;
  if (env_.egress) refusal_cursor_ = env_.egress->RefusalCursor(lease_.id());
  ctx_.OnCancel([stop = stop_] { stop->request_stop(); });
}

InstallRun::~InstallRun() { progress_.Stop(); }

namespace {
// One lock per cell for its installs, kept while some InstallRun holds it.
std::shared_ptr<std::timed_mutex> CellInstallLock(const std::string& cell_id) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<std::timed_mutex>> locks;
  std::lock_guard guard(mu);
  std::erase_if(locks, [](const auto& entry) { return entry.second.expired(); });
  std::shared_ptr<std::timed_mutex> lock = locks[cell_id].lock();
  if (!lock) {
    lock = std::make_shared<std::timed_mutex>();
    locks[cell_id] = lock;
  }
  return lock;
}
}  // namespace

std::optional<mcp::ToolResult> InstallRun::WaitForOtherInstalls() {
  install_lock_ = CellInstallLock(lease_.id());
  install_guard_ = std::unique_lock(*install_lock_, std::defer_lock);
  while (!install_guard_.try_lock_for(std::chrono::milliseconds(100))) {
    if (ctx_.cancelled() || lease_.stop_token().stop_requested())
      return mcp::ToolResult::Error(
          tool_ + ": cancelled while waiting for another install of this session to finish");
    if (std::chrono::steady_clock::now() >= deadline_)
      return mcp::ToolResult::Error(
          tool_ + " timed out after " + std::to_string(timeout_.count()) +
          " s waiting for another install of this session (pip_install or npm_install) to "
          "finish; nothing was installed. Try again once it has.");
  }
  // What the proxy refused while the other install ran was the other's.
  if (env_.egress) refusal_cursor_ = env_.egress->RefusalCursor(lease_.id());
  return std::nullopt;
}

sandbox::CellLease& InstallRun::channel() { return lease_; }

InstallRun::Outcome InstallRun::Run(const std::vector<std::string>& argv, const std::string& cwd) {
  Outcome outcome;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline_ - std::chrono::steady_clock::now());
  auto timed_out = [&] {
    return mcp::ToolResult::Error(
        tool_ + " timed out after " + std::to_string(timeout_.count()) +
        " s (the policy's longest call, time.exec_max): the installer was killed and the " +
        "install may be incomplete. Install fewer packages at a time.\n--- output ---\n" +
        Output());
  };
  if (left.count() <= 0) {
    outcome.error = timed_out();
    return outcome;
  }
  std::stop_callback on_close(lease_.stop_token(), [stop = stop_] { stop->request_stop(); });
  sandbox::ExecOptions opts;
  opts.argv = argv;
  opts.cwd = cwd;
  opts.timeout = left;
  opts.keep_bytes = 0;
  opts.stop = stop_->get_token();
  opts.on_output = [this](sandbox::OutputStream stream, std::string_view chunk) {
    output_.Append(chunk);
    progress_.Add(stream == sandbox::OutputStream::kStdout ? "stdout" : "stderr", chunk);
  };
  auto result = channel().Exec(opts);
  if (!result) {
    outcome.error =
        SandboxError(tool_, result.error(),
                     channel().alive() ? "The installer could not be started in the cell."
                                       : "The cell stopped; the next call gets a fresh cell.");
    return outcome;
  }
  if (result->cancelled) {
    outcome.error = mcp::ToolResult::Error(
        lease_.stop_token().stop_requested()
            ? tool_ + " stopped: the session is ending, so its cell and the installer were killed."
            : tool_ + " cancelled: the installer was killed; the install may be incomplete.");
    return outcome;
  }
  if (result->timed_out) {
    outcome.error = timed_out();
    return outcome;
  }
  if (result->oom_killed) {
    outcome.error = mcp::ToolResult::Error(
        tool_ +
        " failed: the installer ran out of memory (the cell's memory limit).\n--- "
        "output ---\n" +
        Output());
    return outcome;
  }
  outcome.exit_code = result->signaled ? 128 + result->signo : result->exit_code;
  return outcome;
}

std::string InstallRun::Output() const { return output_.Render(""); }

std::vector<RefusedPackage> InstallRun::Refusals() const {
  std::vector<RefusedPackage> out;
  if (!env_.egress) return out;
  for (std::string& line : env_.egress->RefusalsSince(lease_.id(), refusal_cursor_)) {
    out.push_back({PackageOfLine(line), std::move(line)});
  }
  return out;
}

mcp::ToolResult BuildInstallResult(const InstallSummary& s) {
  const bool failed = s.exit_code != 0;
  std::string text;
  for (const std::string& note : s.notes) text += "note: " + note + "\n";
  if (failed) {
    text += s.tool + " failed (exit code " + std::to_string(s.exit_code) + ")";
    text += s.installed.empty() ? ": nothing was installed.\n"
                                : "; these were installed before it failed:\n";
  } else if (s.installed.empty()) {
    text += s.tool + ": nothing new to install (already installed).\n";
  } else {
    text += s.tool + ": installed " + std::to_string(s.installed.size()) + " package" +
            (s.installed.size() == 1 ? "" : "s") + ":\n";
  }
  mcp::Json installed = mcp::Json::array();
  for (const InstalledPackage& p : s.installed) {
    mcp::Json item = {{"name", p.name}, {"version", p.version}};
    if (!p.source.empty()) item["source"] = p.source;
    if (!p.hash.empty()) item[s.hash_key] = p.hash;
    installed.push_back(std::move(item));
    text += "  " + p.name + " " + p.version;
    if (!p.hash.empty()) text += " (" + s.hash_key + " " + p.hash + ")";
    text += "\n";
  }
  mcp::Json refused = mcp::Json::array();
  if (!s.refused.empty()) text += "refused (by the policy, the package service or the proxy):\n";
  for (const RefusedPackage& r : s.refused) {
    refused.push_back({{"package", r.package}, {"reason", r.reason}});
    text += "  " + r.reason + "\n";
  }
  if (!s.output.empty()) text += "--- output ---\n" + s.output;
  if (!text.empty() && text.back() != '\n') text += '\n';
  mcp::ToolResult result = mcp::ToolResult::Text(std::move(text));
  result.structured_content = {{"installed", std::move(installed)},
                               {"refused", std::move(refused)},
                               {"exit_code", s.exit_code},
                               {"output", s.output}};
  result.is_error = failed;
  return result;
}

mcp::ToolResult RunPackageInstall(const ToolEnv& env, mcp::Context& ctx,
                                  packages::Registry registry, const std::string& tool,
                                  const std::string& hash_key,
                                  const std::vector<std::string>& packages,
                                  const InstallSteps& steps) {
  ParsedPackages parsed = ParsePackages(packages, registry, tool);
  if (parsed.error) return *parsed.error;
  const CellToolsConfig* session_config = SessionConfig(env, ctx);
  if (!session_config) return mcp::ToolResult::Error(tool + ": no policy for this session");
  if (auto refused = CheckPackagesPolicy(*session_config, registry, parsed.requirements, tool)) {
    LogPolicyRefusals(ctx, tool, *refused);
    // Refused before any request reaches the package service, so no package.* record
    // follows: the call itself is the policy's refusal.
    const mcp::Json& shown = refused->structured_content;  // null when packages are off
    AuditEvent(env, ctx, "", "policy.refused",
               {{"call", "tools/call " + tool},
                {"rule", "packages of policy " + session_config->policy_name},
                {"refused", shown.is_object() ? shown.value("refused", mcp::Json::array())
                                              : mcp::Json::array()}});
    return *refused;
  }

  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const CellToolsConfig& config = *acquired.config;
  InstallRun run(env, ctx, *acquired.lease, config, tool);
  InstallSummary summary{.tool = tool, .hash_key = hash_key};
  if (!acquired.lease->replaced_reason().empty())
    summary.notes.push_back(acquired.lease->replaced_reason());

  if (auto error = run.WaitForOtherInstalls()) return *error;
  InstallCall call{run, config, parsed.requirements, summary};
  if (auto error = steps(call)) return *error;
  return BuildInstallResult(summary);
}

}  // namespace mcpcell::tools
