// `mcpcell serve`: its flags. They compose into a policy (--policy and the per-limit
// flags) and, over HTTP, every tenant's policy is resolved (a bad one refuses the start);
// then serve::RunServe (serve/serve.h) does the rest, step by step.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "base/units.h"
#include "cli/command.h"
#include "policies/compiler.h"
#include "policies/loader.h"
#include "sandbox/state_dir.h"
#include "serve/admin_listener.h"
#include "serve/http_config.h"
#include "serve/sandbox_handles.h"
#include "serve/serve.h"
#include "serve/socket_activation.h"
#include "serve/tenant_policies.h"

namespace mcpcell::cli {
namespace {

// The flags: what RunServe takes, and what only composes into it.
struct ServeFlags {
  serve::ServeOptions run;
  bool stdio = false;  // --stdio (the default, explicit)
  // The policy (shipped name or .toml file); the flags below compose into it.
  std::string policy = "default";
  policies::PolicyOverrides overrides;
  // The policy with the limit flags only: what a tenant without a `policy` key starts from
  // (the host directories reach tenants only with inherit_server_mounts).
  policies::Policy tenant_base;
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
  uint64_t pids = 0;
  uint32_t cpu_millicores = 0;
  int64_t idle_timeout_s = 0;
  int64_t pause_idle_timeout_s = -1;
  int64_t max_lifetime_s = 0;
  int64_t default_timeout_s = 0;
  int64_t max_timeout_s = 0;
  size_t keep_bytes = 0;
  std::string package_cache_size = "4GiB";  // --package-cache-size
};

// The profile named by --policy with the per-limit, --mount, --output and --workspace
// flags composed into it (flags win). Prints the error and returns false on failure.
bool ResolveEffectivePolicy(ServeFlags& o, CLI::App& cmd) {
  policies::PolicyOverrides& ov = o.overrides;
  if (cmd.count("--memory-mib")) ov.memory_bytes = o.memory_mib << 20;
  if (cmd.count("--disk-mib")) ov.disk_bytes = o.disk_mib << 20;
  if (cmd.count("--pids")) ov.pids = o.pids;
  if (cmd.count("--cpu-millicores")) ov.cpu_millicores = o.cpu_millicores;
  if (cmd.count("--idle-timeout")) ov.session_idle = std::chrono::seconds(o.idle_timeout_s);
  if (cmd.count("--pause-idle-timeout"))
    ov.session_pause_idle = std::chrono::seconds(o.pause_idle_timeout_s);
  if (cmd.count("--max-lifetime")) ov.session_max = std::chrono::seconds(o.max_lifetime_s);
  if (cmd.count("--default-timeout")) ov.exec_default = std::chrono::seconds(o.default_timeout_s);
  if (cmd.count("--max-timeout")) ov.exec_max = std::chrono::seconds(o.max_timeout_s);
  if (cmd.count("--output-keep-bytes")) ov.output_keep_bytes = o.keep_bytes;
  const std::string& state_dir = o.run.state_dir;
  auto base = policies::ResolvePolicy(o.policy, {state_dir});
  if (!base) {
    std::fprintf(stderr, "mcpcell serve: --policy %s: %s\n", o.policy.c_str(),
                 base.error().message.c_str());
    return false;
  }
  auto tenant_base = policies::ApplyOverrides(*base, serve::WithoutHostDirs(ov), state_dir);
  auto composed = policies::ApplyOverrides(std::move(*base), ov, state_dir);
  if (!composed || !tenant_base) {
    std::fprintf(stderr, "mcpcell serve: %s\n",
                 (composed ? tenant_base : composed).error().message.c_str());
    return false;
  }
  o.run.effective = std::move(*composed);
  o.tenant_base = std::move(*tenant_base);
  return true;
}

// The HTTP config and every tenant's policy (serve/tenant_policies.h). Prints the error,
// naming the tenant and its policy, and returns false on failure.
bool LoadTenants(ServeFlags& flags) {
  serve::ServeOptions& o = flags.run;
  if (o.http_config.empty()) return true;
  std::string error;
  auto loaded = serve::LoadHttpConfig(o.http_config, error);
  if (!loaded) {
    std::fprintf(stderr, "mcpcell serve: --http-config %s\n", error.c_str());
    return false;
  }
  o.http_settings = std::move(*loaded);
  auto tenants = serve::ResolveTenantPolicies(
      o.http_settings, flags.tenant_base, serve::HostDirOverrides(flags.overrides), o.state_dir);
  if (!tenants) {
    std::fprintf(stderr, "mcpcell serve: --http-config %s: %s\n", o.http_config.c_str(),
                 tenants.error().message.c_str());
    return false;
  }
  o.tenant_policies = std::move(*tenants);
  return true;
}

// The HTTP port's socket when systemd passed one (serve/socket_activation.h). First thing
// of the command: it unsets environment variables, before any thread exists. Prints the
// error and returns false on failure.
bool TakeActivatedSocket(serve::ServeOptions& run) {
  auto activated = serve::TakeActivatedSocket();
  if (!activated) {
    std::fprintf(stderr, "mcpcell serve: socket activation: %s\n",
                 activated.error().message.c_str());
    return false;
  }
  if (!activated->ignored.empty())
    std::fprintf(stderr, "mcpcell serve: socket activation: %s\n", activated->ignored.c_str());
  if (activated->fd >= 0 && run.http.empty()) {
    std::fprintf(stderr,
                 "mcpcell serve: socket activation: systemd passed a listening socket "
                 "(LISTEN_FDS=1), but serve runs over stdio; add --http ADDR:PORT naming the "
                 "address of the socket unit's ListenStream=\n");
    ::close(activated->fd);
    return false;
  }
  run.http_listen_fd = activated->fd;
  return true;
}

const bool kRegistered = RegisterCommand("serve", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<ServeFlags>();
  opts->run.state_dir = sandbox::DefaultStateDir();
  CLI::App* cmd = parent.add_subcommand("serve", kServeSummary);
  cmd->add_option("--log-level", opts->run.log_level,
                  "Diagnostics on stderr: debug, info, notice, warning, error, critical, "
                  "alert, emergency or off")
      ->check(CLI::IsMember(
          {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "off"}))
      ->capture_default_str();
  cmd->add_option("--log-file", opts->run.log_file, "Append diagnostics to this file, not stderr");
  auto* http_opt = cmd->add_option(
      "--http", opts->run.http,
      "Serve Streamable HTTP at http://[ADDR:]PORT/mcp (ADDR defaults to 127.0.0.1) instead of "
      "stdio; under systemd socket activation (LISTEN_FDS) on the socket it passes, which must "
      "be bound to ADDR:PORT");
  cmd->add_flag("--stdio", opts->stdio, "Serve over stdin/stdout (the default; for Claude Desktop)")
      ->excludes(http_opt);
  cmd->add_option("--resume", opts->run.resume_session,
                  "stdio: start over the files of this hibernated session (its id is in "
                  "session_info; `mcpcell session list` lists them)")
      ->excludes(http_opt);
  cmd->add_option("--server-id", opts->run.server_id,
                  "This server's id in the sandbox handles it mints (2026-07-28 clients), so a "
                  "router sends each handle back here (e.g. the pod name)")
      ->check([](const std::string& id) {
        Status st = serve::SandboxHandles::CheckServerId(id);
        return st ? std::string() : st.error().message;
      });
  cmd->add_option("--http-resume-grace", opts->run.resume_grace_s,
                  "Seconds a client whose connection dropped mid-call has to resume its stream "
                  "(Last-Event-ID) before the call is cancelled and its command killed")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str()
      ->needs(http_opt);
  cmd->add_option("--http-config", opts->run.http_config,
                  "HTTP config (TOML): bearer-token hashes -> tenants, quotas, allowed "
                  "hosts/origins, TLS")
      ->needs(http_opt);
  cmd->add_option("--admin", opts->run.admin,
                  "Also serve /metrics, /healthz and /readyz (and /admin/audit with operators) "
                  "to operators on a second listener at http://[ADDR:]PORT (ADDR defaults to "
                  "127.0.0.1; another address needs [[operator]] tokens in --http-config)")
      ->check([](const std::string& value) {
        auto address = serve::ParseListenAddress(value, "");  // CLI11 names the flag
        return address ? std::string() : address.error().message;
      });
  cmd->add_option("--max-message-bytes", opts->run.max_message_bytes,
                  "Largest accepted incoming message; longer lines are refused")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 31))
      ->capture_default_str();
  cmd->add_option("--state-dir", opts->run.state_dir, "Where cells and the template live")
      ->capture_default_str();
  cmd->add_option("--egress-hosts", opts->run.egress_hosts,
                  "hosts(5) file the egress proxy consults before DNS (pin registries' "
                  "addresses); its addresses pass the same checks as DNS answers")
      ->check(CLI::ExistingFile);
  cmd->add_option("--egress-ca-file", opts->run.egress_ca_file,
                  "Extra CA certificates (PEM) the egress proxy trusts for the upstreams of "
                  "placeholder secrets, besides the system's (docs/secrets.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--package-cache-size", opts->package_cache_size,
                  "Size of the package cache in <state dir>/packages (shared by every session; "
                  "least recently used artifacts evicted beyond it), e.g. 4GiB")
      ->capture_default_str();
  cmd->add_option("--package-ca-file", opts->run.package_ca_file,
                  "Extra CA certificates (PEM) the package service trusts for its upstream "
                  "registries, e.g. a company mirror's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--init", opts->run.init_path, "Path of mcpcell-init (default: next to mcpcell)");
  cmd->add_option("--policy", opts->policy,
                  "Policy: a shipped profile (default, offline-strict, dev) or a .toml file; "
                  "the flags below override it (see `mcpcell policy show`)")
      ->capture_default_str();
  cmd->add_option("--mount", opts->overrides.mounts,
                  "SRC:DST[:ro|rw] host directory visible in the cell (default ro; repeatable)");
  cmd->add_option("--output", opts->overrides.output_dir,
                  "Host directory the cell writes to at /output (made if missing)");
  cmd->add_option("--workspace", opts->overrides.workspace_dir,
                  "Persistent workspace: this host directory is /workspace and outlives "
                  "sessions (made if missing)");
  cmd->add_option("--memory-mib", opts->memory_mib, "Memory limit per cell (MiB, swap off)")
      ->check(CLI::Range(uint64_t{16}, uint64_t{1} << 20));
  cmd->add_option("--disk-mib", opts->disk_mib,
                  "Disk limit per cell (MiB): the writable layers and an ephemeral workspace")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  cmd->add_option("--warm-cells", opts->run.warm_cells,
                  "Cells made ahead of need per policy profile, so a session's first call "
                  "does not wait for one (0: make each on demand; off by itself for a "
                  "persistent workspace). The floor: a burst that drains the pool raises its "
                  "target up to --warm-cells-max, and it falls back a minute after")
      ->check(CLI::Range(size_t{0}, size_t{4096}));
  cmd->add_option("--warm-cells-max", opts->run.warm_cells_max,
                  "The most ready cells per profile a pool grows to with demand (the most "
                  "sessions started within a second over the last minute). Default: a tenth "
                  "of the cells this host can hold (mcpcell doctor), at most 128. At or "
                  "below --warm-cells (0 included): no growth")
      ->check(CLI::Range(size_t{0}, size_t{100000}));
  cmd->add_option("--server-cpu-weight", opts->run.server_cpu_weight,
                  "CPU weight (cgroup v2 cpu.weight units) of the cgroup the server moves "
                  "into, <own cgroup>/mcpcell-server, so busy cells do not delay requests; 0 "
                  "leaves the server where it started")
      ->check(CLI::Range(uint32_t{0}, uint32_t{10000}))
      ->capture_default_str();
  cmd->add_option("--cells-cpu-weight", opts->run.cells_cpu_weight,
                  "CPU weight of <own cgroup>/mcpcell, the parent of every cell (all cells "
                  "together; each cell's own quota still applies)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{10000}))
      ->capture_default_str();
  cmd->add_option("--pids", opts->pids, "Process limit per cell")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 22));
  cmd->add_option("--cpu-millicores", opts->cpu_millicores, "CPU limit per cell (1000 = 1 CPU)")
      ->check(CLI::Range(uint32_t{10}, uint32_t{1} << 20));
  cmd->add_option("--idle-timeout", opts->idle_timeout_s,
                  "Seconds without calls before a session's cell is destroyed")
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 86400));
  cmd->add_option("--pause-idle-timeout", opts->pause_idle_timeout_s,
                  "Seconds without calls before a session's cell is paused (frozen; the next "
                  "call resumes it); 0: never. Shorter than the idle timeout")
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400));
  cmd->add_option("--max-lifetime", opts->max_lifetime_s, "Maximum session lifetime (seconds)")
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 86400));
  cmd->add_option("--default-timeout", opts->default_timeout_s, "Default exec timeout (s)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  cmd->add_option("--max-timeout", opts->max_timeout_s, "Largest timeout_s a call may ask for")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  cmd->add_option("--output-keep-bytes", opts->keep_bytes,
                  "Output kept in a tool result per stream (head and tail)")
      ->check(CLI::Range(size_t{256}, size_t{16} << 20));
  cmd->callback([opts, exit_code, cmd] {
    if (!TakeActivatedSocket(opts->run)) {
      *exit_code = 2;
      return;
    }
    auto cache = ParseSize(opts->package_cache_size);
    if (!cache || *cache < (64ull << 20)) {
      std::fprintf(stderr,
                   "mcpcell serve: --package-cache-size %s: expected a size of at least 64MiB "
                   "such as 512MiB or 4GiB\n",
                   opts->package_cache_size.c_str());
      *exit_code = 2;
      return;
    }
    opts->run.package_cache_bytes = *cache;
    if (!ResolveEffectivePolicy(*opts, *cmd) || !LoadTenants(*opts)) {
      *exit_code = 2;
      return;
    }
    *exit_code = serve::RunServe(opts->run);
  });
});

}  // namespace
}  // namespace mcpcell::cli
