#include "tools/audit_events.h"

#include <sys/statvfs.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "audit/record.h"
#include "audit/trail.h"
#include "mcp/log.h"
#include "mcp/session.h"

namespace mcpcell::tools {

void AuditEvent(const ToolEnv& env, const mcp::Context& ctx, const std::string& cell_id,
                std::string_view type, const nlohmann::json& fields) {
  const mcp::Session& session = ctx.session();
  if (env.on_event) env.on_event(session, type, fields);
  if (!env.audit) return;
  if (Status st = env.audit->Append(type, session.tenant(), CallKey(ctx), cell_id, fields); !st) {
    mcp::log::Warn("audit: " + std::string(type) + " not recorded: " + st.error().message);
  }
}

nlohmann::json CommandFields(const CellToolsConfig& config, std::string_view command_text) {
  nlohmann::json fields = {{"command_sha256", audit::Sha256Hex(command_text)}};
  if (config.audit_command_text) fields["command"] = std::string(command_text);
  return fields;
}

void AuditFileCall(const ToolEnv& env, const mcp::Context& ctx, std::string_view op,
                   const std::string& path, const mcp::ToolResult& result, const char* bytes_key) {
  if (!env.audit) return;
  std::string cell_id;
  if (auto cells = SessionCells(env, ctx); cells && *cells) cell_id = (*cells)->Info().cell_id;
  uint64_t bytes = 0;
  const mcp::Json& s = result.structured_content;
  if (!result.is_error && s.is_object() && s.contains(bytes_key) &&
      s[bytes_key].is_number_unsigned()) {
    bytes = s[bytes_key].get<uint64_t>();
  }
  AuditEvent(env, ctx, cell_id, "file." + std::string(op),
             {{"path", path}, {"bytes", bytes}, {"result", result.is_error ? "error" : "ok"}});
}

std::string WorkspaceHostDir(const sandbox::CellSpec& spec) {
  if (!spec.workspace_host_dir.empty()) return spec.workspace_host_dir;
  return spec.state_dir + "/cells/" + spec.id + "/workspace";
}

namespace {

// The start time (clock ticks after boot, /proc/PID/stat field 22) of `pid`, or 0.
uint64_t ProcessStartTicks(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

// A workspace that is a tmpfs of the cell's own (CellSpec::tmpfs.workspace_bytes): its used
// blocks, through the cell init's root (/proc/<init>/root/workspace; the init's pid and
// start time from <cell dir>/init, sandbox/state_dir.h), checked to be that init still.
Result<uint64_t> CellTmpfsWorkspaceBytes(const sandbox::CellSpec& spec) {
  const std::string record = spec.state_dir + "/cells/" + spec.id + "/init";
  std::ifstream in(record);
  std::string pid;
  uint64_t start = 0;
  if (!(in >> pid >> start)) return Error::Msg("cannot read the cell's init record " + record);
  if (ProcessStartTicks(pid) != start) return Error::Msg("the cell's init " + pid + " is gone");
  const std::string path = "/proc/" + pid + "/root/workspace";
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return Error::Sys("statvfs(\"" + path + "\")");
  return static_cast<uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
}

}  // namespace

std::optional<uint64_t> WorkspaceBytes(const sandbox::CellSpec& spec) {
  auto bytes = spec.workspace_host_dir.empty() && spec.tmpfs.workspace_bytes > 0
                   ? CellTmpfsWorkspaceBytes(spec)
                   : DirectoryBytes(WorkspaceHostDir(spec));
  if (!bytes) {
    mcp::log::Warn("metering: workspace storage of cell " + spec.id +
                   " not read: " + bytes.error().message);
    return std::nullopt;
  }
  return *bytes;
}

void MeterCell(const ToolEnv& env, const mcp::Context& ctx, const sandbox::CellLease& lease,
               bool read_storage) {
  if (!env.usage) return;
  auto usage = lease.Usage();
  if (!usage) return;
  UsageSample sample{.at = std::chrono::steady_clock::now(),
                     .cell_id = lease.id(),
                     .cpu_ns = usage->cpu_usage_ns,
                     .memory_current_bytes = usage->memory_current_bytes,
                     .memory_peak_bytes = usage->memory_peak_bytes};
  if (env.egress) {
    if (auto report = env.egress->Report(lease.id())) {
      sample.egress_up_bytes = report->bytes_up;
      sample.egress_down_bytes = report->bytes_down;
    }
  }
  if (read_storage) sample.storage_bytes = WorkspaceBytes(lease.spec());
  env.usage->For(CallKey(ctx))->Sample(sample);
}

}  // namespace mcpcell::tools
