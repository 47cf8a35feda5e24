// ServeAudit's pause and resume records (serve_audit.h): session.pause, session.resume,
// and the session meter's paused time. Apart from serve_audit.cc to keep that file's size.
#include <chrono>
#include <string>

#include "serve/serve_audit.h"

namespace mcpcell::serve {

void ServeAudit::SessionPaused(sandbox::CellInstance& cell, const std::string& session_key) {
  if (auto meter = usage_.Find(session_key)) meter->PauseBegan(std::chrono::steady_clock::now());
  std::string tenant;
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell.id());
    if (it != cells_.end()) tenant = it->second.tenant;
  }
  Append("session.pause", tenant, session_key, cell.id(), nlohmann::json::object());
}

void ServeAudit::SessionUnpaused(sandbox::CellInstance& cell, const std::string& session_key,
                                 std::chrono::milliseconds paused_for, bool resumed) {
  if (auto meter = usage_.Find(session_key)) meter->PauseEnded(std::chrono::steady_clock::now());
  if (!resumed) return;  // destroyed while paused: its cell.destroy follows
  std::string tenant;
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell.id());
    if (it != cells_.end()) tenant = it->second.tenant;
  }
  Append("session.resume", tenant, session_key, cell.id(),
         {{"paused_s", std::chrono::duration<double>(paused_for).count()}});
}

}  // namespace mcpcell::serve
