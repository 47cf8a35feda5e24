// session_info: what the agent's sandbox is and how much of it is left.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"
#include "tools/cell_tools.h"
#include "tools/process_table.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {

// structuredContent's tools_off, and its text line ("" when every tool is on): the tools
// with the same reason together, e.g.
//   tools off: pip_install, npm_install (packages.mode = "disabled"); read_file (not in ...)
std::pair<mcp::Json, std::string> DescribeToolsOff(const CellToolsConfig& config,
                                                   bool snapshot_store) {
  mcp::Json items = mcp::Json::array();
  std::vector<std::pair<std::string, std::string>> groups;  // (reason, tools), first seen first
  for (const ToolOff& off : ToolsOff(config, snapshot_store)) {
    items.push_back({{"tool", off.tool}, {"reason", off.reason}});
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == off.reason; });
    if (group == groups.end()) {
      groups.emplace_back(off.reason, off.tool);
    } else {
      group->second += ", " + off.tool;
    }
  }
  std::string line;
  for (const auto& [reason, tools] : groups)
    line += (line.empty() ? "tools off: " : "; ") + tools + " (" + reason + ")";
  if (!line.empty()) line += "\n";
  return {std::move(items), std::move(line)};
}

mcp::Json SessionInfoOutputSchema() {
  auto integer = mcp::Json{{"type", "integer"}};
  return {
      {"type", "object"},
      {"properties",
       {{"cell_id", {{"type", "string"}}},
        {"policy", {{"type", "string"}}},
        {"template", {{"type", "string"}}},
        {"memory_limit_bytes", integer},
        {"pids_limit", integer},
        {"cpu_millicores", integer},
        {"disk_limits",
         {{"type", "object"},
          {"description",
           "sizes in bytes; RAM-backed filesystems count against the memory limit too. "
           "workspace_bytes 0: /workspace is a host directory with no size limit of its own"},
          {"properties",
           {{"workspace_bytes", integer},
            {"tmp_bytes", integer},
            {"root_writes_bytes", integer},
            {"largest_file_bytes", integer}}}}},
        {"cpu_time_ms", integer},
        {"memory_current_bytes", integer},
        {"peak_memory_bytes", integer},
        {"session_wall_time_s", integer},
        {"state",
         {{"type", "string"},
          {"enum", mcp::Json::array({"running", "paused", "hibernated"})},
          {"description",
           "the session's state: running or paused (a call resumes a paused cell first), or "
           "hibernated (no cell: its programs were stopped, its files kept; the next call "
           "other than session_info starts a cell over them)"}}},
        {"resume_id",
         {{"type", "string"},
          {"description",
           "names this session after a server restart: `mcpcell serve --resume ID` (stdio) or "
           "the same Mcp-Session-Id (HTTP)"}}},
        {"hibernation",
         {{"type", "object"},
          {"description",
           "the session's kept files: hibernated_at (last hibernation), snapshot_id, files and "
           "stored_bytes of the hidden snapshot the session's cells run over, and the tenant's "
           "hidden snapshots together (tenant_bytes) beside their bound (quota_bytes, 0: none)"}}},
        {"paused_s",
         {{"type", "number"},
          {"description", "seconds the session's cell spent paused (frozen when idle)"}}},
        {"idle_expiry_s", integer},
        {"lifetime_left_s", integer},
        {"exec_default_timeout_s", integer},
        {"exec_max_timeout_s", integer},
        {"calls", integer},
        {"cells_created", integer},
        {"network", {{"type", "string"}}},
        {"packages",
         {{"type", "string"},
          {"description", "what pip_install and npm_install may do (the policy's [packages])"}}},
        {"egress",
         {{"type", "object"},
          {"description", "traffic through this cell's egress proxy"},
          {"properties",
           {{"bytes_up", integer},
            {"bytes_down", integer},
            {"connections_total", integer},
            {"connections_active", integer},
            {"connections_refused", integer},
            {"allowlist", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}}},
        {"tools_off",
         {{"type", "array"},
          {"description",
           "tools this session's policy turns off (not in tools/list), each with the policy "
           "key that does"},
          {"items",
           {{"type", "object"},
            {"properties", {{"tool", {{"type", "string"}}}, {"reason", {{"type", "string"}}}}},
            {"required", {"tool", "reason"}},
            {"additionalProperties", false}}}}},
        {"secrets",
         {{"type", "array"},
          {"description",
           "secrets the operator granted to this session (names, never values; docs/secrets.md)"},
          {"items", {{"type", "object"}}}}},
        {"usage",
         {{"type", "object"},
          {"description",
           "this session's metering so far, over every cell it had (what the audit trail's "
           "session.end records): cpu_s, memory_gib_s, peak_memory_bytes, wall_active_s, "
           "wall_paused_s, egress_up_bytes, egress_down_bytes, calls_by_tool"}}},
        {"background_processes",
         {{"type", "array"},
          {"description",
           "this session's background processes (the process tool's list): id, kind, state "
           "(stopped once the cell they ran in ended, e.g. hibernated), detail"},
          {"items", {{"type", "object"}}}}},
        {"warnings", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
      {"required", {"cell_id", "policy", "network", "warnings"}}};
}

// What session_info reports, gathered once for both of its forms.
struct SessionFacts {
  const CellToolsConfig& config;
  SessionKept kept;
  const sandbox::CellLease& cell;
  sandbox::CellSessionInfo info;
  int64_t wall_time_s = 0;
  Result<sandbox::CgroupUsage> usage;
  std::optional<CellEgressReport> egress;  // nullopt: no proxy, or it knows no such cell
  std::optional<SessionUsage> metered;     // the session's metering so far (usage_meter.h)
  bool snapshot_store = false;             // ToolEnv::snapshots is set (the snapshot_* tools)
};

int64_t Seconds(auto d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

// The session's kept files (structured), when it ever hibernated or runs over them.
void AddKept(const SessionKept& k, mcp::Json& s) {
  if (!k.resume_id.empty()) s["resume_id"] = k.resume_id;
  if (k.hibernated_at.empty() && k.snapshot_id.empty()) return;
  s["hibernation"] = {{"hibernated_at", k.hibernated_at},
                      {"snapshot_id", k.snapshot_id},
                      {"files", k.files},
                      {"stored_bytes", k.stored_bytes},
                      {"tenant_bytes", k.tenant_hibernation_bytes},
                      {"quota_bytes", k.quota_bytes}};
}

// Its text: how to resume, and what is kept.
std::string KeptLines(const SessionKept& k) {
  std::string text;
  if (!k.resume_id.empty()) text += "resume after a server restart: " + k.resume_hint + "\n";
  if (!k.snapshot_id.empty()) {
    text += "kept files: " + std::to_string(k.files) + " in hidden snapshot " + k.snapshot_id +
            " (" + std::to_string(k.stored_bytes) + " bytes" +
            (k.hibernated_at.empty() ? "" : ", hibernated at " + k.hibernated_at) +
            "); the tenant's hibernated sessions use " +
            std::to_string(k.tenant_hibernation_bytes) + " bytes" +
            (k.quota_bytes ? " of " + std::to_string(k.quota_bytes) : std::string()) + "\n";
  }
  return text;
}

mcp::Json StructuredReport(const SessionFacts& f) {
  const sandbox::CellSpec& spec = f.cell.spec();
  mcp::Json s = {
      {"cell_id", f.cell.id()},
      {"policy", f.config.policy_name},
      {"template", f.config.template_name},
      {"memory_limit_bytes", spec.limits.memory_max_bytes},
      {"pids_limit", spec.limits.pids_max},
      {"cpu_millicores", spec.limits.cpu_millicores},
      {"disk_limits",
       {{"workspace_bytes", spec.tmpfs.workspace_bytes},
        {"tmp_bytes", spec.tmpfs.tmp_bytes},
        {"root_writes_bytes", spec.tmpfs.root_upper_bytes},
        {"largest_file_bytes", spec.rlimits.fsize_bytes}}},
      {"session_wall_time_s", f.wall_time_s},
      {"state", f.info.paused ? "paused" : "running"},
      {"paused_s", std::chrono::duration<double>(f.info.paused_total).count()},
      {"idle_expiry_s", Seconds(f.info.idle_left)},
      {"lifetime_left_s", Seconds(f.info.lifetime_left)},
      {"calls", f.info.calls},
      {"cells_created", f.info.cells_created},
      {"exec_default_timeout_s", f.config.default_timeout.count()},
      {"exec_max_timeout_s", f.config.max_timeout.count()},
      {"network", f.config.network_summary},
      {"packages", f.config.packages_summary},
      {"warnings", f.cell.warnings()},
  };
  s["tools_off"] = DescribeToolsOff(f.config, f.snapshot_store).first;
  AddKept(f.kept, s);
  if (f.metered) s["usage"] = f.metered->ToJson();
  if (f.usage) {
    s["cpu_time_ms"] = f.usage->cpu_usage_ns / 1000000;
    s["memory_current_bytes"] = f.usage->memory_current_bytes;
    s["peak_memory_bytes"] = f.usage->memory_peak_bytes;
  }
  if (f.egress) {
    const CellEgressReport& st = *f.egress;
    s["egress"] = {{"bytes_up", st.bytes_up},
                   {"bytes_down", st.bytes_down},
                   {"connections_total", st.connections_total},
                   {"connections_active", st.connections_active},
                   {"connections_refused", st.connections_refused},
                   {"allowlist", st.allowlist}};
  }
  return s;
}

// "limits: ..." and "disk: ...", each with its newline.
std::string LimitLines(const sandbox::CellSpec& spec) {
  auto limit = [](uint64_t v, const std::string& unit) {
    return v == 0 ? std::string("unlimited") : std::to_string(v) + unit;
  };
  auto size = [](uint64_t bytes) {  // whole MiB when it is, else exact bytes
    return bytes % (1ull << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                     : std::to_string(bytes) + " bytes";
  };
  const auto& limits = spec.limits;
  return "limits: memory " + limit(limits.memory_max_bytes >> 20, " MiB") + ", processes " +
         limit(limits.pids_max, "") + ", cpu " + limit(limits.cpu_millicores, " millicores") +
         "\n" + "disk: /workspace " +
         (spec.tmpfs.workspace_bytes ? size(spec.tmpfs.workspace_bytes)
                                     : std::string("a host directory (no size limit of its own)")) +
         ", /tmp " + size(spec.tmpfs.tmp_bytes) + ", writes elsewhere " +
         size(spec.tmpfs.root_upper_bytes) + ", largest file " + size(spec.rlimits.fsize_bytes) +
         "\n";
}

std::string TextReport(const SessionFacts& f) {
  const CellToolsConfig& config = f.config;
  std::string text = "cell " + f.cell.id() + " (policy " + config.policy_name + ", template " +
                     config.template_name + ")\n" + LimitLines(f.cell.spec());
  if (f.usage) {
    text += "usage: cpu " + std::to_string(f.usage->cpu_usage_ns / 1000000) + " ms, memory now " +
            std::to_string(f.usage->memory_current_bytes >> 20) + " MiB, peak " +
            std::to_string(f.usage->memory_peak_bytes >> 20) + " MiB\n";
  } else {
    text += "usage: not available (" + f.usage.error().message + ")\n";
  }
  text += "session: " + std::to_string(f.info.calls) + " calls, " + std::to_string(f.wall_time_s) +
          " s old; " + (f.info.paused ? "paused" : "running") + ", paused " +
          std::to_string(Seconds(f.info.paused_total)) + " s in all; idle expiry in " +
          std::to_string(Seconds(f.info.idle_left)) + " s; lifetime left " +
          std::to_string(Seconds(f.info.lifetime_left)) + " s\nexec timeout: default " +
          std::to_string(config.default_timeout.count()) + " s, at most " +
          std::to_string(config.max_timeout.count()) + " s\nnetwork: " + config.network_summary +
          "\npackages: " + config.packages_summary + "\n" +
          DescribeToolsOff(config, f.snapshot_store).second;
  if (f.egress) {
    const CellEgressReport& st = *f.egress;
    text += "egress: " + std::to_string(st.bytes_up) + " bytes up, " +
            std::to_string(st.bytes_down) + " bytes down; connections " +
            std::to_string(st.connections_total) + " total, " +
            std::to_string(st.connections_active) + " open, " +
            std::to_string(st.connections_refused) + " refused\n";
  }
  if (f.metered) {
    const SessionUsage& u = *f.metered;
    char line[256];
    std::snprintf(line, sizeof line,
                  "metered (this session, all its cells): cpu %.3f s, memory %.3f GiB-s, peak "
                  "%llu MiB, wall %.0f s active and %.0f s paused, egress %llu/%llu bytes "
                  "up/down, workspace %llu bytes on disk\n",
                  u.cpu_s, u.memory_gib_s,
                  static_cast<unsigned long long>(u.peak_memory_bytes >> 20), u.wall_active_s,
                  u.wall_paused_s, static_cast<unsigned long long>(u.egress_up_bytes),
                  static_cast<unsigned long long>(u.egress_down_bytes),
                  static_cast<unsigned long long>(u.storage_bytes));
    text += line;
  }
  text += KeptLines(f.kept);
  for (const auto& w : f.cell.warnings()) text += "warning: " + w + "\n";
  return text;
}

// A hibernated session, described without making a cell for it (a cell would end the
// hibernation): what is kept, since when, and what is left of the session.
mcp::ToolResult HibernatedReport(const CellToolsConfig& config, const SessionKept& kept,
                                 const sandbox::CellSessionInfo& info) {
  const int64_t wall_time_s = Seconds(std::chrono::system_clock::now() - info.started_at);
  mcp::Json s = {{"cell_id", ""},
                 {"policy", config.policy_name},
                 {"template", config.template_name},
                 {"state", "hibernated"},
                 {"paused_s", std::chrono::duration<double>(info.paused_total).count()},
                 {"session_wall_time_s", wall_time_s},
                 {"lifetime_left_s", Seconds(info.lifetime_left)},
                 {"calls", info.calls},
                 {"cells_created", info.cells_created},
                 {"network", config.network_summary},
                 {"packages", config.packages_summary},
                 {"warnings", mcp::Json::array()}};
  AddKept(kept, s);
  std::string text =
      "session hibernated" + (kept.hibernated_at.empty() ? "" : " at " + kept.hibernated_at) +
      ": no cell now; its programs were stopped, its files kept (/, /usr and /workspace as "
      "the cell left them; not /tmp, processes or connections). The next call other than "
      "session_info starts a fresh cell over them.\n" +
      "session: " + std::to_string(info.calls) + " calls, " + std::to_string(wall_time_s) +
      " s old; lifetime left " + std::to_string(Seconds(info.lifetime_left)) + " s\n" + "policy " +
      config.policy_name + ", template " + config.template_name + "\n" + KeptLines(kept);
  mcp::ToolResult r = mcp::ToolResult::Text(text);
  r.structured_content = std::move(s);
  return r;
}

// The session's granted secrets: a line each in the text, an array in the structure; never
// a value (tools/secrets_view.h).
std::pair<std::string, mcp::Json> DescribeSecrets(const ToolEnv& env, const mcp::Context& ctx) {
  std::string text;
  mcp::Json list = mcp::Json::array();
  if (!env.secrets) return {text, list};
  for (const SecretStatus& s : env.secrets->Describe(CallKey(ctx))) {
    std::string where = "the file " + s.file;
    if (s.mode == "env") where = "$" + s.name + " in every program's environment";
    if (s.mode == "placeholder") {
      where = "$" + s.name + " holds a placeholder the egress proxy replaces for";
      for (size_t i = 0; i < s.hosts.size(); ++i) where += (i ? ", " : " ") + s.hosts[i];
    }
    const std::string left = s.expired     ? "expired"
                             : s.time_left ? std::to_string(s.time_left->count()) + " s left"
                                           : "for the session's life";
    text += "secret " + s.name + " (" + s.mode + "): " + where + "; " + left + "\n";
    mcp::Json j = {{"name", s.name}, {"mode", s.mode}, {"expired", s.expired}};
    if (!s.hosts.empty()) j["hosts"] = s.hosts;
    if (!s.file.empty()) j["file"] = s.file;
    if (s.time_left) j["time_left_s"] = s.time_left->count();
    list.push_back(std::move(j));
  }
  return {text, list};
}

// session_info takes no arguments: an empty object (ArgReader refuses any field).
Status ParseSessionInfoArgs(const mcp::Json& json) { return ArgReader(json, {}).Finish(); }

mcp::ToolResult SessionInfo(const ToolEnv& env, mcp::Context& ctx) {
  auto session = SessionCells(env, ctx);
  if (!session) return mcp::ToolResult::Error(session.error().message);
  SessionKept kept;
  if (env.snapshots) kept = env.snapshots->Kept(CallKey(ctx), ctx.session().tenant());
  if (const CellToolsConfig* config = SessionConfig(env, ctx); config && kept.hibernated)
    return HibernatedReport(*config, kept, (*session)->Info());
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const sandbox::CellLease& cell = *acquired.lease;
  sandbox::CellSessionInfo info = (*session)->Info();
  const int64_t wall_time_s = Seconds(std::chrono::system_clock::now() - info.started_at);
  MeterCell(env, ctx, cell, /*read_storage=*/true);
  std::optional<SessionUsage> metered;
  if (env.usage) {
    if (auto meter = env.usage->Find(CallKey(ctx))) {
      metered = meter->Snapshot(std::chrono::steady_clock::now());
    }
  }
  kept.hibernated = false;  // the call took a cell: running now
  const SessionFacts facts{
      .config = *acquired.config,
      .kept = std::move(kept),
      .cell = cell,
      .info = info,
      .wall_time_s = wall_time_s,
      .usage = cell.Usage(),
      .egress = env.egress ? env.egress->Report(cell.id()) : std::nullopt,
      .metered = std::move(metered),
      .snapshot_store = env.snapshots != nullptr,
  };
  auto [secrets_text, secrets] = DescribeSecrets(env, ctx);
  auto [processes_text, processes] =
      DescribeBackgroundProcesses(env.processes, CallKey(ctx), cell.id());
  mcp::ToolResult r = mcp::ToolResult::Text(TextReport(facts) + secrets_text + processes_text);
  r.structured_content = StructuredReport(facts);
  if (!secrets.empty()) r.structured_content["secrets"] = std::move(secrets);
  if (!processes.empty()) r.structured_content["background_processes"] = std::move(processes);
  return r;
}

}  // namespace

mcp::Tool MakeSessionInfoTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "session_info";
  tool.title = "Describe this session's sandbox";
  tool.description =
      "Shows this session's sandbox: cell id, policy, limits, usage so far (CPU time, peak "
      "memory, wall time), time left before idle expiry and the session's maximum lifetime, "
      "the network policy with the traffic through the egress proxy so far, what "
      "pip_install/npm_install may install, which tools the policy turns off and why, and "
      "the id that resumes the session after a server restart. Creates the sandbox if it does "
      "not exist yet, except for a hibernated session (it says what is kept instead).";
  tool.input_schema = {
      {"type", "object"}, {"properties", mcp::Json::object()}, {"additionalProperties", false}};
  tool.output_schema = SessionInfoOutputSchema();
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    if (Status st = ParseSessionInfoArgs(json); !st)
      return mcp::ToolResult::Error(st.error().message);
    return SessionInfo(env, ctx);
  };
  return tool;
}

}  // namespace mcpcell::tools
