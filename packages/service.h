// The package service: a pull-through cache that serves the cells' pip and npm
// (docs/packages.md). The egress proxy forwards a cell's plain-HTTP request to host
// packages.mcpcell.internal to this service on 127.0.0.1, adding X-Mcpcell-Session and
// X-Mcpcell-Tenant (copies the cell sent are removed, so both are trustworthy).
//
//   GET /pypi/simple/<project>/              PEP 503 page, filtered by the tenant's policy
//   GET /pypi/files/<sha256>/<filename>      one artifact, verified, from the cache
//   GET /npm/<name> or /npm/@scope%2fname    packument, filtered versions
//   GET /npm/-/files/<algo>-<hex>/<file>.tgz one tarball, verified, from the cache
//
// Online mode fetches pages and artifacts from the policy's upstream (HTTPS verified);
// offline mode builds pages from the wheelhouse / npm directory and never touches the
// network. Artifacts are stored content-addressed under cache_dir and shared by every
// session and tenant; every artifact served or refused is one event to the `audit` sink
// (`mcpcell serve` writes it to the audit trail as package.<result>).
// Threading: Start runs an httplib server on its own threads; the callbacks in
// ServiceOptions are called from them (possibly at once) and must be thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "packages/config.h"
#include "packages/service_address.h"

namespace mcpcell::packages {

inline constexpr char kSessionHeader[] = "X-Mcpcell-Session";
inline constexpr char kTenantHeader[] = "X-Mcpcell-Tenant";

struct ServiceOptions {
  std::filesystem::path cache_dir;        // <state>/packages (content-addressed artifacts)
  uint64_t cache_max_bytes = 4ull << 30;  // least recently used evicted beyond it
  // Told each artifact or page served, refused or failed: {session, tenant, registry,
  // package, version, filename, digest, source, result ("served", "refused",
  // "hash_mismatch", "upstream_error"),
  // reason}. Called from the service's threads (thread-safe, quick); empty: dropped.
  std::function<void(const nlohmann::json& event)> audit;
  // The packages policy of a tenant ("" = the server's own policy); nullptr: unknown
  // tenant -> 403. The pointer must stay valid while the service runs.
  std::function<const PackagesConfig*(const std::string& tenant)> policy_for_tenant;
  // Told each refusal/failure line with the session id (serve wires it into the egress
  // registry so run_command/pip_install results show it).
  std::function<void(const std::string& session_id, const std::string& line)> on_refusal;
  std::string ca_file;  // extra CA bundle for upstream TLS (tests); empty: system CAs only
  // Worker threads; each keep-alive connection (one installing pip or npm) holds one while
  // it is open, so this bounds the installs served at once (others queue). At most half of
  // them download from upstream at once; beyond that an artifact miss is a 503 (retried).
  int threads = 16;
};

struct CacheStats {
  uint64_t bytes = 0;             // artifact bytes in the cache now
  uint64_t artifacts = 0;         // artifacts in the cache now
  uint64_t hits = 0;              // artifacts served from the cache
  uint64_t misses = 0;            // artifacts not in the cache when asked
  uint64_t upstream_fetches = 0;  // artifact downloads from an upstream
};

class PackageService {
 public:
  // Binds 127.0.0.1:0, loads the cache index from cache_dir and starts serving.
  static Result<std::unique_ptr<PackageService>> Start(ServiceOptions options);
  ~PackageService();  // stops the server and joins its threads
  PackageService(const PackageService&) = delete;
  PackageService& operator=(const PackageService&) = delete;

  uint16_t port() const;
  CacheStats Stats() const;

  class Impl;

 private:
  explicit PackageService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcpcell::packages
