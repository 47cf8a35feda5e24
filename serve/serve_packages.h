// `mcpcell serve`'s package service (packages/service.h, docs/packages.md): started before
// the egress proxy, which then routes host packages.mcpcell.internal from every cell to it
// (egress::InternalRoute). It reads the [packages] policy of the server and of each HTTP
// tenant, keeps its cache in <state>/packages, writes its events to the audit trail
// (package.<result>, serve_audit.h), and reports its refusals into the egress registry, so
// pip_install, npm_install, run_command and run_code show them in the call's result.
//
// Ownership: serve owns the service and the RefusalRelay; the relay is attached to the
// registry once that exists and detached (DetachGuard) before the registry is destroyed,
// since the service outlives it (it must start first: the proxy needs its port).
// Threading: the relay is called from the service's threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "egress/proxy.h"
#include "packages/service.h"
#include "policies/policy.h"

namespace mcpcell::serve {

class EgressRegistry;

// Passes the service's refusal lines to the registry while one is attached, and then to its
// refusal listener (outside the relay's lock); drops them otherwise (before the proxy
// exists, and during shutdown no cell can see them anyway).
class RefusalRelay {
 public:
  void Attach(EgressRegistry* registry);
  void operator()(const std::string& session_id, const std::string& line);

  // Detaches on destruction: declare it after the registry.
  struct DetachGuard {
    RefusalRelay& relay;
    ~DetachGuard() { relay.Attach(nullptr); }
  };

 private:
  std::mutex mu_;  // held while calling the registry, so Attach(nullptr) waits for a call
  EgressRegistry* registry_ = nullptr;
};

struct ServePackagesOptions {
  std::string state_dir;
  uint64_t cache_max_bytes = 4ull << 30;  // --package-cache-size
  std::string ca_file;                    // --package-ca-file
  // Both must outlive the service.
  const policies::Policy* server_policy = nullptr;
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  std::shared_ptr<RefusalRelay> relay;
  // The package events' sink (serve_audit.h PackageSink); empty: dropped.
  std::function<void(const nlohmann::json& event)> audit;
};

// Whether any served policy enables packages (else serve runs no service).
bool AnyPackagesEnabled(const policies::Policy& server_policy,
                        const std::map<std::string, policies::Policy>& tenant_policies);

// Starts the service (cache and audit directories made if missing).
Result<std::unique_ptr<packages::PackageService>> StartServePackages(
    const ServePackagesOptions& options);

// The proxy's route from packages.mcpcell.internal to the service on 127.0.0.1:port.
egress::InternalRoute PackageServiceRoute(uint16_t port);

}  // namespace mcpcell::serve
