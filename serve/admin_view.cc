#include "serve/admin_view.h"

#include <chrono>
#include <memory>

#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "sandbox/cell_session.h"
#include "serve/serve_audit.h"
#include "serve/session_resume.h"

namespace mcpcell::serve {

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
  AdminActionResult result;
  if (action == AdminAction::kEnd) {
    Record(action, tenant, id, operator_name);  // before the session.end it causes
    result = End(id, tenant, operator_name);
    session->Close();  // its next request: HTTP 404
  } else {
    result = PauseOrResume(action, id);
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
  const std::string reason = "ended by operator " + by;
  // session.end names the operator; the transport's close later writes nothing more.
  options_.audit->SessionEnded(id, reason);
  // Never resumable: its record and hibernated files go, its cell is destroyed.
  options_.resume->Ended(id, "session of tenant \"" + tenant + "\" " + reason);
  return {200, "session " + id + " ended"};
}

AdminActionResult ServeAdminView::PauseOrResume(AdminAction action, const std::string& id) {
  std::shared_ptr<sandbox::CellSession> cell = options_.cells->Find(id);
  if (!cell || !cell->Info().cell_alive) {
    return {409, "session " + id + " has no cell now (no call yet, or idle or hibernated)"};
  }
  if (action == AdminAction::kResume) {
    if (!cell->Info().paused) return {409, "session " + id + " is not paused"};
    if (Status st = cell->ThawNow(); !st) return {409, "resume: " + st.error().message};
    return {200, "session " + id + " resumed"};
  }
  if (cell->Info().paused) return {409, "session " + id + " is already paused"};
  if (Status st = cell->PauseIdleCell(/*now=*/true); !st) {
    return {409, "pause: " + st.error().message};
  }
  if (!cell->Info().paused) {
    return {409, "session " + id + " is running a call (or its cell is changing); try again"};
  }
  return {200, "session " + id + " paused (its next call resumes it)"};
}

}  // namespace mcpcell::serve
