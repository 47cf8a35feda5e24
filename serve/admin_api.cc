#include "serve/admin_api.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "audit/record.h"
#include "mcp/log.h"
#include "serve/admin_page.h"

namespace mcpcell::serve {
namespace {

using nlohmann::json;

mcp::HttpRouteResponse Answer(int status, const std::string& message) {
  mcp::HttpRouteResponse out;
  out.status = status;
  out.body = json{{"error", message}}.dump() + "\n";
  return out;
}

mcp::HttpRouteResponse Unauthorized(const std::string& why) {
  mcp::HttpRouteResponse out = Answer(401, "Unauthorized: " + why);
  out.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"mcpcell-admin\"");
  out.refusal_reason = why;
  return out;
}

Result<size_t> ParseLimit(const std::string& text) {
  size_t value = 0;
  bool digits = !text.empty() && text.size() <= 9 &&
                text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) value = std::stoul(text);
  if (!digits || value == 0 || value > kMaxAuditLimit) {
    return Error::Msg("limit: expected an integer from 1 to " + std::to_string(kMaxAuditLimit) +
                      ", got \"" + text + "\"");
  }
  return value;
}

// Matching records the operator may see, as JSON Lines, at most request.limit of them.
Result<mcp::HttpRouteResponse> ReadRecords(const std::string& audit_dir,
                                           const AuditRequest& request,
                                           const audit::TenantScope& scope) {
  mcp::HttpRouteResponse out;
  out.content_type = "application/jsonl";
  if (!std::filesystem::exists(audit_dir)) return out;  // nothing written yet
  size_t matched = 0;
  auto keep = [&](const json& record) {
    if (!audit::Matches(record, request.filter) || !audit::Visible(record, scope)) return;
    if (++matched <= request.limit) out.body += audit::CanonicalJson(record) + "\n";
  };
  Status st = request.newest_first
                  // One past the limit says the answer is truncated; older files stay unread.
                  ? audit::ForEachRecordNewestFirst(
                        audit_dir,
                        [&](const json& record) {
                          keep(record);
                          return matched <= request.limit;
                        },
                        nullptr)
                  : audit::ForEachRecord(audit_dir, keep, nullptr);
  if (!st) return st.error();
  if (matched > request.limit) out.headers.emplace_back("X-Audit-Truncated", "true");
  return out;
}

// Every /admin path: the operator first (an unauthenticated caller learns nothing of the
// paths), then the path, method and parameters.
mcp::HttpRouteResponse HandleAdmin(const HttpConfig& config, const std::string& audit_dir,
                                   AdminView* view, const mcp::HttpRouteRequest& in) {
  if (auto page = ServeAdminPage(in)) return std::move(*page);  // no data: no token
  if (in.bearer_token.empty()) return Unauthorized("send \"Authorization: Bearer <token>\"");
  auto op = config.AuthenticateOperator(in.bearer_token);
  if (!op) return Unauthorized("the bearer token is not an operator's");
  if (in.path.rfind("/admin/api/", 0) == 0) return HandleAdminApi(*op, view, audit_dir, in);
  if (in.path != "/admin/audit") {
    return Answer(404, "Not Found: the admin API serves /admin/audit and /admin/api/...");
  }
  if (in.method != "GET") return Answer(405, "Method Not Allowed: /admin/audit takes GET");
  auto request = ParseAuditQuery(in.params);
  if (!request) return Answer(400, "Bad Request: " + request.error().message);
  const std::string& tenant = request->filter.tenant;
  if (!tenant.empty() && !op->scope.all_tenants && !op->scope.tenants.count(tenant)) {
    mcp::HttpRouteResponse out = Answer(
        403, "Forbidden: operator \"" + op->name + "\" may not read tenant \"" + tenant + "\"");
    out.refusal_reason = "operator \"" + op->name + "\" asked for tenant \"" + tenant + "\"";
    return out;
  }
  auto records = ReadRecords(audit_dir, *request, op->scope);
  if (!records) {
    mcp::log::Error("admin: read the audit trail: " + records.error().message);
    return Answer(500, "Internal Server Error: cannot read the audit trail");
  }
  return std::move(*records);
}

}  // namespace

Result<AuditRequest> ParseAuditQuery(
    const std::vector<std::pair<std::string, std::string>>& params) {
  AuditRequest request;
  std::set<std::string> seen;
  for (const auto& [key, value] : params) {
    if (!seen.insert(key).second) return Error::Msg(key + ": given more than once");
    if (key == "tenant") {
      request.filter.tenant = value;
    } else if (key == "session") {
      request.filter.session = value;
    } else if (key == "type") {
      request.filter.type = value;
    } else if (key == "since" || key == "until") {
      auto ms = audit::ParseTimeMs(value);
      if (!ms) return Error::Msg(key + ": " + ms.error().message);
      (key == "since" ? request.filter.since_ms : request.filter.until_ms) = *ms;
    } else if (key == "order") {
      if (value != "asc" && value != "desc") {
        return Error::Msg("order: expected asc (chain order) or desc (newest first), got \"" +
                          value + "\"");
      }
      request.newest_first = value == "desc";
    } else if (key == "limit") {
      auto limit = ParseLimit(value);
      if (!limit) return limit.error();
      request.limit = *limit;
    } else {
      return Error::Msg("unknown parameter \"" + key +
                        "\" (expected tenant, session, type, since, until, limit, order)");
    }
  }
  return request;
}

mcp::HttpRoute AdminRoute(std::shared_ptr<const HttpConfig> config, std::string audit_dir,
                          std::shared_ptr<AdminView> view) {
  mcp::HttpRoute route;
  route.prefix = "/admin";
  route.handler = [config, audit_dir, view](const mcp::HttpRouteRequest& in) {
    return HandleAdmin(*config, audit_dir, view.get(), in);
  };
  return route;
}

std::function<void(const mcp::HttpRefusal&)> AuditRefusals(audit::Trail* trail) {
  return [trail](const mcp::HttpRefusal& refusal) {
    json fields = {{"status", refusal.status},
                   {"peer", refusal.peer},
                   {"method", refusal.method},
                   {"path", refusal.path},
                   {"reason", refusal.reason}};
    if (Status st = trail->Append("auth.refused", "", "", "", fields); !st) {
      mcp::log::Warn("audit: auth.refused not recorded: " + st.error().message);
    }
  };
}

void AddAdminApi(mcp::HttpOptions& http, std::shared_ptr<const HttpConfig> config,
                 const std::string& audit_dir, audit::Trail* trail,
                 std::shared_ptr<AdminView> view) {
  if (!config->operators.empty()) {
    http.routes.push_back(AdminRoute(config, audit_dir, std::move(view)));
  }
  if (trail) http.on_auth_refused = AuditRefusals(trail);
}

}  // namespace mcpcell::serve
