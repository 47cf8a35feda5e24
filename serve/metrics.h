// ServeMetrics: the figures `mcpcell serve` exposes at /metrics in the Prometheus text
// format (docs/metrics.md lists every metric, its labels and meaning), made with
// prometheus-cpp's core registry and text serializer and served by our own HTTP stack
// (serve/metrics_route.h).
//
// Counters are fed where the events already pass one place: Event() sees every event the
// audit trail is given (ServeAudit's observer and the tools' ToolEnv::on_event), whether or
// not the trail is on; ToolCallDone the end of each tool call (ToolEnv::on_call_done);
// RequestDone each answered HTTP request (mcp::HttpOptions::on_request_done);
// AuditRecordWritten each record the trail wrote (its sink). Gauges (sessions by state,
// cells, warm pool, audit write errors) are read at scrape time. Labels are bounded: tenants
// come from the HTTP config, tools from the registry, event types and statuses are fixed
// sets. The tenant label is "" for sessions under the server's own policy.
// Threading: every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "mcp/http_server.h"

namespace mcpcell::serve {

// What a scrape reads live from the running server.
struct LiveFigures {
  std::map<std::string, size_t> warm_ready;  // ready warm-pool cells by tenant
  uint64_t audit_write_errors = 0;           // the trail's failed writes so far
};

class ServeMetrics {
 public:
  ServeMetrics();
  ~ServeMetrics();
  ServeMetrics(const ServeMetrics&) = delete;
  ServeMetrics& operator=(const ServeMetrics&) = delete;

  // An event as given to the audit trail (type, tenant, session, cell, fields), and
  // ServeAudit's `cell.failed` (a cell that could not be made or set up; no record).
  void Event(std::string_view type, const std::string& tenant, const std::string& session,
             const std::string& cell, const nlohmann::json& fields);
  // A tool call whose handler ran: its result was an error (isError) or not.
  void ToolCallDone(const std::string& tenant, const std::string& tool, bool is_error,
                    std::chrono::nanoseconds took);
  void RequestDone(const mcp::HttpRequestDone& done);
  void AuditRecordWritten(std::string_view type);
  // Read at each scrape; unset: the live gauges stay 0.
  void SetLiveSource(std::function<LiveFigures()> source);

  // Every metric now, in the Prometheus text exposition format (version 0.0.4).
  std::string Scrape();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcpcell::serve
