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
#include <optional>
#include <string>
#include <vector>

#include "packages/config.h"

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
  // The tenant's snapshots together (sandbox/snapshot_store.h: each snapshot counts the
  // sizes of the distinct contents it holds).
  uint64_t snapshot_storage_bytes = 1ull << 30;
  // upload_archive (docs/tools.md): the extracted files' total size, the most they may
  // expand over the archive's size, and the most entries one archive may hold.
  uint64_t archive_bytes = 1ull << 30;
  uint64_t archive_ratio = 200;
  uint64_t archive_entries = 100000;
};

struct TimePolicy {
  std::chrono::seconds exec_default{60};
  std::chrono::seconds exec_max{600};
  std::chrono::seconds session_idle{15 * 60};
  // Unused time before a session's cell is paused (frozen, docs/lifecycle.md); shorter
  // than session_idle. 0: never ("off", and the default when session_idle is 60 s or less).
  std::chrono::seconds session_pause_idle{60};
  std::chrono::seconds session_max{4 * 3600};
  // Disuse after which the server removes a named workspace ("persistent:NAME",
  // serve/workspaces.h), checked at start and hourly.
  std::chrono::seconds workspace_retention{30 * 86400};
};

struct MountPolicy {
  std::string source;  // host path, absolute, checked by CheckMountSource
  std::string target;  // cell path, absolute
  bool writable = false;
};

enum class WorkspaceMode { kEphemeral, kPersistent };

// What a session gets when its named workspace is held by another live cell.
enum class WorkspaceBusy { kRefuse, kWait };

struct FilesystemPolicy {
  // "host" (the host's /usr under a curated skeleton) or a built template, "NAME@VERSION"
  // once loaded with a state dir (sandbox/template_store.h)
  std::string template_name = "host";
  std::vector<MountPolicy> mounts;
  WorkspaceMode workspace = WorkspaceMode::kEphemeral;
  std::string workspace_dir;  // host directory of a persistent workspace (absolute)
  // workspace = "persistent:NAME": a workspace owned by the session's tenant, at
  // <state_dir>/workspaces/<owner>/<NAME> (serve/workspaces.h); workspace_dir stays empty.
  std::string workspace_name;
  // Its owner: the tenant whose policy this is, set by the server (not a policy key);
  // empty: the server's own sessions ("_").
  std::string workspace_owner;
  WorkspaceBusy workspace_busy = WorkspaceBusy::kRefuse;
};

// What a cell may reach through the egress proxy (egress/, docs/policies.md "network").
struct NetworkPolicy {
  bool egress_allowed = false;  // false: "deny": the proxy refuses every request
  // Allowlist entries as egress::Allowlist::Parse reads them (checked by the loader):
  // "pypi.org", "*.npmjs.org", "host:8443", "203.0.113.7", "10.1.0.0/16:5432".
  std::vector<std::string> allow;
  uint32_t max_connections = 32;  // concurrent proxied connections per cell
  // A proxied connection with no byte either way for this long is closed (a paused cell's
  // connections end so).
  std::chrono::seconds idle_connection_timeout{300};
};

// What pip_install/npm_install may bring into a cell, served by the package service
// (packages/, docs/packages.md): the packages room's own config type, so that packages/
// needs nothing of policies/. Rules are checked by packages::ParseRule at load.
using PackagesMode = packages::PackagesMode;
using PackagesPolicy = packages::PackagesConfig;

// `toolset` chooses the tools a client is offered (ToolsetTools): "core", the short list
// for clients that cap or degrade with many tools, or "full". `enabled` picks within it.
struct ToolsPolicy {
  std::string toolset = "core";
  std::vector<std::string> enabled;  // empty: every tool of the toolset
};

// A secret the operator grants to every session of this policy (`[[secrets]]`, issue 26,
// docs/secrets.md). Only a policy file names one, never a tool call; the value is not here:
// `source` says where to read it when a session needs it (policies/secret_source.h).
enum class SecretMode { kPlaceholder, kEnv, kFile };

struct SecretPolicy {
  std::string name;    // [A-Z_][A-Z0-9_]*: the variable (or /run/secrets/ file) name in the cell
  std::string source;  // "file:PATH", "env:VAR" or "command:CMDLINE", checked by the loader
  SecretMode mode = SecretMode::kPlaceholder;
  // Placeholder mode only: egress::Allowlist entries, each within network.allow.
  std::vector<std::string> hosts;
  // Where the proxy may substitute: "header", "basic_auth", "query", "body".
  std::vector<std::string> surfaces = {"header", "basic_auth", "query"};
  std::optional<std::chrono::seconds> ttl;  // from the session's start; nullopt: its life
  bool end_session_on_violation = false;    // on_violation = "block_and_end_session"
};

// The one audit trail ([audit], docs/audit.md). Only `commands` may be set in a tenant's
// policy; the rest is the server's (one trail per server).
enum class AuditCommands { kHash, kFull };  // exec records: SHA-256 only, or the text too

struct AuditPolicy {
  // false: no trail at all (no records, no file, no lock), for benchmarks and development
  // laptops; the start-up log says so. Server-wide.
  bool enabled = true;
  AuditCommands commands = AuditCommands::kHash;
  std::string signing_key;  // PEM Ed25519 private key path; "": unsigned checkpoints
  std::chrono::seconds retention{90 * 86400};
  uint64_t rotate_bytes = 64ull << 20;
  std::chrono::seconds rotate_age{24 * 3600};
  uint64_t checkpoint_every = 10000;
  bool required = false;  // refuse new sessions while the trail cannot be written
  std::chrono::seconds usage_interval{5 * 60};
  std::string syslog;  // "unix:/path" or "tcp:host:port"; "": no live feed
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
  std::vector<SecretPolicy> secrets;
  AuditPolicy audit;
};

// Whether any secret of `policy` is in placeholder mode (its cells then trust the proxy's CA).
bool HasPlaceholderSecrets(const Policy& policy);
// "placeholder" / "env" / "file".
std::string SecretModeName(SecretMode mode);

// The tools a policy may enable (tools/cell_tools.h registers them by these names).
const std::vector<std::string>& KnownToolNames();
// The toolsets tools.toolset may name, and the tools each holds ("core" names `python`
// before that tool exists: a name of the set that no tool has is simply not offered).
const std::vector<std::string>& KnownToolsets();
const std::vector<std::string>& ToolsetTools(const std::string& toolset);
// The registries the packages section may name.
const std::vector<std::string>& KnownRegistries();

}  // namespace mcpcell::policies
