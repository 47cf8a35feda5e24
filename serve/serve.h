// serve::RunServe: what `mcpcell serve` does once its flags are parsed and its policies
// resolved (cli/cmd_serve.cc). One MCP server, every tool call in the client's own cell.
//
// Steps, in order (serve.cc reads as this list): logging → state dir (made, orphans of a
// crashed predecessor reaped, template prepared) → the server's CPU placement above its
// cells → the audit trail (<state>/audit, one writer; serve/serve_audit.h) → the package
// service when a policy enables packages (serve/serve_packages.h) → the egress proxy
// (audit sink, --egress-hosts, each profile's allowlist, the route to the package
// service) → cells (one per MCP session, lazily; one profile per tenant; each cell added
// to the proxy when bound, removed before it is destroyed; the warm pool of --warm-cells)
// → the tools, each session seeing its tenant's → the transport (stdio or HTTP; one line
// on stderr saying how to connect) until EOF, SIGTERM or SIGINT → shutdown: handlers done,
// every live session hibernated for a restart (SIGTERM/SIGINT; serve/session_resume.h) or
// ended (a stdio client closed its input), every cell destroyed, then the proxy stopped,
// then the package service, then the trail closed (open sessions ended, final checkpoint).
// Before the transport: the hibernated sessions' records checked, `--resume ID` (stdio)
// checked.
// stdout carries MCP messages only; guidance and logs go to stderr (or --log-file).
// Threading: RunServe runs on the main thread and returns when the server has stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "policies/policy.h"
#include "sandbox/linux/cgroup.h"
#include "serve/http_config.h"

namespace mcpcell::serve {

// What RunServe needs, resolved: the policies composed and checked, sizes parsed.
struct ServeOptions {
  std::string log_level = "warning";
  std::string log_file;
  size_t max_message_bytes = 16 * 1024 * 1024;
  std::string state_dir;
  std::string init_path;
  std::string http;          // --http [ADDR:]PORT; empty = stdio
  int http_listen_fd = -1;   // the --http socket systemd passed (socket_activation.h); -1 = bind
  std::string http_config;   // --http-config FILE, named in messages
  std::string admin;         // --admin [ADDR:]PORT: operators' listener; empty = none
  std::string egress_hosts;  // --egress-hosts FILE (hosts(5)): the proxy's pinned names
  HttpConfig http_settings;  // loaded from http_config
  std::map<std::string, policies::Policy> tenant_policies;  // by tenant, resolved
  policies::Policy effective;  // the server's policy, --policy with the flags composed in
  // Cells kept ready per policy profile (the warm pool) so a session's first call does not
  // wait for one.
  size_t warm_cells = 1;
  // The most ready cells a pool grows to when bursts drain it (sandbox/warm_pool.h);
  // unset: WarmCellsCeiling's default for this host. At or below warm_cells (0 included):
  // no growth, the pool stays at warm_cells.
  std::optional<size_t> warm_cells_max;
  // CPU weights of the server's own cgroup and of its cells' parent (sandbox/linux/cgroup.h
  // PlaceServerAboveCells); server weight 0 leaves the server where it was started.
  uint32_t server_cpu_weight = sandbox::CpuWeights{}.server;
  uint32_t cells_cpu_weight = sandbox::CpuWeights{}.cells;
  // How long a dropped POST stream may be resumed before its calls are cancelled.
  int64_t resume_grace_s = 10;
  uint64_t package_cache_bytes = 4ull << 30;
  std::string package_ca_file;
  // --egress-ca-file: extra CAs the egress proxy trusts for intercepted upstreams (secrets).
  std::string egress_ca_file;
  // --resume ID (stdio): the hibernated session whose files the session starts over.
  std::string resume_session;
  // --server-id ID: carried in every sandbox handle this server mints (2026-07-28 era;
  // serve/sandbox_handles.h), so a router sends it back here; "" = none.
  std::string server_id;
};

// Serves until EOF (stdio), SIGTERM or SIGINT; returns the process exit status (2 when
// the start is refused, with the reason on stderr).
int RunServe(const ServeOptions& opts);

}  // namespace mcpcell::serve
