// `mcpcell serve`: the MCP server over stdio, every tool call in the client's own cell.
//
// Steps: policy (--policy + flags) and, over HTTP, every tenant's policy resolved (a bad
// one refuses the start) → logging → state dir (made, orphans of a crashed predecessor
// reaped, template prepared) → the package service when a policy enables packages
// (serve/serve_packages.h) → the egress proxy (audit file, --egress-hosts, each profile's
// allowlist, the route to the package service) → cell sessions (one cell per MCP
// session, lazily; one profile per tenant; each cell added to the proxy when bound,
// removed before it is destroyed) → mcp::Server with the sandbox tools, each session
// seeing its tenant's → one line on stderr saying how to connect → serve stdin/stdout or
// HTTP until EOF or SIGTERM → every cell destroyed, then the proxy stopped, then the
// package service. stdout carries MCP messages only; guidance and logs go to stderr (or
// --log-file).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "mcp/http_server.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/stdio_transport.h"
#include "policies/compiler.h"
#include "policies/loader.h"
#include "policies/units.h"
#include "sandbox/cell.h"
#include "sandbox/cell_session.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/linux/self_exe.h"
#include "sandbox/state_dir.h"
#include "tools/cell_tools.h"
#include "tools/client_log.h"
#include "cli/command.h"
#include "serve/egress_registry.h"
#include "serve/http_config.h"
#include "serve/serve_packages.h"
#include "serve/stop_signals.h"
#include "serve/tenant_policies.h"

namespace mcpcell::cli {
namespace {

using serve::AnyPackagesEnabled;
using serve::EgressRegistry;
using serve::HttpConfig;
using serve::InstallTenantProfiles;
using serve::LoadHttpConfig;
using serve::PackageServiceRoute;
using serve::PolicySpecFactory;
using serve::RefusalRelay;
using serve::RefusalSource;
using serve::ResolveTenantPolicies;
using serve::ServeEgressOptions;
using serve::StartServePackages;
using serve::ToolsConfigFromPolicy;
using tools::CellToolsConfig;
using tools::RegisterCellTools;
using tools::ServerToolFilter;
using tools::ServerToolListed;
using tools::SessionLogRouter;
using tools::ToolEnv;
using tools::ToolOffReason;
using tools::kEventEgressRefused;
using tools::kEventPackageRefused;


constexpr const char* kInstructions =
    "mcpcell runs code and commands for you inside an isolated Linux sandbox (a cell): its own "
    "namespaces, filesystem and resource limits, and no network except HTTP(S) through a "
    "proxy to the hosts its policy allows (session_info lists them; curl, pip, npm, git and "
    "Python use the proxy by themselves). One cell belongs to this session "
    "and keeps its files between calls (in /workspace, the working directory). Use run_code "
    "or run_command to execute, read_file/write_file/edit_file/list_files for files, and "
    "session_info to see limits and usage. Nothing you do there touches the host.";

struct ServeOptions {
  std::string log_level = "warning";
  std::string log_file;
  size_t max_message_bytes = 16 * 1024 * 1024;
  std::string state_dir;
  std::string init_path;
  std::string http;          // --http [ADDR:]PORT; empty = stdio
  std::string http_config;   // --http-config FILE (tokens, tenants, quotas, TLS)
  std::string egress_hosts;  // --egress-hosts FILE (hosts(5)): the proxy's pinned names
  HttpConfig http_settings;  // loaded from http_config before RunServe
  std::map<std::string, policies::Policy> tenant_policies;  // by tenant, resolved
  bool stdio = false;                                       // --stdio (the default, explicit)
  // The policy (shipped name or .toml file); the flags below compose into it.
  std::string policy = "default";
  policies::PolicyOverrides overrides;
  policies::Policy effective;  // resolved and composed before RunServe
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
  uint64_t pids = 0;
  uint32_t cpu_millicores = 0;
  int64_t idle_timeout_s = 0;
  int64_t max_lifetime_s = 0;
  int64_t default_timeout_s = 0;
  int64_t max_timeout_s = 0;
  size_t keep_bytes = 0;
  // Cells kept ready per policy profile so a session's first call does not wait for one.
  size_t warm_cells = 1;
  // CPU weights of the server's own cgroup and of its cells' parent (sandbox/linux/cgroup.h
  // PlaceServerAboveCells); server weight 0 leaves the server where it was started.
  uint32_t server_cpu_weight = sandbox::CpuWeights{}.server;
  uint32_t cells_cpu_weight = sandbox::CpuWeights{}.cells;
  // --http-resume-grace: how long a dropped POST stream may be resumed before its calls
  // are cancelled.
  int64_t resume_grace_s = 10;
  std::string package_cache_size = "4GiB";  // --package-cache-size
  uint64_t package_cache_bytes = 4ull << 30;
  std::string package_ca_file;  // --package-ca-file
};

// The path a client should launch: this server's front (mcpcell), else the name alone.
std::string FrontPath() {
  Result<std::string> front = sandbox::SiblingExecutable("mcpcell");
  return front ? *front : std::string("mcpcell");
}

// Makes the state dir usable: created, reachable by the cells, orphans reaped, the
// template prepared. Returns the template's skeleton dir.
Result<std::string> PrepareStateDir(const std::string& state_dir) {
  if (Status s = sandbox::EnsureStateDir(state_dir); !s) return s.error();
  if (Status s = sandbox::CheckCellsCanReachStateDir(state_dir); !s) return s.error();
  auto reaped = sandbox::ReapOrphans(state_dir);
  if (!reaped) return reaped.error().Wrap("reap orphaned cells");
  if (!reaped->empty()) {
    mcp::log::Warn("reaped " + std::to_string(reaped->size()) +
                   " cell(s) left by a previous server in " + state_dir);
  }
  return sandbox::PrepareHostTemplate(state_dir);
}

// The profile named by --policy with the per-limit, --mount, --output and --workspace
// flags composed into it (flags win). Prints the error and returns false on failure.
bool ResolveEffectivePolicy(ServeOptions& o, CLI::App& cmd) {
  policies::PolicyOverrides& ov = o.overrides;
  if (cmd.count("--memory-mib")) ov.memory_bytes = o.memory_mib << 20;
  if (cmd.count("--disk-mib")) ov.disk_bytes = o.disk_mib << 20;
  if (cmd.count("--pids")) ov.pids = o.pids;
  if (cmd.count("--cpu-millicores")) ov.cpu_millicores = o.cpu_millicores;
  if (cmd.count("--idle-timeout")) ov.session_idle = std::chrono::seconds(o.idle_timeout_s);
  if (cmd.count("--max-lifetime")) ov.session_max = std::chrono::seconds(o.max_lifetime_s);
  if (cmd.count("--default-timeout")) ov.exec_default = std::chrono::seconds(o.default_timeout_s);
  if (cmd.count("--max-timeout")) ov.exec_max = std::chrono::seconds(o.max_timeout_s);
  if (cmd.count("--output-keep-bytes")) ov.output_keep_bytes = o.keep_bytes;
  auto base = policies::ResolvePolicy(o.policy, {o.state_dir});
  if (!base) {
    std::fprintf(stderr, "mcpcell serve: --policy %s: %s\n", o.policy.c_str(),
                 base.error().message.c_str());
    return false;
  }
  auto composed = policies::ApplyOverrides(std::move(*base), ov, o.state_dir);
  if (!composed) {
    std::fprintf(stderr, "mcpcell serve: %s\n", composed.error().message.c_str());
    return false;
  }
  o.effective = std::move(*composed);
  return true;
}

// The HTTP config and every tenant's policy (serve/tenant_policies.h). Prints the error,
// naming the tenant and its policy, and returns false on failure.
bool LoadTenants(ServeOptions& o) {
  if (o.http_config.empty()) return true;
  std::string error;
  auto loaded = LoadHttpConfig(o.http_config, error);
  if (!loaded) {
    std::fprintf(stderr, "mcpcell serve: --http-config %s\n", error.c_str());
    return false;
  }
  o.http_settings = std::move(*loaded);
  auto tenants = ResolveTenantPolicies(o.http_settings, o.effective, o.state_dir);
  if (!tenants) {
    std::fprintf(stderr, "mcpcell serve: --http-config %s: %s\n", o.http_config.c_str(),
                 tenants.error().message.c_str());
    return false;
  }
  o.tenant_policies = std::move(*tenants);
  return true;
}

// What the egress proxy enforces for each cell profile: the server's policy ("") and each
// tenant's (the tenant's profile has its name).
Status SetEgressProfiles(EgressRegistry& egress, const ServeOptions& o) {
  auto own = policies::CompileCellEgress(o.effective);
  if (!own) return own.error();
  egress.SetProfile("", std::move(*own));
  for (const auto& [tenant, policy] : o.tenant_policies) {
    auto cell = policies::CompileCellEgress(policy);
    if (!cell) return cell.error().Wrap("tenant \"" + tenant + "\"");
    egress.SetProfile(tenant, std::move(*cell));
  }
  return Ok();
}

// What initialize tells the model: the tools, and the host directories its policy mounts.
std::string Instructions(const policies::Policy& policy) {
  std::string instructions = kInstructions;
  // Only the package tools the session is offered (ServerToolListed).
  const CellToolsConfig tools = ToolsConfigFromPolicy(policy);
  std::string install;
  if (!ToolOffReason(tools, "pip_install")) install = "pip_install (Python, into /workspace/.venv)";
  if (!ToolOffReason(tools, "npm_install"))
    install += (install.empty() ? "" : " and ") +
               std::string("npm_install (into /workspace/node_modules)");
  if (!install.empty()) {
    instructions += " Install packages with " + install +
                    ": the policy's package rules are checked first, and later calls see what "
                    "was installed.";
  }
  for (const policies::MountPolicy& m : policy.filesystem.mounts) {
    instructions += " The host directory " + m.source + " is at " + m.target +
                    (m.writable ? " (writable" : " (read-only") +
                    (m.target == policies::kOutputCellPath
                         ? "; files you write there are delivered to the user)."
                         : ").");
  }
  return instructions;
}

// Streamable HTTP at /mcp on --http [ADDR:]PORT (ADDR defaults to 127.0.0.1). A session
// that ends (DELETE, idle expiry, shutdown) has its cell destroyed.
int ServeOverHttp(mcp::Server& server, sandbox::CellSessionManager& cells, const ServeOptions& opts,
                  std::chrono::milliseconds idle, int stop_fd) {
  mcp::HttpOptions http;
  std::string port = opts.http;
  if (size_t colon = port.rfind(':'); colon != std::string::npos) {
    http.host = port.substr(0, colon);
    if (http.host.size() > 2 && http.host.front() == '[')
      http.host = http.host.substr(1, http.host.size() - 2);
    port = port.substr(colon + 1);
  }
  char* end = nullptr;
  long n = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (n < 0 || n > 65535 || *end != '\0' || http.host.empty()) {
    std::fprintf(stderr,
                 "mcpcell serve: --http %s: expected [ADDR:]PORT, e.g. 8765 or 0.0.0.0:8765\n",
                 opts.http.c_str());
    return 2;
  }
  http.port = static_cast<int>(n);
  http.idle_timeout = idle;
  http.resume_grace = std::chrono::seconds(opts.resume_grace_s);
  http.default_tenant.max_body_bytes = opts.max_message_bytes;
  auto config = std::make_shared<HttpConfig>(opts.http_settings);
  // A tenant's HTTP session expires after its own policy's idle time.
  for (auto& [name, tenant] : config->tenants) {
    tenant.quotas.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        opts.tenant_policies.at(name).time.session_idle);
  }
  if (!mcp::IsLoopbackHost(http.host) && config->tenants.empty()) {
    std::fprintf(stderr,
                 "mcpcell serve: refusing to serve on non-loopback address %s without tokens: "
                 "give --http-config with at least one [[tenant]] (see docs/http.md)\n",
                 http.host.c_str());
    return 2;
  }
  http.allowed_hosts = config->allowed_hosts;
  http.allowed_origins = config->allowed_origins;
  http.tls_cert_file = config->tls_cert;
  http.tls_key_file = config->tls_key;
  if (!config->tenants.empty()) {
    http.authenticate = [config](const std::string& token) -> std::optional<mcp::HttpTenant> {
      auto tenant = config->Authenticate(token);
      if (!tenant) return std::nullopt;
      return tenant->quotas;
    };
  }
  http.on_session_closed = [&cells](const std::string& id, const std::string& tenant,
                                    const std::string& reason) {
    (void)cells.Close(id, "HTTP session of tenant " + tenant + " ended: " + reason);
  };
  return mcp::ServeHttp(server, http, stop_fd, [&](const mcp::HttpServer& s) {
    std::string url = s.url();
    std::fprintf(
        stderr,
        "mcpcell: serving MCP over Streamable HTTP at %s (state dir %s%s)\n"
        "  Claude Code:     claude mcp add --transport http mcpcell %s\n"
        "  VS Code:         .vscode/mcp.json: {\"servers\": {\"mcpcell\": {\"type\": "
        "\"http\", \"url\": \"%s\"}}}\n"
        "  MCP Inspector:   npx @modelcontextprotocol/inspector  (transport "
        "\"Streamable HTTP\", URL %s)\n"
        "  stdio instead:   mcpcell serve --stdio\n",
        url.c_str(), opts.state_dir.c_str(),
        config->tenants.empty() ? ", no tokens: loopback only" : ", bearer tokens required",
        url.c_str(), url.c_str(), url.c_str());
    for (const auto& [name, policy] : opts.tenant_policies) {
      std::fprintf(stderr, "  tenant %s: policy %s\n", name.c_str(), policy.name.c_str());
    }
    std::fflush(stderr);
  });
}

int RunServe(const ServeOptions& opts) {
  if (std::string err = mcp::log::SetFile(opts.log_file); !err.empty()) {
    std::fprintf(stderr, "mcpcell: %s\n", err.c_str());
    return 2;
  }
  mcp::log::SetLevel(*mcp::ParseLogLevel(opts.log_level, /*allow_off=*/true));
  auto skeleton = PrepareStateDir(opts.state_dir);
  if (!skeleton) {
    std::fprintf(stderr, "mcpcell: state dir %s: %s\n", opts.state_dir.c_str(),
                 skeleton.error().message.c_str());
    return 2;
  }

  // The server's threads get a cgroup of their own, weighted above its cells, so a cell at
  // its CPU quota does not make requests wait for a CPU; undone after the cells are gone.
  std::optional<sandbox::ServerPlacement> placement;
  if (opts.server_cpu_weight != 0) {
    auto placed = sandbox::PlaceServerAboveCells({opts.server_cpu_weight, opts.cells_cpu_weight});
    if (placed) {
      placement = std::move(*placed);
      mcp::log::Info("cpu placement: " + placement->Describe());
    } else {
      mcp::log::Warn(placed.error().message +
                     "; the server's requests compete for CPU with busy cells");
    }
  }

  // Warnings to MCP sessions outside their requests (a refusal of their cell's proxy or of
  // the package service); outlives both, attached to the server while it exists.
  SessionLogRouter client_log;

  // The package service starts before the proxy (which routes to its port) and outlives
  // it; its refusals reach the registry through the relay while the registry exists.
  auto relay = std::make_shared<RefusalRelay>();
  std::unique_ptr<packages::PackageService> package_service;
  if (AnyPackagesEnabled(opts.effective, opts.tenant_policies)) {
    auto started = StartServePackages({.state_dir = opts.state_dir,
                                       .cache_max_bytes = opts.package_cache_bytes,
                                       .ca_file = opts.package_ca_file,
                                       .server_policy = &opts.effective,
                                       .tenant_policies = &opts.tenant_policies,
                                       .relay = relay});
    if (!started) {
      std::fprintf(stderr, "mcpcell serve: %s\n", started.error().message.c_str());
      return 2;
    }
    package_service = std::move(*started);
  }

  // The egress proxy outlives the cells: each cell is removed from it before it is destroyed.
  auto egress_options = ServeEgressOptions(opts.state_dir, opts.egress_hosts);
  if (!egress_options) {
    std::fprintf(stderr, "mcpcell serve: %s\n", egress_options.error().message.c_str());
    return 2;
  }
  if (package_service) {
    egress_options->internal_routes.push_back(PackageServiceRoute(package_service->port()));
  }
  EgressRegistry egress(std::move(*egress_options));
  egress.SetRefusalListener(
      [&client_log](const std::string& session_key, const std::string& line, RefusalSource source) {
        client_log.Warn(
            session_key,
            source == RefusalSource::kPackageService ? kEventPackageRefused : kEventEgressRefused,
            line);
      });
  relay->Attach(&egress);
  RefusalRelay::DetachGuard detach_relay{*relay};
  if (Status st = SetEgressProfiles(egress, opts); !st) {
    std::fprintf(stderr, "mcpcell serve: %s\n", st.error().message.c_str());
    return 2;
  }

  sandbox::CellSessionOptions session_options;
  const policies::Policy& policy = opts.effective;
  session_options.idle_timeout = policy.time.session_idle;
  session_options.max_lifetime = policy.time.session_max;
  session_options.create.init_path = opts.init_path;
  session_options.warm_cells = opts.warm_cells;
  sandbox::CellSessionManager cells(PolicySpecFactory(policy, opts.state_dir, *skeleton),
                                    session_options);

  sandbox::CellHooks hooks;
  hooks.on_bound = [&egress](sandbox::Cell& cell, const std::string& key,
                             const std::string& profile) {
    return egress.Bind(cell, key, profile);
  };
  hooks.on_destroying = [&egress](sandbox::Cell& cell) { egress.Unbind(cell); };
  cells.SetCellHooks(std::move(hooks));

  ToolEnv env;
  env.cells = &cells;
  env.egress = &egress;
  env.config = ToolsConfigFromPolicy(policy);
  if (Status st =
          InstallTenantProfiles(opts.tenant_policies, opts.state_dir, *skeleton, cells, env);
      !st) {
    std::fprintf(stderr, "mcpcell serve: --http-config %s: %s\n", opts.http_config.c_str(),
                 st.error().message.c_str());
    return 2;
  }

  mcp::ServerOptions server_options;
  server_options.name = "mcpcell";
  server_options.title = "mcpcell sandbox";
  server_options.version = "0.1.0";
  server_options.instructions = Instructions(policy);
  // Each session sees its tenant's tools and is told about its tenant's mounts; tools/list
  // leaves out the tools its policy turns off (a call by name gets their refusal).
  server_options.tool_filter = ServerToolFilter(env);
  server_options.tool_listed = ServerToolListed(env);
  std::map<std::string, std::string> tenant_instructions;
  for (const auto& [name, tenant_policy] : opts.tenant_policies) {
    tenant_instructions[name] = Instructions(tenant_policy);
  }
  server_options.session_instructions =
      [tenant_instructions, fallback = Instructions(policy)](const mcp::Session& session) {
        if (session.tenant().empty()) return fallback;
        auto it = tenant_instructions.find(session.tenant());
        return it == tenant_instructions.end() ? std::string(kInstructions) : it->second;
      };
  server_options.max_message_bytes = opts.max_message_bytes;
  int rc = 0;
  {
    mcp::Server server(server_options);
    client_log.Attach(&server);
    SessionLogRouter::DetachGuard detach_client_log{client_log};
    if (mcp::Status st = RegisterCellTools(server, env); !st) {
      std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
      return 2;
    }
    std::string self = FrontPath();
    // SIGTERM and SIGINT stop the transport while it serves (and only then).
    auto stop_signals = serve::StopSignals::Install();
    if (!stop_signals) {
      std::fprintf(stderr, "mcpcell serve: %s\n", stop_signals.error().message.c_str());
      return 2;
    }
    if (!opts.http.empty()) {
      rc = ServeOverHttp(
          server, cells, opts,
          std::chrono::duration_cast<std::chrono::milliseconds>(session_options.idle_timeout),
          (*stop_signals)->fd());
    } else {
      std::fprintf(stderr,
                   "mcpcell: serving MCP over stdio (policy %s, state dir %s); connect a client by "
                   "launching `%s serve` as a stdio server (e.g. `claude mcp add mcpcell -- %s "
                   "serve`)\n",
                   policy.name.c_str(), opts.state_dir.c_str(), self.c_str(), self.c_str());
      std::fflush(stderr);
      mcp::StdioOptions stdio;
      stdio.max_message_bytes = opts.max_message_bytes;
      stdio.stop_fd = (*stop_signals)->fd();
      rc = mcp::ServeStdio(server, stdio);
    }
    stop_signals->reset();  // the old dispositions back before the shutdown
    server.Shutdown();  // handlers done before the cells go
  }
  cells.CloseAll();
  if (placement) {
    if (Status st = sandbox::UnplaceServer(*placement); !st) {
      mcp::log::Warn("undo cpu placement: " + st.error().message);
    }
  }
  return rc;
}

const bool kRegistered = RegisterCommand("serve", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<ServeOptions>();
  opts->state_dir = sandbox::DefaultStateDir();
  CLI::App* cmd = parent.add_subcommand("serve", kServeSummary);
  cmd->add_option("--log-level", opts->log_level,
                  "Diagnostics on stderr: debug, info, notice, warning, error, critical, "
                  "alert, emergency or off")
      ->check(CLI::IsMember(
          {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "off"}))
      ->capture_default_str();
  cmd->add_option("--log-file", opts->log_file, "Append diagnostics to this file, not stderr");
  auto* http_opt = cmd->add_option(
      "--http", opts->http,
      "Serve Streamable HTTP at http://[ADDR:]PORT/mcp (ADDR defaults to 127.0.0.1) instead of "
      "stdio");
  cmd->add_flag("--stdio", opts->stdio, "Serve over stdin/stdout (the default; for Claude Desktop)")
      ->excludes(http_opt);
  cmd->add_option("--http-resume-grace", opts->resume_grace_s,
                  "Seconds a client whose connection dropped mid-call has to resume its stream "
                  "(Last-Event-ID) before the call is cancelled and its command killed")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str()
      ->needs(http_opt);
  cmd->add_option("--http-config", opts->http_config,
                  "HTTP config (TOML): bearer-token hashes -> tenants, quotas, allowed "
                  "hosts/origins, TLS")
      ->needs(http_opt);
  cmd->add_option("--max-message-bytes", opts->max_message_bytes,
                  "Largest accepted incoming message; longer lines are refused")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 31))
      ->capture_default_str();
  cmd->add_option("--state-dir", opts->state_dir, "Where cells and the template live")
      ->capture_default_str();
  cmd->add_option("--egress-hosts", opts->egress_hosts,
                  "hosts(5) file the egress proxy consults before DNS (pin registries' "
                  "addresses); its addresses pass the same checks as DNS answers")
      ->check(CLI::ExistingFile);
  cmd->add_option("--package-cache-size", opts->package_cache_size,
                  "Size of the package cache in <state dir>/packages (shared by every session; "
                  "least recently used artifacts evicted beyond it), e.g. 4GiB")
      ->capture_default_str();
  cmd->add_option("--package-ca-file", opts->package_ca_file,
                  "Extra CA certificates (PEM) the package service trusts for its upstream "
                  "registries, e.g. a company mirror's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--init", opts->init_path, "Path of mcpcell-init (default: next to mcpcell)");
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
  cmd->add_option("--warm-cells", opts->warm_cells,
                  "Cells made ahead of need per policy profile, so a session's first call "
                  "does not wait for one (0: make each on demand; off by itself for a "
                  "persistent workspace)")
      ->check(CLI::Range(size_t{0}, size_t{16}));
  cmd->add_option("--server-cpu-weight", opts->server_cpu_weight,
                  "CPU weight (cgroup v2 cpu.weight units) of the cgroup the server moves "
                  "into, <own cgroup>/mcpcell-server, so busy cells do not delay requests; 0 "
                  "leaves the server where it started")
      ->check(CLI::Range(uint32_t{0}, uint32_t{10000}))
      ->capture_default_str();
  cmd->add_option("--cells-cpu-weight", opts->cells_cpu_weight,
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
    auto cache = policies::ParseSize(opts->package_cache_size);
    if (!cache || *cache < (64ull << 20)) {
      std::fprintf(stderr,
                   "mcpcell serve: --package-cache-size %s: expected a size of at least 64MiB "
                   "such as 512MiB or 4GiB\n",
                   opts->package_cache_size.c_str());
      *exit_code = 2;
      return;
    }
    opts->package_cache_bytes = *cache;
    if (!ResolveEffectivePolicy(*opts, *cmd) || !LoadTenants(*opts)) {
      *exit_code = 2;
      return;
    }
    *exit_code = RunServe(*opts);
  });
});

}  // namespace
}  // namespace mcpcell::cli
