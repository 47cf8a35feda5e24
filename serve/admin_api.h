// The admin API and operator page on the HTTP listener, for operators ([[operator]] in the
// HTTP config, serve/http_config.h), never for tenants:
//
//   GET /admin/audit?tenant=T&session=S&type=T&since=TIME&until=TIME&limit=N
//
// answers the audit trail's records (docs/audit.md) as JSON Lines, in chain order, only
// those the operator's scope may see (audit::Visible). 401 without or with a wrong token (a
// tenant's token is a wrong token here), 403 when `tenant` names a tenant outside the
// operator's scope, 400 naming a bad or unknown parameter. At most `limit` records (default
// kDefaultAuditLimit); header X-Audit-Truncated: true when more matched (page on with
// `since`). Also the bridge from the HTTP server's refusals to `auth.refused` records.
//
// The operator page's JSON (serve/admin_api_live.cc; docs/operations.md, "The operator
// page"), scoped like /admin/audit, from an AdminView (serve/admin_view.h):
//
//   GET  /admin/api/whoami                 the operator's name and tenants
//   GET  /admin/api/sessions?tenant=T      live sessions: tenant, id, age, state, policy, usage
//   GET  /admin/api/pool                   the warm pools of the tenants in scope
//   GET  /admin/api/egress?tenant=T&limit=N  recent egress refusals (egress.connection deny)
//   POST /admin/api/sessions/ID/pause|resume|end   audited as session.operator
//
// An action on a session outside the operator's scope is a 404, as for no session at all.
// The page itself (/admin/, its CSS and script; serve/admin_page.h) holds no data and is
// served without a token, with a Content-Security-Policy that allows only 'self'.
// Threading: the route and the refusal hook run on HTTP request threads; both only read
// their config and the trail files, or append to the (thread-safe) trail; the view is
// thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "audit/query.h"
#include "audit/trail.h"
#include "base/status.h"
#include "mcp/http_server.h"
#include "serve/admin_view.h"
#include "serve/http_config.h"

namespace mcpcell::serve {

inline constexpr size_t kDefaultAuditLimit = 1000;
inline constexpr size_t kMaxAuditLimit = 100000;

struct AuditRequest {
  audit::QueryFilter filter;
  size_t limit = kDefaultAuditLimit;
  // order=desc: the newest `limit` matching records, newest first (the operator page);
  // order=asc (the default): chain order, the first `limit` from `since`.
  bool newest_first = false;
};

// The query parameters of /admin/audit; an error names the parameter and the problem.
Result<AuditRequest> ParseAuditQuery(
    const std::vector<std::pair<std::string, std::string>>& params);

// The /admin route: operators from `config`, records from the trail in `audit_dir`, sessions
// and pools from `view` (null: /admin/api/sessions, pool and actions answer 503).
mcp::HttpRoute AdminRoute(std::shared_ptr<const HttpConfig> config, std::string audit_dir,
                          std::shared_ptr<AdminView> view = nullptr);

// /admin/api/...: the operator `op` is authenticated; the path is under /admin/api/.
mcp::HttpRouteResponse HandleAdminApi(const OperatorConfig& op, AdminView* view,
                                      const std::string& audit_dir,
                                      const mcp::HttpRouteRequest& in);

// Writes each HTTP refusal (401/403 of /mcp and of /admin) as an `auth.refused` record
// (status, peer, method, path, reason) to `trail`, which must outlive the HTTP server.
std::function<void(const mcp::HttpRefusal&)> AuditRefusals(audit::Trail* trail);

// Wires the above into the HTTP options: the /admin route when `config` has operators, and
// auth.refused records when `trail` is not null.
void AddAdminApi(mcp::HttpOptions& http, std::shared_ptr<const HttpConfig> config,
                 const std::string& audit_dir, audit::Trail* trail,
                 std::shared_ptr<AdminView> view = nullptr);

}  // namespace mcpcell::serve
