#include "serve/serve_packages.h"

#include <filesystem>
#include <system_error>

#include "serve/egress_registry.h"

namespace mcpcell::serve {

void RefusalRelay::Attach(EgressRegistry* registry) {
  std::lock_guard lock(mu_);
  registry_ = registry;
}

void RefusalRelay::operator()(const std::string& session_id, const std::string& line) {
  RefusalListener tell;
  {
    std::lock_guard lock(mu_);
    if (registry_) tell = registry_->Record(session_id, line);
  }
  // Outside the lock (the listener writes to a client); it outlives the registry.
  if (tell) tell(session_id, line, RefusalSource::kPackageService);
}

bool AnyPackagesEnabled(const policies::Policy& server_policy,
                        const std::map<std::string, policies::Policy>& tenant_policies) {
  bool any = server_policy.packages.mode != policies::PackagesMode::kDisabled;
  for (const auto& [name, policy] : tenant_policies)
    any = any || policy.packages.mode != policies::PackagesMode::kDisabled;
  return any;
}

Result<std::unique_ptr<packages::PackageService>> StartServePackages(
    const ServePackagesOptions& o) {
  packages::ServiceOptions service;
  service.cache_dir = std::filesystem::path(o.state_dir) / "packages";
  service.audit = o.audit;
  service.cache_max_bytes = o.cache_max_bytes;
  service.ca_file = o.ca_file;
  std::error_code ec;
  std::filesystem::create_directories(service.cache_dir, ec);
  if (ec) {
    return Error::Msg("package service: mkdir " + service.cache_dir.string() + ": " +
                      ec.message());
  }
  const policies::Policy* server_policy = o.server_policy;
  const auto* tenants = o.tenant_policies;
  // "" is the server's own policy (stdio, HTTP without tokens); a tenant the proxy names
  // is one of the HTTP config's; anything else is unknown (the service answers 403).
  service.policy_for_tenant =
      [server_policy, tenants](const std::string& tenant) -> const policies::PackagesPolicy* {
    if (tenant.empty()) return &server_policy->packages;
    auto it = tenants->find(tenant);
    return it == tenants->end() ? nullptr : &it->second.packages;
  };
  service.on_refusal = [relay = o.relay](const std::string& session, const std::string& line) {
    (*relay)(session, line);
  };
  auto started = packages::PackageService::Start(std::move(service));
  if (!started) return started.error().Wrap("package service");
  return started;
}

egress::InternalRoute PackageServiceRoute(uint16_t port) {
  return egress::InternalRoute{packages::kServiceHost, egress::IpAddress::V4(127, 0, 0, 1), port};
}

}  // namespace mcpcell::serve
