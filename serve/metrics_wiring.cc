#include "serve/metrics_wiring.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "audit/trail_files.h"
#include "sandbox/cell.h"
#include "serve/admin_api.h"
#include "serve/metrics_route.h"

namespace mcpcell::serve {
namespace {

std::string Text(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The cell profiles in use: the server's own ("") and each tenant's (named after it).
std::vector<std::string> Profiles(const ServeOptions& opts) {
  std::vector<std::string> profiles = {""};
  for (const auto& [tenant, policy] : opts.tenant_policies) profiles.push_back(tenant);
  return profiles;
}

std::vector<ReadinessCheck> ReadinessChecks(const ServeOptions& opts, ServeAudit& audit,
                                            sandbox::CellSessionManager& cells) {
  std::vector<ReadinessCheck> checks;
  checks.push_back({"state_dir", [dir = opts.state_dir]() -> Status {
                      if (Status st = DirWritable(dir); !st) return st;
                      return DirWritable(dir + "/cells");
                    }});
  if (audit.trail() && opts.effective.audit.required) {
    checks.push_back(
        {"audit", [trail = audit.trail(), dir = audit::AuditDir(opts.state_dir)]() -> Status {
           if (!trail->Healthy()) return Error::Msg("audit trail: " + trail->last_error());
           return DirWritable(dir);
         }});
  }
  // A cell is made by executing cell init: gone (e.g. removed by an upgrade), none can be.
  checks.push_back({"cell_init", [init = opts.init_path]() -> Status {
                      if (init.empty()) {
                        Result<std::string> found = sandbox::FindCellInit();
                        return found ? Ok() : Status(found.error());
                      }
                      if (::access(init.c_str(), X_OK) != 0) {
                        return Error::Sys("access(\"" + init + "\", X_OK)");
                      }
                      return Ok();
                    }});
  checks.push_back({"warm_pool", [&cells, profiles = Profiles(opts)]() -> Status {
                      for (const std::string& profile : profiles) {
                        std::string status = cells.warm_status(profile);
                        if (status.rfind("retrying:", 0) == 0) {
                          return Error::Msg("warm pool \"" + profile + "\": " + status);
                        }
                      }
                      return Ok();
                    }});
  return checks;
}

}  // namespace

decltype(ServeAuditOptions::observer) MetricsObserver(std::shared_ptr<ServeMetrics> metrics) {
  return [metrics](std::string_view type, const std::string& tenant, const std::string& session,
                   const std::string& cell, const nlohmann::json& fields) {
    metrics->Event(type, tenant, session, cell, fields);
  };
}

void ConnectOps(OpsEndpoints& ops, const ServeOptions& opts, ServeAudit& audit,
                sandbox::CellSessionManager& cells, tools::ToolEnv& env) {
  const std::shared_ptr<ServeMetrics>& metrics = ops.metrics;
  if (audit::Trail* trail = audit.trail()) {
    trail->AddSink([metrics](const nlohmann::json& record, std::string_view) {
      metrics->AuditRecordWritten(Text(record, "type"));
    });
  }
  env.on_event = [metrics](const mcp::Session& s, std::string_view type, const mcp::Json& fields) {
    metrics->Event(type, s.tenant(), s.id(), "", fields);
  };
  env.on_call_done = [metrics](const mcp::Session& s, const std::string& tool, bool is_error,
                               std::chrono::nanoseconds took) {
    metrics->ToolCallDone(s.tenant(), tool, is_error, took);
  };
  metrics->SetLiveSource([&cells, &audit, profiles = Profiles(opts)] {
    LiveFigures figures;
    for (const std::string& profile : profiles)
      figures.warm_ready[profile] = cells.warm_ready(profile);
    if (audit.trail()) figures.audit_write_errors = audit.trail()->failed_writes();
    return figures;
  });
  ops.readiness =
      std::make_shared<Readiness>(ReadinessChecks(opts, audit, cells), kReadinessMaxAge);
}

void AddOpsRoutes(mcp::HttpOptions& http, const OpsEndpoints& ops,
                  const std::shared_ptr<const HttpConfig>& config) {
  AddMetrics(http, ops.metrics, config);
  for (mcp::HttpRoute& route : HealthRoutes(ops.readiness)) http.routes.push_back(std::move(route));
}

Result<std::unique_ptr<AdminListener>> StartAdminListener(const ServeOptions& opts,
                                                          const OpsEndpoints& ops,
                                                          ServeAudit& audit) {
  if (opts.admin.empty()) return std::unique_ptr<AdminListener>();
  auto address = ParseListenAddress(opts.admin, "--admin");
  if (!address) return address.error().Wrap("mcpcell serve");
  auto config = std::make_shared<const HttpConfig>(opts.http_settings);
  AdminListenerOptions o;
  o.address = *address;
  o.have_operators = !config->operators.empty();
  o.routes.push_back(MetricsRoute(ops.metrics, config));
  for (mcp::HttpRoute& route : HealthRoutes(ops.readiness)) o.routes.push_back(std::move(route));
  if (o.have_operators)
    o.routes.push_back(AdminRoute(config, audit::AuditDir(opts.state_dir), ops.admin));
  if (audit.trail()) o.on_refused = AuditRefusals(audit.trail());
  auto listener = AdminListener::Start(std::move(o));
  if (!listener) return listener.error().Wrap("mcpcell serve");
  std::fprintf(stderr, "mcpcell: operators' endpoints at %s/metrics, /healthz, /readyz\n",
               (*listener)->url().c_str());
  std::fflush(stderr);
  return listener;
}

}  // namespace mcpcell::serve
