#include "serve/metrics_sessions.h"

namespace mcpcell::serve {

const char* SessionStates::Name(State state) {
  switch (state) {
    case State::kRunning:
      return "running";
    case State::kPaused:
      return "paused";
    case State::kHibernated:
      return "hibernated";
  }
  return "unknown";
}

void SessionStates::Event(std::string_view type, const std::string& tenant,
                          const std::string& session, const std::string& cell) {
  std::lock_guard lock(mu_);
  if (type == "cell.create") {
    sessions_[session] = {tenant, State::kRunning, cell};
    cell_owner_[cell] = session;
    cell_tenant_[cell] = tenant;
  } else if (type == "session.pause" || type == "session.resume") {
    auto it = sessions_.find(session);
    if (it != sessions_.end()) {
      it->second.state = type == "session.pause" ? State::kPaused : State::kRunning;
    }
  } else if (type == "session.hibernate") {
    // Written before its cell is destroyed: the cell.destroy that follows keeps the state.
    auto it = sessions_.find(session);
    if (it != sessions_.end()) it->second.state = State::kHibernated;
  } else if (type == "cell.destroy") {
    auto owner = cell_owner_.find(cell);
    if (owner == cell_owner_.end()) return;
    // A replaced cell may go after its successor was made: only the session's current cell
    // ends its state, and a hibernated session keeps its state without a cell.
    auto it = sessions_.find(owner->second);
    if (it != sessions_.end() && it->second.cell == cell) {
      if (it->second.state == State::kHibernated) {
        it->second.cell.clear();
      } else {
        sessions_.erase(it);
      }
    }
    cell_owner_.erase(owner);
    cell_tenant_.erase(cell);
  } else if (type == "session.end") {
    sessions_.erase(session);
  }
}

std::map<std::pair<std::string, SessionStates::State>, size_t> SessionStates::Count() const {
  std::lock_guard lock(mu_);
  std::map<std::pair<std::string, State>, size_t> out;
  for (const auto& [key, entry] : sessions_) ++out[{entry.tenant, entry.state}];
  return out;
}

std::map<std::string, size_t> SessionStates::Cells() const {
  std::lock_guard lock(mu_);
  std::map<std::string, size_t> out;
  for (const auto& [cell, tenant] : cell_tenant_) ++out[tenant];
  return out;
}

}  // namespace mcpcell::serve
