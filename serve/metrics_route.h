// The /metrics route (mcp::HttpRoute) on the HTTP listener and on the --admin listener:
// GET answers ServeMetrics::Scrape() as text/plain; version=0.0.4. When the HTTP config has
// any token (tenants or operators), only an operator whose scope is every tenant may read
// it (the figures carry every tenant's labels): 401 without an operator's token, 403 for an
// operator scoped to some tenants. Without tokens (loopback only) it is open.
// Also the adapter from the HTTP server's on_request_done to the request counter.
// Threading: the route runs on HTTP request threads; ServeMetrics is thread-safe.
#pragma once

#include <functional>
#include <memory>

#include "mcp/http_server.h"
#include "serve/http_config.h"
#include "serve/metrics.h"

namespace mcpcell::serve {

mcp::HttpRoute MetricsRoute(std::shared_ptr<ServeMetrics> metrics,
                            std::shared_ptr<const HttpConfig> config);

// Adds /metrics to `http`'s routes and counts its answered requests into `metrics`.
void AddMetrics(mcp::HttpOptions& http, const std::shared_ptr<ServeMetrics>& metrics,
                const std::shared_ptr<const HttpConfig>& config);

}  // namespace mcpcell::serve
