#include "serve/admin_view.h"

#include <chrono>
#include <memory>

#include "mcp/http_server.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "sandbox/cell_session.h"
#include "serve/serve_audit.h"
#include "serve/session_resume.h"
#include "serve/workspaces.h"  // FormatUtc: the page's and the refusal's "since"

namespace mcpcell::serve {
namespace {

// The JSON-RPC error of a call on a held session (implementation-defined server errors are
// -32000 to -32099; -32000 to -32002 are taken by mcp/types.h).
inline constexpr int kSessionHeld = -32003;

}  // namespace

const char* AdminActionName(AdminAction action) {
  switch (action) {
    case AdminAction::kPause:
      return "pause";
    case AdminAction::kResume:
      return "resume";
    case AdminAction::kEnd:
      return "end";
  }
  return "?";
}

void ServeAdminView::AttachServer(mcp::Server* server) {
  std::lock_guard lock(mu_);
  server_ = server;
}

void ServeAdminView::AttachHttp(mcp::HttpServer* http) {
  std::lock_guard lock(mu_);
  http_ = http;
}

void ServeAdminView::ConnectServer(mcp::ServerOptions& server) {
  // on_tool_call runs before the tool's handler, so before its lease thaws the cell; the
  // hooks already there (audit, idle timers) run first: a refused call is still recorded.
  server.on_tool_call = [this, before = std::move(server.on_tool_call)](
                            const mcp::Session& session, const std::string& tool, bool refused) {
    if (before) before(session, tool, refused);
    if (refused) return;  // answered as an unknown tool anyway
    if (std::string held = HoldRefusal(session.id()); !held.empty()) {
      throw mcp::RpcException(kSessionHeld, held, {{"tool", tool}});
    }
  };
}

std::string ServeAdminView::HoldRefusal(const std::string& id) const {
  std::lock_guard lock(holds_mu_);
  auto it = holds_.find(id);
  if (it == holds_.end()) return "";
  return "session " + id + " is held by operator " + it->second.by + " since " +
         FormatUtc(it->second.since) +
         ": its cell is frozen and its tool calls are refused until the operator resumes it. "
         "Wait and try again later, or ask the operator.";
}

const policies::Policy& ServeAdminView::PolicyOf(const std::string& tenant) const {
  if (!tenant.empty() && options_.tenant_policies) {
    auto it = options_.tenant_policies->find(tenant);
    if (it != options_.tenant_policies->end()) return it->second;
  }
  return *options_.server_policy;
}

std::string ServeAdminView::StateOf(const std::string& id) const {
  std::shared_ptr<sandbox::CellSession> cell = options_.cells->Find(id);
  if (!cell) return "new";  // its cell session is made at its first call
  sandbox::CellSessionInfo info = cell->Info();
  if (info.paused) return "paused";
  if (info.hibernated) return "hibernated";
  return info.cell_alive ? "running" : "idle";
}

std::vector<AdminSession> ServeAdminView::Sessions() const {
  std::vector<AdminSession> out;
  std::lock_guard lock(mu_);
  if (!server_) return out;
  const auto now = std::chrono::steady_clock::now();
  for (const std::shared_ptr<mcp::Session>& session : server_->Sessions()) {
    if (session->closed() || !session->initialized()) continue;
    AdminSession row;
    row.tenant = session->tenant();
    row.id = session->id();
    row.state = StateOf(row.id);
    {
      std::lock_guard holds_lock(holds_mu_);
      if (auto it = holds_.find(row.id); it != holds_.end()) {
        row.state = "held";
        row.held_by = it->second.by;
        row.held_since = FormatUtc(it->second.since);
      }
    }
    row.policy = PolicyOf(row.tenant).name;
    // The meter starts with the session (ServeAudit::SessionStarted): its wall time is the
    // session's age.
    if (auto meter = options_.audit->usage()->Find(row.id)) {
      audit::UsageFigures figures = meter->Snapshot(now);
      row.age_s = figures.wall_active_s + figures.wall_paused_s;
      row.usage = figures.ToJson();
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<AdminPool> ServeAdminView::Pools() const {
  std::vector<std::string> profiles = {""};
  if (options_.tenant_policies) {
    for (const auto& [tenant, policy] : *options_.tenant_policies) profiles.push_back(tenant);
  }
  std::vector<AdminPool> out;
  for (const std::string& profile : profiles) {
    out.push_back({.tenant = profile,
                   .target = options_.warm_cells,
                   .ready = options_.cells->warm_ready(profile),
                   .parked = options_.cells->warm_parked(profile),
                   .status = options_.cells->warm_status(profile)});
  }
  return out;
}

AdminActionResult ServeAdminView::Act(AdminAction action, const std::string& id,
                                      const std::string& operator_name) {
  std::lock_guard lock(mu_);  // server_ stays valid while the action runs
  std::shared_ptr<mcp::Session> session = server_ ? server_->FindSession(id) : nullptr;
  if (!session || session->closed()) return {404, "no live session \"" + id + "\""};
  const std::string tenant = session->tenant();
  {
    // Holds of sessions that ended since (closed by their clients) go.
    std::lock_guard holds_lock(holds_mu_);
    for (auto it = holds_.begin(); it != holds_.end();) {
      auto live = server_->FindSession(it->first);
      it = live && !live->closed() ? std::next(it) : holds_.erase(it);
    }
  }
  AdminActionResult result;
  if (action == AdminAction::kEnd) {
    Record(action, tenant, id, operator_name);  // before the session.end it causes
    result = End(id, tenant, operator_name);
    // HTTP: gone from the transport now, its streams closed (its next request: 404).
    if (!http_ || !http_->CloseSession(id, "ended by operator " + operator_name)) {
      session->Close();
    }
  } else {
    result = action == AdminAction::kPause ? Hold(id, operator_name) : Release(id);
    if (result.status == 200) Record(action, tenant, id, operator_name);
  }
  mcp::log::Info("admin: operator " + operator_name + ": " + AdminActionName(action) + " session " +
                 id + ": " + result.message);
  return result;
}

void ServeAdminView::Record(AdminAction action, const std::string& tenant, const std::string& id,
                            const std::string& operator_name) {
  audit::Trail* trail = options_.audit->trail();
  if (!trail) return;  // [audit] enabled = false
  nlohmann::json fields = {{"action", AdminActionName(action)}, {"operator", operator_name}};
  if (Status st = trail->Append("session.operator", tenant, id, "", fields); !st) {
    mcp::log::Warn("audit: session.operator not recorded: " + st.error().message);
  }
}

AdminActionResult ServeAdminView::End(const std::string& id, const std::string& tenant,
                                      const std::string& by) {
  {
    std::lock_guard lock(holds_mu_);
    holds_.erase(id);
  }
  const std::string reason = "ended by operator " + by;
  // session.end names the operator; the transport's close later writes nothing more.
  options_.audit->SessionEnded(id, reason);
  // Never resumable: its record and hibernated files go, its cell is destroyed.
  options_.resume->Ended(id, "session of tenant \"" + tenant + "\" " + reason);
  return {200, "session " + id + " ended"};
}

// The hold first, then the freeze: a call that starts between the two is refused by the
// gate rather than thawing the cell it froze.
AdminActionResult ServeAdminView::Hold(const std::string& id, const std::string& by) {
  {
    std::lock_guard lock(holds_mu_);
    auto [it, placed] = holds_.try_emplace(id, OperatorHold{by, std::chrono::system_clock::now()});
    if (!placed) {
      return {409, "session " + id + " is already held by operator " + it->second.by + " since " +
                       FormatUtc(it->second.since)};
    }
  }
  const std::string held = "session " + id + " paused and held by operator " + by +
                           ": its calls are refused until an operator resumes it";
  std::shared_ptr<sandbox::CellSession> cell = options_.cells->Find(id);
  if (!cell || !cell->Info().cell_alive) return {200, held + " (it has no cell to freeze now)"};
  if (cell->Info().paused) return {200, held};
  if (Status st = cell->PauseIdleCell(/*now=*/true); !st) {
    return {200, held + " (its cell is not frozen: " + st.error().message + ")"};
  }
  if (!cell->Info().paused) {
    return {200, held + " (a call is running: it finishes, its cell stays running)"};
  }
  return {200, held};
}

// Lifts the operator's hold and thaws the cell; without a hold, thaws an idle pause.
AdminActionResult ServeAdminView::Release(const std::string& id) {
  bool was_held = false;
  {
    std::lock_guard lock(holds_mu_);
    was_held = holds_.erase(id) > 0;
  }
  std::shared_ptr<sandbox::CellSession> cell = options_.cells->Find(id);
  const bool paused = cell && cell->Info().cell_alive && cell->Info().paused;
  if (!was_held && !paused) return {409, "session " + id + " is not held or paused"};
  if (paused) {
    if (Status st = cell->ThawNow(); !st) {
      if (!was_held) return {409, "resume: " + st.error().message};
      // The hold is lifted: the session's next call thaws the cell as after an idle pause.
      return {200, "session " + id +
                       " resumed (its cell thaws at its next call: " + st.error().message + ")"};
    }
  }
  return {200, "session " + id + " resumed"};
}

}  // namespace mcpcell::serve
