// How `mcpcell serve` wires its operators' endpoints (/metrics, /healthz, /readyz) into the
// running server: the metrics fed from the audit observer, the trail's sink, the tools'
// observers and the cells' live figures; readiness checks of the state dir, the audit
// trail and the warm pools; the routes on the HTTP listener; and the --admin listener.
// Ownership: RunServe owns the OpsEndpoints; the cells, audit and tool env it reads must
// outlive the listeners that serve them (the admin listener is stopped first).
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "mcp/http_server.h"
#include "sandbox/cell_session.h"
#include "serve/admin_listener.h"
#include "serve/admin_view.h"
#include "serve/health.h"
#include "serve/http_config.h"
#include "serve/metrics.h"
#include "serve/serve.h"
#include "serve/serve_audit.h"
#include "tools/tool_env.h"

namespace mcpcell::serve {

// A readiness result is reused for this long.
inline constexpr std::chrono::milliseconds kReadinessMaxAge{2000};

struct OpsEndpoints {
  std::shared_ptr<ServeMetrics> metrics = std::make_shared<ServeMetrics>();
  std::shared_ptr<Readiness> readiness;   // set by ConnectOps
  std::shared_ptr<ServeAdminView> admin;  // the operator page's view, set by RunServe
};

// ServeAuditOptions::observer feeding `metrics`.
decltype(ServeAuditOptions::observer) MetricsObserver(std::shared_ptr<ServeMetrics> metrics);

// Feeds ops.metrics from the trail's records, the tools' events and calls, and the cells'
// warm pools; makes ops.readiness (state dir writable, the trail writable when [audit]
// required, cell init executable, no warm pool failing to make cells).
void ConnectOps(OpsEndpoints& ops, const ServeOptions& opts, ServeAudit& audit,
                sandbox::CellSessionManager& cells, tools::ToolEnv& env);

// /metrics, /healthz and /readyz on the HTTP listener, and its request counter.
void AddOpsRoutes(mcp::HttpOptions& http, const OpsEndpoints& ops,
                  const std::shared_ptr<const HttpConfig>& config);

// The --admin listener (nullptr without --admin): the routes above and, with operators,
// /admin/audit; its refusals recorded as auth.refused. Prints its URL on stderr.
Result<std::unique_ptr<AdminListener>> StartAdminListener(const ServeOptions& opts,
                                                          const OpsEndpoints& ops,
                                                          ServeAudit& audit);

}  // namespace mcpcell::serve
