// What the tools write to the audit trail (docs/audit.md "Events"): exec.start/exec.end
// and file.read/write/edit/delete, each about the calling session (its tenant and id) and
// cell. Never file contents or outputs; the command text only with [audit] commands =
// "full", its SHA-256 always. A write that fails is logged, never fails the call (the
// trail's own `required` decides whether sessions go on). No-ops without ToolEnv::audit.
// Threading: any handler thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "mcp/context.h"
#include "mcp/features.h"
#include "sandbox/cell_session.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

// Appends `type` with `fields` about the calling session and `cell_id`.
void AuditEvent(const ToolEnv& env, const mcp::Context& ctx, const std::string& cell_id,
                std::string_view type, const nlohmann::json& fields);

// The command fields of exec.start: "command_sha256", and "command" when `config` says
// [audit] commands = "full".
nlohmann::json CommandFields(const CellToolsConfig& config, std::string_view command_text);

// file.<op> (read, write, edit) for a file tool's call, about the session's current cell:
// path, bytes (the result's structuredContent[bytes_key]; 0 when absent) and result ("ok"
// or "error"; never the error's text, which may quote the file).
void AuditFileCall(const ToolEnv& env, const mcp::Context& ctx, std::string_view op,
                   const std::string& path, const mcp::ToolResult& result, const char* bytes_key);

// Feeds the calling session's meter (ToolEnv::usage) a sample of `lease`'s cell: its
// cgroup's CPU and memory and the proxy's byte counters, and with `read_storage` its
// workspace's bytes on disk (a directory walk: not after every exec). No-op without a meter.
void MeterCell(const ToolEnv& env, const mcp::Context& ctx, const sandbox::CellLease& lease,
               bool read_storage = false);

// The host directory of a cell's /workspace: the spec's named one, else the cell's own
// `<state_dir>/cells/<id>/workspace` (sandbox/state_dir.h's layout).
std::string WorkspaceHostDir(const sandbox::CellSpec& spec);
// The bytes on disk of a cell's /workspace: DirectoryBytes of its host directory, or for a
// workspace that is a tmpfs of the cell's own, the tmpfs's used blocks read through the
// cell init's /proc/<pid>/root. nullopt (and a log line) when it cannot be read.
std::optional<uint64_t> WorkspaceBytes(const sandbox::CellSpec& spec);

}  // namespace mcpcell::tools
