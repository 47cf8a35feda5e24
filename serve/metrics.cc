#include "serve/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>
#include <set>

#include "serve/metrics_sessions.h"

namespace mcpcell::serve {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// Tool-call latency buckets, in seconds: a file operation to a long build.
const Histogram::BucketBoundaries kCallBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                  2.5,   5,    10,    30,   60,  120,  300, 600};

Family<Counter>& NewCounter(prometheus::Registry& r, const std::string& name,
                            const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

Family<Gauge>& NewGauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

double Number(const nlohmann::json& fields, const char* key) {
  auto it = fields.find(key);
  return it != fields.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Text(const nlohmann::json& fields, const char* key) {
  auto it = fields.find(key);
  return it != fields.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

struct ServeMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *registry;
  Family<Gauge>& sessions = NewGauge(r, "mcpcell_sessions", "Sessions by tenant and state");
  Family<Gauge>& cells = NewGauge(r, "mcpcell_cells", "Cells bound to sessions now");
  Family<Gauge>& warm = NewGauge(r, "mcpcell_warm_pool_ready", "Ready cells in the warm pool");
  Family<Counter>& creations =
      NewCounter(r, "mcpcell_cell_creations_total", "Cells made (or taken warm) for sessions");
  Family<Counter>& failures =
      NewCounter(r, "mcpcell_cell_failures_total", "Cells that could not be made or set up");
  Family<Counter>& calls =
      NewCounter(r, "mcpcell_tool_calls_total", "Tool calls by tenant, tool and outcome");
  Family<Histogram>& latency = prometheus::BuildHistogram()
                                   .Name("mcpcell_tool_call_duration_seconds")
                                   .Help("Tool call latency by tool and outcome")
                                   .Register(r);
  Family<Counter>& cpu =
      NewCounter(r, "mcpcell_exec_cpu_seconds_total", "CPU seconds of the programs run in cells");
  Family<Counter>& egress_bytes =
      NewCounter(r, "mcpcell_egress_bytes_total", "Bytes through the egress proxy by direction");
  Family<Counter>& egress_refusals =
      NewCounter(r, "mcpcell_egress_refusals_total", "Egress connections the proxy refused");
  Family<Counter>& cache_hits =
      NewCounter(r, "mcpcell_package_cache_hits_total", "Package files served from the cache");
  Family<Counter>& cache_misses =
      NewCounter(r, "mcpcell_package_cache_misses_total", "Package files fetched from upstream");
  Family<Counter>& records =
      NewCounter(r, "mcpcell_audit_records_total", "Audit records written, by type");
  Family<Counter>& write_errors =
      NewCounter(r, "mcpcell_audit_write_errors_total", "Audit records that could not be written");
  Family<Counter>& requests =
      NewCounter(r, "mcpcell_http_requests_total", "HTTP requests answered, by route and status");

  SessionStates states;
  std::mutex scrape_mu;  // one scrape at a time; guards the fields below
  std::function<LiveFigures()> live;
  std::set<std::pair<std::string, SessionStates::State>> seen_states;
  std::set<std::string> seen_cell_tenants, seen_warm;
  uint64_t write_errors_counted = 0;

  void UpdateGauges();
};

// Gauges read live; a label set seen once stays, at 0 when it has nothing now.
void ServeMetrics::Impl::UpdateGauges() {
  auto counts = states.Count();
  for (const auto& [key, n] : counts) seen_states.insert(key);
  for (const auto& key : seen_states) {
    auto it = counts.find(key);
    sessions.Add({{"tenant", key.first}, {"state", SessionStates::Name(key.second)}})
        .Set(it == counts.end() ? 0 : static_cast<double>(it->second));
  }
  auto by_tenant = states.Cells();
  for (const auto& [tenant, n] : by_tenant) seen_cell_tenants.insert(tenant);
  for (const auto& tenant : seen_cell_tenants) {
    auto it = by_tenant.find(tenant);
    cells.Add({{"tenant", tenant}})
        .Set(it == by_tenant.end() ? 0 : static_cast<double>(it->second));
  }
  LiveFigures figures = live ? live() : LiveFigures{};
  for (const auto& [tenant, n] : figures.warm_ready) seen_warm.insert(tenant);
  for (const auto& tenant : seen_warm) {
    auto it = figures.warm_ready.find(tenant);
    warm.Add({{"tenant", tenant}})
        .Set(it == figures.warm_ready.end() ? 0 : static_cast<double>(it->second));
  }
  Counter& errors = write_errors.Add({});
  if (figures.audit_write_errors > write_errors_counted) {
    errors.Increment(static_cast<double>(figures.audit_write_errors - write_errors_counted));
    write_errors_counted = figures.audit_write_errors;
  }
}

ServeMetrics::ServeMetrics() : impl_(std::make_unique<Impl>()) {
  // Present from the start, so that a scrape before the first event shows them at 0.
  impl_->failures.Add({});
  impl_->write_errors.Add({});
}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::Event(std::string_view type, const std::string& tenant,
                         const std::string& session, const std::string& cell,
                         const nlohmann::json& fields) {
  Impl& m = *impl_;
  m.states.Event(type, tenant, session, cell);
  if (type == "cell.failed") {
    m.failures.Add({}).Increment();
  } else if (type == "cell.create") {
    m.creations.Add({{"tenant", tenant}}).Increment();
  } else if (type == "exec.end") {
    m.cpu.Add({{"tenant", tenant}}).Increment(Number(fields, "cpu_ms") / 1000.0);
  } else if (type == "egress.connection") {
    m.egress_bytes.Add({{"tenant", tenant}, {"direction", "up"}})
        .Increment(Number(fields, "bytes_up"));
    m.egress_bytes.Add({{"tenant", tenant}, {"direction", "down"}})
        .Increment(Number(fields, "bytes_down"));
    if (Text(fields, "decision") == "deny") m.egress_refusals.Add({{"tenant", tenant}}).Increment();
  } else if (type == "package.served") {
    // The source of an artifact: "cache", or "upstream <url>" when fetched for the cache;
    // index pages and offline sources are neither.
    const std::string source = Text(fields, "source");
    const std::string registry = Text(fields, "registry");
    if (source == "cache") {
      m.cache_hits.Add({{"registry", registry}}).Increment();
    } else if (source.rfind("upstream ", 0) == 0 && !Text(fields, "filename").empty()) {
      m.cache_misses.Add({{"registry", registry}}).Increment();
    }
  } else if (type == "policy.refused") {
    // A tools/call of a tool the session's policy leaves out ("tools/call NAME").
    const std::string call = Text(fields, "call");
    if (call.rfind("tools/call ", 0) == 0) {
      m.calls.Add({{"tenant", tenant}, {"tool", call.substr(11)}, {"outcome", "refused"}})
          .Increment();
    }
  }
}

void ServeMetrics::ToolCallDone(const std::string& tenant, const std::string& tool, bool is_error,
                                std::chrono::nanoseconds took) {
  const char* outcome = is_error ? "error" : "ok";
  impl_->calls.Add({{"tenant", tenant}, {"tool", tool}, {"outcome", outcome}}).Increment();
  impl_->latency.Add({{"tool", tool}, {"outcome", outcome}}, kCallBuckets)
      .Observe(std::chrono::duration<double>(took).count());
}

void ServeMetrics::RequestDone(const mcp::HttpRequestDone& done) {
  impl_->requests
      .Add({{"route", done.route_kind},
            {"code", std::to_string(done.status)},
            {"tenant", done.tenant}})
      .Increment();
}

void ServeMetrics::AuditRecordWritten(std::string_view type) {
  impl_->records.Add({{"type", std::string(type)}}).Increment();
}

void ServeMetrics::SetLiveSource(std::function<LiveFigures()> source) {
  std::lock_guard lock(impl_->scrape_mu);
  impl_->live = std::move(source);
}

std::string ServeMetrics::Scrape() {
  std::lock_guard lock(impl_->scrape_mu);
  impl_->UpdateGauges();
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace mcpcell::serve
