// `mcpcell serve`'s audit trail and metering (docs/audit.md): the one audit::Trail of the
// server in <state_dir>/audit, opened from the server policy's [audit], and what writes to
// it from serve's side: session.start/session.end (the MCP server's session hooks),
// cell.create/cell.destroy (the cells' hooks), session.end "max lifetime" (the cells'
// expiry listener), egress.connection (the proxy's AuditSink),
// package.<result> (the package service's audit callback), snapshot.* and session.hibernate
// (the sessions' state, serve/session_state.h), policy.refused (a tool call
// its policy refused), a `usage` record per session every [audit] usage_interval, and at
// Open a `recovered` for each earlier server killed before its server.stop, then its open
// sessions' session.end (serve_audit_recovery.cc).
// The tools write exec.* and file.* through ToolEnv::audit themselves.
//
// Metering: one tools::UsageMeter per MCP session (ToolEnv::usage), sampled at each exec's
// end (the tools), at each usage interval and when a cell is destroyed or replaced (here):
// each sample carries the cell's cgroup counters and, once SetEgressView was given the
// proxy, its egress byte counters, so traffic after a session's last call is metered too.
//
// Ownership: serve owns the ServeAudit; it must outlive the proxy, the package service,
// the cells and the MCP server (their hooks and sinks call it). Close() ends the sessions
// still open ("server shutdown"), stops the usage thread and closes the trail (final
// checkpoint). Threading: every method is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>

#include "audit/syslog.h"
#include "audit/trail.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "egress/audit_log.h"
#include "egress/secret_grant.h"
#include "mcp/session.h"
#include "policies/policy.h"
#include "sandbox/backend.h"
#include "sandbox/snapshot_store.h"
#include "serve/workspaces.h"
#include "tools/egress_view.h"
#include "tools/usage_meter.h"

namespace mcpcell::tools {
struct BackgroundProcess;  // tools/process_table.h
struct ProcessState;
}  // namespace mcpcell::tools

namespace mcpcell::serve {

// session.end's reason for an HTTP session's close reason (mcp::HttpOptions::
// on_session_closed): "client closed", "idle", "server shutdown".
std::string HttpEndReason(const std::string& http_reason);

struct ServeAuditOptions {
  std::string state_dir;
  const policies::Policy* server_policy = nullptr;  // [audit], and sessions without tenant
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  std::string transport;  // "stdio" or "http"
  // Sees every event Append is given (type, tenant, session, cell, fields), also with
  // [audit] enabled = false, on the caller's thread: e.g. the /metrics counters
  // (serve/metrics.h). Must be quick and thread-safe.
  std::function<void(std::string_view type, const std::string& tenant, const std::string& session,
                     const std::string& cell, const nlohmann::json& fields)>
      observer;
};

class ServeAudit {
 public:
  // Opens the trail (shared with any other server on the same state dir: records carry
  // this server's random instance id as `server`; a `server.start` record names its pid)
  // and the syslog feed when configured. With [audit] enabled = false: no trail at all.
  static Result<std::unique_ptr<ServeAudit>> Open(ServeAuditOptions options);
  ~ServeAudit();  // Close()
  ServeAudit(const ServeAudit&) = delete;
  ServeAudit& operator=(const ServeAudit&) = delete;

  audit::Trail* trail() { return trail_.get(); }
  const std::string& server_id() const { return server_id_; }
  tools::UsageMeters* usage() { return &usage_; }
  // The proxy's per-cell byte counters, read by every sample taken here (nullptr: none).
  // The view must outlive every cell bound here (serve destroys the cells before the
  // proxy) or be cleared first.
  void SetEgressView(const tools::CellEgressView* egress);

  // The sinks of the proxy and the package service.
  egress::AuditSink EgressSink();
  std::function<void(const nlohmann::json& event)> PackageSink();
  // A substitution or refusal of a placeholder secret by the egress proxy (the proxy's
  // SecretSink): `secret.substituted` / `secret.refused` with the name, host and surface,
  // never the value. Called on the proxy's threads.
  void SecretUsed(const egress::SecretEvent& event);

  // mcp::ServerOptions hooks. SessionStarted returns a refusal ("" = accepted) while the
  // trail is unhealthy and [audit] required = true.
  std::string SessionStarted(const mcp::Session& session);
  // The same for a 2026-07-28 sandbox handle (serve/sandbox_handles.h), whose session key
  // `key` stands for a session: session.start carries "era" (the protocol version) besides
  // the transport, and the client that made it.
  std::string SandboxStarted(const std::string& key, const std::string& tenant,
                             const nlohmann::json& client_info, const std::string& era);
  // Writes session.end once per session (later calls for the same id do nothing), after
  // the session-ending hook (SetSessionEnding) ended what the session held.
  void SessionEnded(const std::string& session_id, const std::string& reason);
  // Runs at the start of each SessionEnded, outside the audit's lock (serve/session_state.h
  // ends the session's background processes: their exec.end precede its session.end).
  // Set before the first session; nullptr clears it.
  void SetSessionEnding(std::function<void(const std::string& id, const std::string& why)> fn);
  // A background process's end (tools/process_table.h's end listener): exec.end with
  // background=true and its exit, signal, or how it was stopped (serve_audit_state.cc).
  void BackgroundExecEnded(const tools::BackgroundProcess& p, const tools::ProcessState& s);
  void ToolCall(const mcp::Session& session, const std::string& tool, bool refused);
  // Writes session.end with `reason` for every session still open (e.g. stdio sessions
  // whose close the MCP server has not reported yet when it returns).
  void EndOpenSessions(const std::string& reason);
  // From here on, sessions that end are ended by "server shutdown".
  void ShuttingDown();
  bool shutting_down() const;

  // sandbox::CellHooks. CellDestroying samples the cell's last figures; CellDestroyed writes
  // cell.destroy with them, `cleanup` (the DestroyReport: what was removed, `left` for
  // each step that failed) and `result` ("ok" or Destroy's error). Cells never bound
  // (CellBound) are ignored.
  void CellBound(sandbox::CellInstance& cell, const std::string& session_key,
                 const std::string& profile);
  void CellDestroying(sandbox::CellInstance& cell);
  // sandbox::CellHooks on_not_made: no record (nothing was made), only the observer's
  // `cell.failed` event (the /metrics failure counter).
  void CellNotMade(const std::string& cell_id);
  void CellDestroyed(const std::string& cell_id, const sandbox::DestroyReport& report);
  // sandbox::CellHooks on_paused / on_unpaused: session.pause and (when a call resumed the
  // cell) session.resume with `paused_s`; the session's meter counts the pause as paused
  // time (serve_audit_pause.cc).
  void SessionPaused(sandbox::CellInstance& cell, const std::string& session_key);
  void SessionUnpaused(sandbox::CellInstance& cell, const std::string& session_key,
                       std::chrono::milliseconds paused_for, bool resumed);

  // workspace.remove: a named workspace removed after its retention (serve_audit_ws.cc).
  void WorkspaceRemoved(const WorkspaceInfo& workspace, const std::string& reason);
  // The sessions' snapshots (serve/session_state.h; serve_audit_state.cc): snapshot.create,
  // snapshot.restore (with programs_ended), snapshot.delete and session.hibernate, each with
  // the snapshot's id, name, digest, files and bytes, never its contents.
  void SnapshotCreated(const std::string& tenant, const std::string& session_key,
                       const sandbox::SnapshotInfo& info);
  void SnapshotRestored(const std::string& tenant, const std::string& session_key,
                        const sandbox::SnapshotInfo& info, uint64_t programs_ended);
  void SnapshotDeleted(const std::string& tenant, const sandbox::SnapshotInfo& info);
  void SessionHibernated(const std::string& tenant, const std::string& session_key,
                         const std::string& cell_id, const sandbox::SnapshotInfo& info,
                         bool frozen);

  // Ends open sessions ("server shutdown"), stops the usage thread, closes the trail.
  void Close();

 private:
  struct OpenSession {
    std::string tenant;
    std::chrono::steady_clock::time_point started;
  };
  struct BoundCell {
    sandbox::CellInstance* cell = nullptr;
    std::string session;
    std::string tenant;
  };
  // A cell between CellDestroying and CellDestroyed: cell.destroy's figures so far.
  struct DestroyingCell {
    BoundCell bound;
    nlohmann::json fields;
  };
  explicit ServeAudit(ServeAuditOptions options);
  const policies::Policy& PolicyOf(const std::string& tenant) const;
  void Append(std::string_view type, const std::string& tenant, const std::string& session,
              const std::string& cell, const nlohmann::json& fields);
  void SampleCell(const BoundCell& bound, sandbox::CellInstance& cell);
  // Whether server `server` of the trail in `audit_dir` still runs (holds its lock).
  static bool ServerAlive(const std::string& audit_dir, const std::string& server);
  // serve_audit_recovery.cc: a `recovered` record for each earlier server that stopped
  // without server.stop, then session.end for the sessions it left open.
  void EndCrashedSessions();
  void UsageLoop();
  void WriteUsageRecords();

  const ServeAuditOptions options_;
  const std::string server_id_;
  UniqueFd alive_lock_;  // <audit dir>/servers/<id>.lock, held while this server runs
  std::unique_ptr<audit::SyslogSink> syslog_;  // before trail_: outlives it
  std::unique_ptr<audit::Trail> trail_;
  tools::UsageMeters usage_;
  mutable std::mutex mu_;
  std::map<std::string, OpenSession> sessions_;       // by MCP session id
  std::map<std::string, BoundCell> cells_;            // by cell id; CellDestroying waits on mu_
  std::map<std::string, DestroyingCell> destroying_;  // by cell id
  const tools::CellEgressView* egress_ = nullptr;     // under mu_
  bool shutting_down_ = false;
  bool closed_ = false;
  std::condition_variable wake_;
  std::thread usage_thread_;
  std::function<void(const std::string&, const std::string&)> on_session_ending_;  // under mu_
};

}  // namespace mcpcell::serve
