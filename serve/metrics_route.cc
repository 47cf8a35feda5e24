#include "serve/metrics_route.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace mcpcell::serve {
namespace {

mcp::HttpRouteResponse Answer(int status, const std::string& message) {
  mcp::HttpRouteResponse out;
  out.status = status;
  out.body = nlohmann::json{{"error", message}}.dump() + "\n";
  return out;
}

// The operator check of /metrics; nullopt when the caller may read it.
std::optional<mcp::HttpRouteResponse> Refusal(const HttpConfig& config,
                                              const mcp::HttpRouteRequest& in) {
  if (config.tenants.empty() && config.operators.empty()) return std::nullopt;
  std::optional<OperatorConfig> op;
  if (!in.bearer_token.empty()) op = config.AuthenticateOperator(in.bearer_token);
  if (!op) {
    const std::string why = in.bearer_token.empty() ? "send \"Authorization: Bearer <token>\""
                                                    : "the bearer token is not an operator's";
    mcp::HttpRouteResponse out = Answer(401, "Unauthorized: " + why);
    out.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"mcpcell-admin\"");
    out.refusal_reason = why;
    return out;
  }
  if (!op->scope.all_tenants) {
    mcp::HttpRouteResponse out =
        Answer(403, "Forbidden: /metrics carries every tenant's figures; operator \"" + op->name +
                        "\" is scoped to some tenants (tenants = \"*\" may read it)");
    out.refusal_reason = "operator \"" + op->name + "\" is not scoped to every tenant";
    return out;
  }
  return std::nullopt;
}

}  // namespace

mcp::HttpRoute MetricsRoute(std::shared_ptr<ServeMetrics> metrics,
                            std::shared_ptr<const HttpConfig> config) {
  mcp::HttpRoute route;
  route.prefix = "/metrics";
  route.handler = [metrics, config](const mcp::HttpRouteRequest& in) {
    if (auto refused = Refusal(*config, in)) return std::move(*refused);
    if (in.path != "/metrics") return Answer(404, "Not Found: metrics are served at /metrics");
    if (in.method != "GET") return Answer(405, "Method Not Allowed: /metrics takes GET");
    mcp::HttpRouteResponse out;
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    out.body = metrics->Scrape();
    return out;
  };
  return route;
}

void AddMetrics(mcp::HttpOptions& http, const std::shared_ptr<ServeMetrics>& metrics,
                const std::shared_ptr<const HttpConfig>& config) {
  http.routes.push_back(MetricsRoute(metrics, config));
  http.on_request_done = [metrics](const mcp::HttpRequestDone& done) {
    metrics->RequestDone(done);
  };
}

}  // namespace mcpcell::serve
