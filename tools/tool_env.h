// ToolEnv: what every sandbox tool needs (the cell sessions, the limits that apply to a
// call) and the small helpers they share: finding the calling client's cell, and turning a
// sandbox error into a result the model can act on.
//
// The session key of a call names its cell (CallKey): the MCP session's id in today's era,
// so each client gets its own cell; in the 2026-07-28 era, which has no lasting session, the
// key the call's `sandbox` handle resolves to (ToolEnv::resolve_sandbox; cell_tools.cc's
// wrapper holds a CallKeyScope around the handler).
// What a session may do comes from its tenant (mcp::Session::tenant(), set by the HTTP
// transport): a tenant listed in ToolEnv::tenants gets that config and the cells of the
// CellSessionManager profile of the same name; a session without a tenant (stdio, HTTP
// without tokens) gets `config` and the manager's own cells; any other tenant gets nothing
// (fail closed). serve/tenant_policies.h fills the table from the tenants' policies.
// Threading: ToolEnv is immutable after start and shared by all handler threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "mcp/context.h"
#include "mcp/features.h"
#include "mcp/session.h"
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "tools/egress_view.h"
#include "tools/redaction.h"
#include "tools/secrets_view.h"
#include "tools/snapshots_view.h"
#include "tools/usage_meter.h"

namespace mcpcell::audit {
class Trail;
}

namespace mcpcell::tools {

class ProcessTable;  // process_table.h

struct CellToolsConfig {
  // Output kept in a tool result per stream (head and tail halves); the rest is saved in
  // the cell under kOutputDir and the result says where.
  size_t keep_bytes_per_stream = 64 * 1024;
  // Cap of the full output saved in the cell per stream (the disk is the cell's, but a
  // flood still costs time); beyond it the saved file says it was cut.
  size_t max_saved_bytes_per_stream = 64ull << 20;
  std::chrono::seconds default_timeout{60};
  std::chrono::seconds max_timeout{600};
  // Progress notifications: at least this often while a program runs, even when silent
  // (clients reset their request timeouts on progress).
  std::chrono::milliseconds progress_heartbeat{5000};
  std::chrono::milliseconds progress_min_interval{200};
  size_t progress_max_message_bytes = 8 * 1024;
  // Server-wide caps from here to max_list_entries (no policy sets them; tools read them
  // from ToolEnv::config).
  size_t max_read_bytes = 8ull << 20;  // read_file / edit_file read at most this much
  size_t max_write_bytes =
      8ull << 20;  // write_file content after decoding (below the 16 MiB message cap)
  size_t max_list_entries = 10000;
  std::set<std::string> enabled_tools;  // empty: all (the policy's tools.enabled)
  // The policy's tools.toolset and the tools it holds (policies::ToolsetTools); an empty
  // set: every tool (configs not made from a policy).
  std::string toolset;
  std::set<std::string> toolset_tools;
  // upload_archive: the policy's limits.archive_bytes, archive_ratio, archive_entries.
  uint64_t archive_bytes = 1ull << 30;
  uint64_t archive_ratio = 200;
  uint64_t archive_entries = 100000;
  std::string policy_name = "default";
  // The policy's filesystem.template: "host" or the pinned "NAME@VERSION" (session_info).
  std::string template_name = "host";
  std::string network_summary = "no network: the cell has only a loopback interface";
  // pip_install/npm_install: the policy's [packages] (mode, rules) and one line saying it.
  policies::PackagesPolicy packages;
  std::string packages_summary = "disabled (packages.mode)";
  // [audit] commands = "full": exec records carry the command text beside its SHA-256.
  bool audit_command_text = false;

  // Whether tools.toolset holds tool `name`.
  bool InToolset(const std::string& name) const {
    return toolset_tools.empty() || toolset_tools.count(name) > 0;
  }
  // Whether tools.toolset and tools.enabled let sessions with this config see and call
  // tool `name`.
  bool Enables(const std::string& name) const {
    return InToolset(name) && (enabled_tools.empty() || enabled_tools.count(name) > 0);
  }
};

inline constexpr const char* kOutputDir = "/workspace/.mcpcell";

struct ToolEnv {
  sandbox::CellSessionManager* cells = nullptr;
  // The cells' egress proxy as the tools see it (egress_view.h): session_info's counters,
  // the refusals shown in exec results. nullptr: no proxy (tests without one).
  const CellEgressView* egress = nullptr;
  // The sessions' granted secrets (secrets_view.h): exec env, session_info; nullptr: none.
  const SecretsView* secrets = nullptr;
  CellToolsConfig config;  // sessions without a tenant
  // The sessions' snapshots (snapshots_view.h): the snapshot_* tools. nullptr: those tools
  // are not registered.
  SnapshotsView* snapshots = nullptr;
  // The audit trail (audit/trail.h, tools/audit_events.h): exec and file events. nullptr:
  // no auditing (tool unit tests).
  audit::Trail* audit = nullptr;
  // Metering per session (usage_meter.h): sampled at each exec's end, read by
  // session_info. nullptr: none.
  UsageMeters* usage = nullptr;
  // By tenant name: the config of that tenant's sessions (from its policy).
  std::map<std::string, CellToolsConfig> tenants;
  // The secret values each session holds (session key -> names and values), redacted from
  // everything the tools show (tools/redaction.h). Empty: nothing to redact.
  SecretValuesFn secret_values;
  // Observers (e.g. the server's metrics), both optional, quick and thread-safe: every event
  // the tools give the audit trail (AuditEvent; also when `audit` is nullptr), and the end
  // of every tool call whose handler ran, with its result's isError and its duration.
  std::function<void(const mcp::Session&, std::string_view type, const mcp::Json& fields)> on_event;
  std::function<void(const mcp::Session&, const std::string& tool, bool is_error,
                     std::chrono::nanoseconds took)>
      on_call_done;
  // The sessions' background processes and python interpreters (process_table.h), owned
  // by the sessions' state (serve/session_state.h). nullptr: no background processes.
  ProcessTable* processes = nullptr;
  // 2026-07-28 requests: the session key of sandbox handle `handle` for `tenant`, or an
  // error whose message is the whole tool error (unknown, another tenant's, ended). Unset:
  // the tools serve today's era only (no `sandbox` argument is offered).
  std::function<Result<std::string>(const std::string& handle, const std::string& tenant)>
      resolve_sandbox;
  // The end of a call that resolve_sandbox let in, with the key it gave (a handle's idle
  // time starts then). Optional; quick and thread-safe.
  std::function<void(const std::string& key)> sandbox_call_done;

  // The config of the sessions of `tenant` ("" = `config`); nullptr for a tenant that has
  // none (its sessions get no tools and no cell).
  const CellToolsConfig* ConfigFor(const std::string& tenant) const;
  // Whether sessions of `tenant` may see and call tool `name`.
  bool ToolEnabled(const std::string& tenant, const std::string& name) const;
  // The CellSessionManager profile of `tenant`'s cells ("" = the manager's own).
  std::string CellProfile(const std::string& tenant) const;
  // Every config in use (`config` first), e.g. to register the union of their tools.
  std::vector<const CellToolsConfig*> AllConfigs() const;
};

// The argument a 2026-07-28 call names its sandbox with (x-mcp-header "Sandbox").
inline constexpr const char* kSandboxArgument = "sandbox";

// Whether the call's session speaks the 2026-07-28 era (no lasting session).
bool IsNewEraCall(const mcp::Context& ctx);

// The session key of the tool call running on this thread: cell_tools.cc's wrapper holds a
// scope around a 2026-07-28 handler with the key its `sandbox` handle resolved to. Scopes
// nest; one thread, one call (a handler that hands work to another thread passes the key).
class CallKeyScope {
 public:
  explicit CallKeyScope(std::string key);
  ~CallKeyScope();
  CallKeyScope(const CallKeyScope&) = delete;
  CallKeyScope& operator=(const CallKeyScope&) = delete;
  // The innermost scope's key on this thread; nullptr when none is open.
  static const std::string* Current();

 private:
  const std::string key_;
  const CallKeyScope* outer_;
};

// The key of the calling client's cell and session state (usage, processes, secrets,
// snapshots, audit): the open CallKeyScope's, else the MCP session's id. A 2026-07-28 call
// without a scope has "" (it names no sandbox: SessionCells refuses it).
std::string CallKey(const mcp::Context& ctx);

// The config of the calling session; nullptr when its tenant has none.
const CellToolsConfig* SessionConfig(const ToolEnv& env, const mcp::Context& ctx);
// The calling client's CellSession (made on first use, with its tenant's profile); an
// error for a 2026-07-28 request that names no sandbox (resources/list, say).
Result<std::shared_ptr<sandbox::CellSession>> SessionCells(const ToolEnv& env,
                                                           const mcp::Context& ctx);

// The calling client's cell and its session's config; on failure an isError result
// explaining what to do. A fresh cell replacing a dead or idled-out one, and the session's
// lifetime nearing its end, are logged to the client as warnings (tools/client_log.h).
struct LeaseOrError {
  std::optional<sandbox::CellLease> lease;
  const CellToolsConfig* config = nullptr;  // set with lease
  mcp::ToolResult error;
};
LeaseOrError AcquireCell(const ToolEnv& env, mcp::Context& ctx);

// "arguments.<field>: contains a NUL byte at offset N; <why>" when `value` holds one:
// text that goes to a program's argv, environment or path cannot (the C string ends
// there, and what follows would be silently dropped). Empty when there is none.
std::string NulByteError(const std::string& field, std::string_view value, const std::string& why);

// "read_file failed: <cause>. <hint>" as an isError result.
mcp::ToolResult SandboxError(const std::string& what, const Error& error,
                             const std::string& hint = "");
// SandboxError for a path the model named (the file tools): without a hint, one follows
// from the error's errno where there is a usual next step (a missing path, a directory
// where a file was meant, permissions, symlink loops); else the cause stands alone.
mcp::ToolResult PathError(const std::string& what, const Error& error,
                          const std::string& hint = "");

// What to tell the model when a write failed with this error (disk limit, read-only).
std::string WriteHint(const Error& error);
// The directory part of a cell path ("" when it has none).
std::string ParentDir(const std::string& path);

// Reads a whole file from the cell, at most `max_bytes`; `*size` gets the file's size.
Result<std::string> ReadCellFile(const sandbox::CellLease& channel, const std::string& path,
                                 uint64_t max_bytes, uint64_t* size);

}  // namespace mcpcell::tools
