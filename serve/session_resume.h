// SessionResume: hibernated sessions that survive the end of their transport's session and a
// server restart (docs/lifecycle.md, "Surviving a restart").
//
// Every MCP session gets a resume id: its HTTP Mcp-Session-Id, or for stdio a random one
// (or the one named by `serve --resume`). Whenever the session's files are kept in a
// hibernation snapshot (idle expiry, an HTTP session's expiry, a clean shutdown) its record
// (serve/session_records.h) is written under <state_dir>/sessions; when the session really
// ends (client DELETE or close, session_max, a block_and_end_session refusal) the record and
// the snapshot go. Brought back:
//   - HTTP: Revive (mcp::HttpOptions::revive_session) answers for an id of the same tenant;
//     Opened (on_session_opened) then makes the new session's cells over the files, and its
//     first call says so.
//   - stdio: PrepareStdio checks the id at start (a clear error otherwise); Started makes the
//     session's cells over the files.
// Parking: an HTTP session that expired is parked on this object's worker thread (its files
// captured, its cell ended), so a big capture delays no other session's expiry; a request
// for its id meanwhile waits for the park. At shutdown every live session is parked in turn
// until `shutdown_budget` is spent; the rest keep the files of their last hibernation only.
// Records of sessions past their tenant's session_max are removed at start and at revival.
//
// Threading: thread-safe; one worker thread. Outlives the MCP server and its transports;
// outlived by the SessionState and the cell manager it uses (Stop first).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "mcp/http_server.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "serve/session_records.h"
#include "serve/session_state.h"

namespace mcpcell::serve {

struct SessionResumeOptions {
  std::string state_dir;
  std::string transport;  // "http" or "stdio"
  const policies::Policy* server_policy = nullptr;
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  SessionState* state = nullptr;
  std::chrono::milliseconds shutdown_budget{std::chrono::seconds(30)};
};

class SessionResume {
 public:
  explicit SessionResume(SessionResumeOptions options);
  ~SessionResume();  // Stop()
  SessionResume(const SessionResume&) = delete;
  SessionResume& operator=(const SessionResume&) = delete;

  // The sessions it parks and ends; before the first session.
  void Attach(sandbox::CellSessionManager* cells) { cells_ = cells; }
  // Chains Started and Touch into the MCP server's session hooks (after what they do).
  void ConnectServer(mcp::ServerOptions& server);
  // Sets the HTTP transport's revive_session and on_session_opened to Revive and Opened.
  void ConnectHttp(mcp::HttpOptions& http);

  // At start: connects to the SessionState (its hibernations write records, session_info
  // sees the resume ids), Sweep(), then PrepareStdio(resume_id) when one is given (refused
  // over HTTP, whose clients resume by their Mcp-Session-Id).
  Status Start(const std::string& resume_id, bool http);
  // At start: warns about every unreadable or foreign record (naming its file) and removes
  // the records (and snapshots) of sessions past their session_max.
  void Sweep();
  // `serve --resume ID` (stdio): the record must exist, be the server's own (no tenant) and
  // its snapshot be there; the error names the id and how to list them.
  Status PrepareStdio(const std::string& resume_id);

  // mcp ServerOptions::on_session_started: the session's facts; a stdio session gets its
  // resume id here (and its files back when PrepareStdio was called).
  void Started(const mcp::Session& session);
  // mcp HttpOptions::on_session_opened: the HTTP session's id; a revived one's files back.
  void Opened(const std::string& http_id, const mcp::Session& session);
  // mcp HttpOptions::revive_session.
  std::optional<mcp::HttpOptions::RevivedSession> Revive(const std::string& http_id,
                                                         const std::string& tenant);
  // A tool call of the session (its last use, recorded with its files).
  void Touch(const std::string& key);

  // SessionState's hibernation listener: writes the session's record.
  void Hibernated(const std::string& key, const std::string& tenant,
                  const sandbox::SnapshotInfo& snapshot);
  // A base of session `key` was released: its record goes if it named that snapshot.
  void BaseReleased(const std::string& key, const sandbox::SessionBase& base);

  // The session's transport session ended but the session did not (HTTP expiry): its files
  // are kept on the worker, then its cell session closed.
  void ParkLater(const std::string& key);
  // Server shutdown: every live session's files kept (within the budget), cells closed
  // keeping them. Then the worker stops.
  void ParkAll();
  // The session ended for good: its record removed, its cell session closed (its files go).
  void Ended(const std::string& key, const std::string& reason);
  // A stdio client closed its input: every session ended (Ended), then the worker stops.
  void EndAll(const std::string& reason);
  // Stops the worker (after the park it is doing); what it had queued stays live for ParkAll.
  void Stop();

  std::optional<ResumeFacts> Facts(const std::string& key) const;

 private:
  struct Live {
    std::string resume_id;
    std::string tenant;
    std::string protocol_version;
    mcp::Json client_info;
    mcp::Json client_capabilities;
    std::string created;
    std::string last_used;
    std::string recorded_snapshot;  // the snapshot its record names ("" = no record)
    std::string hibernated_at;
  };
  const policies::Policy* PolicyOf(const std::string& tenant) const;
  // Why `record` cannot be revived ("" when it can); drops an expired one.
  std::string Unusable(const SessionRecord& record);
  // Attaches `record`'s files to session `key`.
  void Attach(const std::string& key, const SessionRecord& record);
  void Park(const std::string& key, std::chrono::steady_clock::time_point deadline);
  // Removes the record and deletes the snapshot of a session that will never come back.
  void Drop(const SessionRecord& record, const std::string& why);
  void WorkerLoop();

  const SessionResumeOptions options_;
  const SessionRecords records_;
  const std::string server_id_;  // this server instance: a record of another was a restart
  sandbox::CellSessionManager* cells_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Live> live_;              // by session key
  std::map<std::string, SessionRecord> pending_;  // revived, by resume id: for Opened
  std::optional<SessionRecord> stdio_resume_;     // PrepareStdio's
  std::deque<std::string> queue_;                 // keys to park
  std::set<std::string> parking_;                 // resume ids queued or being parked
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace mcpcell::serve
