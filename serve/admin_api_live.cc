// The operator page's JSON API under /admin/api/ (serve/admin_api.h lists the endpoints):
// what an authenticated operator may see of the live server and do to its sessions, always
// within the operator's tenants.
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "audit/query.h"
#include "mcp/log.h"
#include "serve/admin_api.h"

namespace mcpcell::serve {
namespace {

using nlohmann::json;
using Params = std::vector<std::pair<std::string, std::string>>;

inline constexpr size_t kDefaultEgressLimit = 100;
inline constexpr size_t kMaxEgressLimit = 1000;

mcp::HttpRouteResponse Json(int status, const json& body) {
  mcp::HttpRouteResponse out;
  out.status = status;
  out.body = body.dump() + "\n";
  out.headers.emplace_back("Cache-Control", "no-store");
  return out;
}

mcp::HttpRouteResponse Fail(int status, const std::string& message) {
  return Json(status, json{{"error", message}});
}

bool InScope(const audit::TenantScope& scope, const std::string& tenant) {
  return scope.all_tenants || (!tenant.empty() && scope.tenants.count(tenant) > 0);
}

// The only parameters of an endpoint are `allowed`, each at most once; `tenant` must be in
// the operator's scope. The error answer, or nullopt when they are good.
std::optional<mcp::HttpRouteResponse> CheckParams(const OperatorConfig& op, const Params& params,
                                                  const std::set<std::string>& allowed,
                                                  const std::string& path) {
  std::set<std::string> seen;
  for (const auto& [key, value] : params) {
    if (!allowed.count(key)) {
      std::string expected;
      for (const std::string& name : allowed) expected += (expected.empty() ? "" : ", ") + name;
      return Fail(400,
                  "Bad Request: " + path + ": unknown parameter \"" + key + "\"" +
                      (expected.empty() ? " (it takes none)" : " (expected " + expected + ")"));
    }
    if (!seen.insert(key).second)
      return Fail(400, "Bad Request: " + key + ": given more than once");
    if (key == "tenant" && !InScope(op.scope, value)) {
      mcp::HttpRouteResponse out = Fail(
          403, "Forbidden: operator \"" + op.name + "\" may not read tenant \"" + value + "\"");
      out.refusal_reason = "operator \"" + op.name + "\" asked for tenant \"" + value + "\"";
      return out;
    }
  }
  return std::nullopt;
}

std::string Param(const Params& params, const std::string& key) {
  for (const auto& [k, v] : params) {
    if (k == key) return v;
  }
  return "";
}

json Whoami(const OperatorConfig& op) {
  json tenants = json::array();
  for (const std::string& t : op.scope.tenants) tenants.push_back(t);
  return {{"operator", op.name},
          {"all_tenants", op.scope.all_tenants},
          {"tenants", op.scope.all_tenants ? json("*") : tenants}};
}

json SessionsJson(const OperatorConfig& op, const AdminView& view, const std::string& tenant) {
  json out = json::array();
  for (const AdminSession& s : view.Sessions()) {
    if (!InScope(op.scope, s.tenant) || (!tenant.empty() && s.tenant != tenant)) continue;
    out.push_back({{"tenant", s.tenant},
                   {"id", s.id},
                   {"age_s", s.age_s},
                   {"state", s.state},
                   {"policy", s.policy},
                   {"usage", s.usage}});
    if (!s.held_by.empty()) {
      out.back()["held_by"] = s.held_by;
      out.back()["held_since"] = s.held_since;
    }
  }
  return {{"sessions", out}};
}

json PoolsJson(const OperatorConfig& op, const AdminView& view) {
  json out = json::array();
  for (const AdminPool& p : view.Pools()) {
    if (!InScope(op.scope, p.tenant)) continue;
    out.push_back({{"tenant", p.tenant},
                   {"target", p.target},
                   {"ready", p.ready},
                   {"parked", p.parked},
                   {"status", p.status}});
  }
  return {{"pools", out}};
}

Result<size_t> EgressLimit(const Params& params) {
  std::string text = Param(params, "limit");
  if (text.empty()) return kDefaultEgressLimit;
  bool digits = text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  size_t value = digits ? std::stoul(text) : 0;
  if (value == 0 || value > kMaxEgressLimit) {
    return Error::Msg("limit: expected an integer from 1 to " + std::to_string(kMaxEgressLimit) +
                      ", got \"" + text + "\"");
  }
  return value;
}

// The newest `limit` refused connections (egress.connection with decision deny) in scope,
// oldest first.
Result<json> EgressRefusals(const OperatorConfig& op, const std::string& audit_dir,
                            const std::string& tenant, size_t limit) {
  std::deque<json> kept;
  audit::QueryFilter filter;
  filter.type = "egress.connection";
  filter.tenant = tenant;
  if (std::filesystem::exists(audit_dir)) {
    Status st = audit::ForEachRecord(
        audit_dir,
        [&](const json& record) {
          if (!audit::Matches(record, filter) || !audit::Visible(record, op.scope)) return;
          if (record.value("decision", "") != "deny") return;
          json row = json::object();
          for (const char* key :
               {"time", "tenant", "session", "method", "host", "port", "address", "reason"}) {
            if (record.contains(key)) row[key] = record[key];
          }
          kept.push_back(std::move(row));
          if (kept.size() > limit) kept.pop_front();
        },
        nullptr);
    if (!st) return st.error();
  }
  return json{{"refusals", json(std::vector<json>(kept.begin(), kept.end()))}};
}

// POST /admin/api/sessions/ID/ACTION.
mcp::HttpRouteResponse SessionAction(const OperatorConfig& op, AdminView& view,
                                     const std::string& rest) {
  size_t slash = rest.find('/');
  std::string id = rest.substr(0, slash);
  std::string verb = slash == std::string::npos ? "" : rest.substr(slash + 1);
  AdminAction action;
  if (verb == "pause") {
    action = AdminAction::kPause;
  } else if (verb == "resume") {
    action = AdminAction::kResume;
  } else if (verb == "end") {
    action = AdminAction::kEnd;
  } else {
    return Fail(404, "Not Found: POST /admin/api/sessions/ID/pause, /resume or /end");
  }
  // Another tenant's session is answered as no session at all: its id tells nothing.
  bool visible = false;
  for (const AdminSession& s : view.Sessions()) {
    if (s.id == id) visible = InScope(op.scope, s.tenant);
  }
  if (id.empty() || !visible) return Fail(404, "Not Found: no live session \"" + id + "\"");
  AdminActionResult result = view.Act(action, id, op.name);
  if (result.status != 200) {
    return Fail(result.status,
                std::string(result.status == 404 ? "Not Found: " : "Conflict: ") + result.message);
  }
  return Json(200,
              {{"session", id}, {"action", AdminActionName(action)}, {"message", result.message}});
}

}  // namespace

mcp::HttpRouteResponse HandleAdminApi(const OperatorConfig& op, AdminView* view,
                                      const std::string& audit_dir,
                                      const mcp::HttpRouteRequest& in) {
  const std::string path = in.path;
  const std::string sessions_prefix = "/admin/api/sessions/";
  if (in.method == "POST" && path.rfind(sessions_prefix, 0) == 0) {
    if (auto bad = CheckParams(op, in.params, {}, path)) return std::move(*bad);
    if (!view) return Fail(503, "Service Unavailable: this listener has no sessions to act on");
    return SessionAction(op, *view, path.substr(sessions_prefix.size()));
  }
  const bool known = path == "/admin/api/whoami" || path == "/admin/api/sessions" ||
                     path == "/admin/api/pool" || path == "/admin/api/egress";
  if (!known) {
    return Fail(404, "Not Found: " + path +
                         " (the API serves whoami, sessions, pool, egress and "
                         "POST sessions/ID/pause|resume|end under /admin/api/)");
  }
  if (in.method != "GET") {
    mcp::HttpRouteResponse out = Fail(405, "Method Not Allowed: " + path + " takes GET");
    out.headers.emplace_back("Allow", "GET");
    return out;
  }
  if (path == "/admin/api/whoami") {
    if (auto bad = CheckParams(op, in.params, {}, path)) return std::move(*bad);
    return Json(200, Whoami(op));
  }
  if (path == "/admin/api/egress") {
    if (auto bad = CheckParams(op, in.params, {"tenant", "limit"}, path)) return std::move(*bad);
    auto limit = EgressLimit(in.params);
    if (!limit) return Fail(400, "Bad Request: " + limit.error().message);
    auto refusals = EgressRefusals(op, audit_dir, Param(in.params, "tenant"), *limit);
    if (!refusals) {
      mcp::log::Error("admin: read the audit trail: " + refusals.error().message);
      return Fail(500, "Internal Server Error: cannot read the audit trail");
    }
    return Json(200, *refusals);
  }
  const std::set<std::string> allowed =
      path == "/admin/api/sessions" ? std::set<std::string>{"tenant"} : std::set<std::string>{};
  if (auto bad = CheckParams(op, in.params, allowed, path)) return std::move(*bad);
  if (!view) return Fail(503, "Service Unavailable: this listener has no sessions to show");
  if (path == "/admin/api/pool") return Json(200, PoolsJson(op, *view));
  return Json(200, SessionsJson(op, *view, Param(in.params, "tenant")));
}

}  // namespace mcpcell::serve
