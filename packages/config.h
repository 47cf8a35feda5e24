// PackagesConfig: what a tenant's cells may install through the package service, as plain
// data. A policy's [packages] section is one (policies/policy.h names it PackagesPolicy and
// its loader fills it in and checks every rule with packages::ParseRule); the service, the
// rules and the install tools read it. Defined here so packages/ needs nothing of policies/:
// policies uses packages, never the reverse. Threading: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mcpcell::packages {

enum class PackagesMode { kDisabled, kOnline, kOffline };

// Rules are "<registry>:<name pattern>[<constraints>]" ("pypi:requests", "pypi:numpy>=2,<3",
// "npm:@types/*"; packages/rules.h). An empty allow list allows nothing (fail closed); deny
// wins over allow.
struct PackagesConfig {
  PackagesMode mode = PackagesMode::kDisabled;
  std::vector<std::string> registries;  // "pypi", "npm" (the service serves these two)
  std::string pypi_index = "https://pypi.org/simple/";       // upstream PEP 503 index
  std::string npm_registry = "https://registry.npmjs.org/";  // upstream npm registry
  std::string wheelhouse;       // offline pip: a directory of .whl files (absolute)
  std::string npm_offline_dir;  // offline npm: a directory of .tgz files (absolute)
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  bool allow_sdist = false;                    // sdists served (pip builds them: install-time code)
  bool allow_install_scripts = false;          // npm lifecycle scripts run
  uint64_t max_artifact_bytes = 512ull << 20;  // one wheel or tarball
  // network.allow may reach the upstreams above (policies/package_upstreams.h). Gives up the
  // rules for what a cell installs from them directly: no allow/deny, no install log, no
  // wheels-only or install-scripts setting. false: the loader refuses such an allowlist.
  bool allow_direct_registry_access = false;
};

}  // namespace mcpcell::packages
