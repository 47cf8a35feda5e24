// SessionStates: which state each session's cell is in, for the sessions and cells gauges of
// /metrics (serve/metrics.h). Fed with the events ServeAudit writes about cells and sessions
// (cell.create, session.pause, session.resume, session.hibernate, cell.destroy, session.end),
// so it follows what the audit trail says, and it is fed even when the trail is off.
//
//   running     the session has a cell that is not frozen
//   paused      its cell is frozen (idle past time.session_pause_idle)
//   hibernated  no cell now; its files wait for the session's next call
//
// A session before its first call (no cell yet) is in no state. Threading: thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace mcpcell::serve {

class SessionStates {
 public:
  enum class State { kRunning, kPaused, kHibernated };
  static const char* Name(State state);

  // One event about `session` (and `cell`), of tenant `tenant` ("" = the server's own
  // policy). Events of other types are ignored.
  void Event(std::string_view type, const std::string& tenant, const std::string& session,
             const std::string& cell);

  // Sessions per (tenant, state) now.
  std::map<std::pair<std::string, State>, size_t> Count() const;
  // Cells bound to sessions now, per tenant.
  std::map<std::string, size_t> Cells() const;

 private:
  struct Entry {
    std::string tenant;
    State state = State::kRunning;
    std::string cell;  // its current cell ("" while hibernated)
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> sessions_;           // by session key
  std::map<std::string, std::string> cell_owner_;   // cell id -> session key
  std::map<std::string, std::string> cell_tenant_;  // cell id -> tenant
};

}  // namespace mcpcell::serve
