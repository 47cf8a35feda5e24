// Policy: what the cells of one profile may do, as plain data (DESIGN.md §4).
//
// A Policy is what a profile file (policies/*.toml, docs/policies.md) says once the loader
// (policies/loader.h) has checked it: every field has its default filled in and every value
// is in range. The compiler (policies/compiler.h) turns it into the sandbox's CellSpec and
// the tool layer reads its tool and time settings. Nothing here touches the system.
// Threading: plain data; no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mcpcell::policies {

struct IsolationPolicy {
  std::string backend = "namespaces";  // the only backend today; "microvm" is reserved
  bool seccomp = true;
};

struct LimitsPolicy {
  uint64_t memory_bytes = 1ull << 30;  // cgroup memory.max, swap off
  uint64_t pids = 256;
  uint32_t cpu_millicores = 1000;          // 1000 = one CPU
  uint64_t disk_bytes = 1ull << 30;        // the cell's writable layers (overlay uppers)
  uint64_t tmp_bytes = 256ull << 20;       // /tmp
  uint64_t open_files = 1024;              // RLIMIT_NOFILE per process
  uint64_t file_size_bytes = 1ull << 30;   // RLIMIT_FSIZE: largest file a program writes
  uint64_t output_keep_bytes = 64 * 1024;  // tool result output kept per stream
};

struct TimePolicy {
  std::chrono::seconds exec_default{60};
  std::chrono::seconds exec_max{600};
  std::chrono::seconds session_idle{15 * 60};
  std::chrono::seconds session_max{4 * 3600};
};

struct MountPolicy {
  std::string source;  // host path, absolute, checked by CheckMountSource
  std::string target;  // cell path, absolute
  bool writable = false;
};

enum class WorkspaceMode { kEphemeral, kPersistent };

struct FilesystemPolicy {
  std::string template_name = "host";  // the host's /usr under a curated skeleton
  std::vector<MountPolicy> mounts;
  WorkspaceMode workspace = WorkspaceMode::kEphemeral;
  std::string workspace_dir;  // host directory of a persistent workspace (absolute)
};

// What a cell may reach through the egress proxy (egress/, docs/policies.md "network").
struct NetworkPolicy {
  bool egress_allowed = false;  // false: "deny": the proxy refuses every request
  // Allowlist entries as egress::Allowlist::Parse reads them (checked by the loader):
  // "pypi.org", "*.npmjs.org", "host:8443", "203.0.113.7", "10.1.0.0/16:5432".
  std::vector<std::string> allow;
  uint32_t max_connections = 32;  // concurrent proxied connections per cell
};

// What pip_install/npm_install may bring into a cell, served by the package service
// (packages/, docs/packages.md). Rules are "<registry>:<name pattern>[<constraints>]"
// ("pypi:requests", "pypi:numpy>=2,<3", "npm:@types/*"), checked by packages::ParseRule at
// load. An empty allow list allows nothing (fail closed); deny wins over allow.
enum class PackagesMode { kDisabled, kOnline, kOffline };

struct PackagesPolicy {
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

struct ToolsPolicy {
  std::vector<std::string> enabled;  // empty: every tool
};

struct Policy {
  std::string name = "default";
  std::string description;
  std::string source;  // file the policy came from ("<builtin:default>" for shipped ones)
  IsolationPolicy isolation;
  LimitsPolicy limits;
  TimePolicy time;
  FilesystemPolicy filesystem;
  NetworkPolicy network;
  PackagesPolicy packages;
  ToolsPolicy tools;
};

// The tools a policy may enable (tools/cell_tools.h registers them by these names).
const std::vector<std::string>& KnownToolNames();
// The registries the packages section may name.
const std::vector<std::string>& KnownRegistries();

}  // namespace mcpcell::policies
