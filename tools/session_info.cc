// session_info: what the agent's sandbox is and how much of it is left.
#include <algorithm>
#include <utility>
#include <vector>

#include "sandbox/cell_channel.h"
#include "tools/cell_tools.h"

namespace mcpcell::tools {
namespace {

// structuredContent's tools_off, and its text line ("" when every tool is on): the tools
// with the same reason together, e.g.
//   tools off: pip_install, npm_install (packages.mode = "disabled"); read_file (not in ...)
std::pair<mcp::Json, std::string> DescribeToolsOff(const CellToolsConfig& config) {
  mcp::Json items = mcp::Json::array();
  std::vector<std::pair<std::string, std::string>> groups;  // (reason, tools), first seen first
  for (const ToolOff& off : ToolsOff(config)) {
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

}  // namespace

mcp::Tool MakeSessionInfoTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "session_info";
  tool.title = "Describe this session's sandbox";
  tool.description =
      "Shows this session's sandbox: cell id, policy, limits, usage so far (CPU time, peak "
      "memory, wall time), time left before idle expiry and the session's maximum lifetime, "
      "the network policy with the traffic through the egress proxy so far, what "
      "pip_install/npm_install may install, and which tools the policy turns off and why. "
      "Creates the sandbox if it does not exist yet.";
  tool.input_schema = {
      {"type", "object"}, {"properties", mcp::Json::object()}, {"additionalProperties", false}};
  auto integer = mcp::Json{{"type", "integer"}};
  tool.output_schema = {
      {"type", "object"},
      {"properties",
       {{"cell_id", {{"type", "string"}}},
        {"policy", {{"type", "string"}}},
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
        {"warnings", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
      {"required", {"cell_id", "policy", "network", "warnings"}}};
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json&, mcp::Context& ctx) -> mcp::ToolResult {
    LeaseOrError acquired = AcquireCell(env, ctx);
    if (!acquired.lease) return acquired.error;
    auto session = SessionCells(env, ctx);
    if (!session) return mcp::ToolResult::Error(session.error().message);
    const CellToolsConfig& config = *acquired.config;
    sandbox::CellSessionInfo info = (*session)->Info();
    const sandbox::CellLease& cell = *acquired.lease;
    const auto& limits = cell.spec().limits;
    auto secs = [](auto d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); };
    mcp::Json s = {
        {"cell_id", cell.id()},
        {"policy", config.policy_name},
        {"memory_limit_bytes", limits.memory_max_bytes},
        {"pids_limit", limits.pids_max},
        {"cpu_millicores", limits.cpu_millicores},
        {"disk_limits",
         {{"workspace_bytes", cell.spec().tmpfs.workspace_bytes},
          {"tmp_bytes", cell.spec().tmpfs.tmp_bytes},
          {"root_writes_bytes", cell.spec().tmpfs.root_upper_bytes},
          {"largest_file_bytes", cell.spec().rlimits.fsize_bytes}}},
        {"session_wall_time_s", secs(std::chrono::system_clock::now() - info.started_at)},
        {"idle_expiry_s", secs(info.idle_left)},
        {"lifetime_left_s", secs(info.lifetime_left)},
        {"calls", info.calls},
        {"cells_created", info.cells_created},
        {"exec_default_timeout_s", config.default_timeout.count()},
        {"exec_max_timeout_s", config.max_timeout.count()},
        {"network", config.network_summary},
        {"packages", config.packages_summary},
        {"warnings", cell.warnings()},
    };
    auto [tools_off, tools_off_line] = DescribeToolsOff(config);
    s["tools_off"] = std::move(tools_off);
    std::string usage_line;
    if (auto usage = cell.Usage()) {
      s["cpu_time_ms"] = usage->cpu_usage_ns / 1000000;
      s["memory_current_bytes"] = usage->memory_current_bytes;
      s["peak_memory_bytes"] = usage->memory_peak_bytes;
      usage_line = "usage: cpu " + std::to_string(usage->cpu_usage_ns / 1000000) +
                   " ms, memory now " + std::to_string(usage->memory_current_bytes >> 20) +
                   " MiB, peak " + std::to_string(usage->memory_peak_bytes >> 20) + " MiB\n";
    } else {
      usage_line = "usage: not available (" + usage.error().message + ")\n";
    }
    auto limit = [](uint64_t v, const std::string& unit) {
      return v == 0 ? std::string("unlimited") : std::to_string(v) + unit;
    };
    auto size = [](uint64_t bytes) {  // whole MiB when it is, else exact bytes
      return bytes % (1ull << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                       : std::to_string(bytes) + " bytes";
    };
    std::string text =
        "cell " + cell.id() + " (policy " + config.policy_name + ")\n" + "limits: memory " +
        limit(limits.memory_max_bytes >> 20, " MiB") + ", processes " + limit(limits.pids_max, "") +
        ", cpu " + limit(limits.cpu_millicores, " millicores") + "\n" + "disk: /workspace " +
        (cell.spec().tmpfs.workspace_bytes
             ? size(cell.spec().tmpfs.workspace_bytes)
             : std::string("a host directory (no size limit of its own)")) +
        ", /tmp " + size(cell.spec().tmpfs.tmp_bytes) + ", writes elsewhere " +
        size(cell.spec().tmpfs.root_upper_bytes) + ", largest file " +
        size(cell.spec().rlimits.fsize_bytes) + "\n" + usage_line +
        "session: " + std::to_string(info.calls) + " calls, " +
        std::to_string(s["session_wall_time_s"].get<int64_t>()) + " s old; idle expiry in " +
        std::to_string(secs(info.idle_left)) + " s; lifetime left " +
        std::to_string(secs(info.lifetime_left)) + " s\nexec timeout: default " +
        std::to_string(config.default_timeout.count()) + " s, at most " +
        std::to_string(config.max_timeout.count()) + " s\nnetwork: " + config.network_summary +
        "\npackages: " + config.packages_summary + "\n" + tools_off_line;
    if (env.egress) {
      if (auto egress = env.egress->Report(cell.id())) {
        const CellEgressReport& st = *egress;
        s["egress"] = {{"bytes_up", st.bytes_up},
                       {"bytes_down", st.bytes_down},
                       {"connections_total", st.connections_total},
                       {"connections_active", st.connections_active},
                       {"connections_refused", st.connections_refused},
                       {"allowlist", egress->allowlist}};
        text += "egress: " + std::to_string(st.bytes_up) + " bytes up, " +
                std::to_string(st.bytes_down) + " bytes down; connections " +
                std::to_string(st.connections_total) + " total, " +
                std::to_string(st.connections_active) + " open, " +
                std::to_string(st.connections_refused) + " refused\n";
      }
    }
    for (const auto& w : cell.warnings()) text += "warning: " + w + "\n";
    mcp::ToolResult r = mcp::ToolResult::Text(text);
    r.structured_content = std::move(s);
    return r;
  };
  return tool;
}

}  // namespace mcpcell::tools
