#include "serve/serve.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "audit/trail.h"
#include "audit/trail_files.h"
#include "base/host_limits.h"
#include "base/stop_signals.h"
#include "mcp/http_server.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/stdio_transport.h"
#include "policies/compiler.h"
#include "sandbox/cell.h"
#include "sandbox/cell_session.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/linux/self_exe.h"
#include "sandbox/state_dir.h"
#include "serve/admin_api.h"
#include "serve/egress_registry.h"
#include "serve/metrics_wiring.h"
#include "serve/sandbox_handles.h"
#include "serve/sandbox_tools.h"
#include "serve/serve_audit.h"
#include "serve/serve_packages.h"
#include "serve/session_resume.h"
#include "serve/session_secrets.h"
#include "serve/session_state.h"
#include "serve/tenant_policies.h"
#include "serve/workspace_leases.h"
#include "tools/cell_tools.h"
#include "tools/client_log.h"
#include "tools/workspace_resources.h"

namespace mcpcell::serve {
namespace {

using tools::CellToolsConfig;
using tools::kEventEgressRefused;
using tools::kEventPackageRefused;
using tools::RegisterCellTools;
using tools::ServerToolFilter;
using tools::ServerToolListed;
using tools::SessionLogRouter;
using tools::ToolEnv;
using tools::ToolOffReason;

constexpr const char* kInstructions =
    "mcpcell runs code and commands for you inside an isolated Linux sandbox (a cell): its own "
    "namespaces, filesystem and resource limits, and no network except HTTP(S) through a "
    "proxy to the hosts its policy allows (session_info lists them; curl, pip, npm, git and "
    "Python use the proxy by themselves). One cell belongs to this session "
    "and keeps its files between calls (in /workspace, the working directory). Use run_code "
    "or run_command to execute, read_file/write_file/edit_file/list_files for files, and "
    "session_info to see limits and usage. Nothing you do there touches the host.";

// A refused start: the reason on stderr (the error's message is the whole line, its
// prefix included) and exit status 2.
int Refuse(const Error& error) {
  std::fprintf(stderr, "%s\n", error.message.c_str());
  return 2;
}

// ---- logging ----

Status StartLogging(const ServeOptions& opts) {
  if (std::string err = mcp::log::SetFile(opts.log_file); !err.empty()) {
    return Error::Msg(err).Wrap("mcpcell");
  }
  mcp::log::SetLevel(*mcp::ParseLogLevel(opts.log_level, /*allow_off=*/true));
  return Ok();
}

// Each live session holds fds (base/host_limits.h FdLimit): the soft limit goes up to the
// hard one. A failure only caps the sessions, so it is reported, not fatal.
void RaiseFdLimit() {
  Result<FdLimit> fds = RaiseFdLimitToHard();
  if (!fds) {
    mcp::log::Warn("open files limit not raised: " + fds.error().message);
  } else if (fds->soft != fds->soft_before) {
    mcp::log::Info("open files limit: " + std::to_string(fds->soft_before) + " -> " +
                   std::to_string(fds->soft) + " (the hard limit)");
  }
}

// ---- warm pool ----

// --warm-cells-max, or by default a tenth of the cells this host can hold (what `mcpcell
// doctor` prints) up to 128: ready cells cost an idle cell's memory, pids and fds each, and
// a tenth leaves the rest to live sessions. Never below the floor (a ceiling at the floor,
// 0 included, means no growth).
size_t WarmCellsCeiling(size_t floor, std::optional<size_t> given) {
  if (given) return std::max(*given, floor);
  constexpr uint64_t kDefaultMost = 128;
  const HostCapacity capacity = AssessHostCapacity(RealTextSource());
  const uint64_t ceiling = capacity.cells ? std::min(*capacity.cells / 10, kDefaultMost) : floor;
  return std::max<size_t>(ceiling, floor);
}

// ---- state dir ----

// Makes the state dir usable: created, reachable by the cells, orphans reaped, the
// template prepared. Returns the template's skeleton dir.
Result<std::string> PrepareStateDir(const std::string& state_dir) {
  if (Status s = sandbox::EnsureStateDir(state_dir); !s) return s.error();
  if (Status s = sandbox::CheckCellsCanReachStateDir(state_dir); !s) return s.error();
  // Advice, not a fault: shown at the default level so that a disk state dir is noticed.
  if (std::string note = sandbox::StateDirFilesystemNote(state_dir); !note.empty()) {
    mcp::log::Warn(note);
  }
  auto reaped = sandbox::ReapOrphans(state_dir);
  if (!reaped) return reaped.error().Wrap("reap orphaned cells");
  if (!reaped->empty()) {
    mcp::log::Warn("reaped " + std::to_string(reaped->size()) +
                   " cell(s) left by a previous server in " + state_dir);
  }
  return sandbox::PrepareHostTemplate(state_dir);
}

// ---- CPU placement ----

// The server's threads get a cgroup of their own, weighted above its cells, so a cell at
// its CPU quota does not make requests wait for a CPU; undone after the cells are gone
// (UnplaceServerCpu). nullopt when off or not possible (a warning says why).
std::optional<sandbox::ServerPlacement> PlaceServerCpu(const ServeOptions& opts) {
  if (opts.server_cpu_weight == 0) return std::nullopt;
  auto placed = sandbox::PlaceServerAboveCells({opts.server_cpu_weight, opts.cells_cpu_weight});
  if (!placed) {
    mcp::log::Warn(placed.error().message +
                   "; the server's requests compete for CPU with busy cells");
    return std::nullopt;
  }
  mcp::log::Info("cpu placement: " + placed->Describe());
  return std::move(*placed);
}

void UnplaceServerCpu(const std::optional<sandbox::ServerPlacement>& placement) {
  if (!placement) return;
  if (Status st = sandbox::UnplaceServer(*placement); !st) {
    mcp::log::Warn("undo cpu placement: " + st.error().message);
  }
}

// ---- audit trail ----

// The one audit trail in <state_dir>/audit (serve_audit.h), before everything that writes
// to it; refused when another server writes it.
Result<std::unique_ptr<ServeAudit>> OpenAudit(const ServeOptions& opts, const OpsEndpoints& ops) {
  return ServeAudit::Open({.state_dir = opts.state_dir,
                           .server_policy = &opts.effective,
                           .tenant_policies = &opts.tenant_policies,
                           .transport = opts.http.empty() ? "stdio" : "http",
                           .observer = MetricsObserver(ops.metrics)});
}

// ---- package service ----

// Started before the proxy (which routes to its port) when any policy enables packages;
// nullptr otherwise. Its refusals reach the egress registry through `relay`.
Result<std::unique_ptr<packages::PackageService>> StartPackageService(
    const ServeOptions& opts, const std::shared_ptr<RefusalRelay>& relay, ServeAudit& audit) {
  if (!AnyPackagesEnabled(opts.effective, opts.tenant_policies)) {
    return std::unique_ptr<packages::PackageService>();
  }
  auto started = StartServePackages({.state_dir = opts.state_dir,
                                     .cache_max_bytes = opts.package_cache_bytes,
                                     .ca_file = opts.package_ca_file,
                                     .server_policy = &opts.effective,
                                     .tenant_policies = &opts.tenant_policies,
                                     .relay = relay,
                                     .audit = audit.PackageSink()});
  if (!started) return started.error().Wrap("mcpcell serve");
  return std::move(*started);
}

// ---- egress proxy ----

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

// The egress proxy, with a route to the package service when there is one; refusals are
// logged to the session whose cell was refused. It outlives the cells: each cell is
// removed from it before it is destroyed. Attaches `relay` (detach before destroying it).
Result<std::unique_ptr<EgressRegistry>> StartEgressProxy(
    const ServeOptions& opts, const packages::PackageService* package_service,
    SessionLogRouter& client_log, RefusalRelay& relay, SessionSecrets& secrets, ServeAudit& audit) {
  auto egress_options = ServeEgressOptions(audit.EgressSink(), opts.egress_hosts);
  if (!egress_options) return egress_options.error().Wrap("mcpcell serve");
  if (!opts.egress_ca_file.empty() && ::access(opts.egress_ca_file.c_str(), R_OK) != 0)
    return Error::Sys("mcpcell serve: --egress-ca-file " + opts.egress_ca_file);
  egress_options->upstream_ca_file = opts.egress_ca_file;
  egress_options->on_secret = [&secrets, &audit](const egress::SecretEvent& e) {
    audit.SecretUsed(e);
    secrets.OnSecretEvent(e);
  };
  if (package_service) {
    egress_options->internal_routes.push_back(PackageServiceRoute(package_service->port()));
  }
  auto egress = std::make_unique<EgressRegistry>(std::move(*egress_options));
  egress->SetRefusalListener(
      [&client_log](const std::string& session_key, const std::string& line, RefusalSource source) {
        client_log.Warn(
            session_key,
            source == RefusalSource::kPackageService ? kEventPackageRefused : kEventEgressRefused,
            line);
      });
  relay.Attach(egress.get());
  if (Status st = SetEgressProfiles(*egress, opts); !st) {
    relay.Attach(nullptr);
    return st.error().Wrap("mcpcell serve");
  }
  return egress;
}

// ---- secrets ----

// Each profile's [[secrets]], granted to its sessions at bind. With placeholder secrets the
// proxy's TLS interception must work, and the CA bundle their cells mount is written
// before the first cell is made.
Status StartSecrets(const ServeOptions& o, EgressRegistry& egress, SessionSecrets& secrets) {
  bool placeholders = policies::HasPlaceholderSecrets(o.effective);
  secrets.SetProfile("", o.effective.secrets);
  for (const auto& [tenant, policy] : o.tenant_policies) {
    secrets.SetProfile(tenant, policy.secrets);
    placeholders = placeholders || policies::HasPlaceholderSecrets(policy);
  }
  egress.SetSecrets(&secrets);
  if (!placeholders) return Ok();
  if (Status st = egress.InterceptionReady(); !st)
    return st.error().Wrap("mcpcell serve: placeholder secrets need the proxy's TLS interception");
  if (Status st = WriteCaBundle(o.state_dir, egress.InterceptionCaPem()); !st)
    return st.error().Wrap("mcpcell serve: the CA bundle for cells");
  return Ok();
}

// ---- cells and warm pool ----

// One cell per MCP session, made lazily from the server's policy (tenants' profiles are
// added with the tools), --warm-cells of them kept ready per profile; each cell is bound
// to the egress proxy when it gets its session and unbound before it is destroyed.
std::unique_ptr<sandbox::CellSessionManager> MakeCells(const ServeOptions& opts,
                                                       const std::string& skeleton,
                                                       EgressRegistry& egress, ServeAudit& audit,
                                                       WorkspaceLeases& workspaces,
                                                       SessionState& state, SessionResume& resume,
                                                       SandboxHandles& sandboxes) {
  sandbox::CellSessionOptions session_options;
  const policies::Policy& policy = opts.effective;
  session_options.idle_timeout = policy.time.session_idle;
  session_options.max_lifetime = policy.time.session_max;
  session_options.pause_idle = policy.time.session_pause_idle;
  session_options.create.init_path = opts.init_path;
  session_options.warm_cells = opts.warm_cells;
  session_options.warm_cells_max = WarmCellsCeiling(opts.warm_cells, opts.warm_cells_max);
  // Half the cores make cells in the background at most: the calls keep the other half.
  session_options.warm_makers = std::max(1u, std::thread::hardware_concurrency() / 2);
  mcp::log::Info("warm pool: " + std::to_string(opts.warm_cells) + " ready cells per profile, " +
                 "up to " + std::to_string(session_options.warm_cells_max) + " with demand, " +
                 std::to_string(session_options.warm_makers) + " made at once");
  auto cells = std::make_unique<sandbox::CellSessionManager>(
      PolicySpecFactory(policy, opts.state_dir, skeleton, &workspaces), session_options);
  sandbox::CellHooks hooks;
  hooks.on_bound = [&egress, &audit, &workspaces](sandbox::CellInstance& cell,
                                                  const std::string& key,
                                                  const std::string& profile) {
    Status bound = egress.Bind(cell, key, profile);
    if (bound) audit.CellBound(cell, key, profile);
    if (bound) workspaces.NoteSession(cell.id(), key);
    return bound;
  };
  hooks.on_destroying = [&egress, &audit](sandbox::CellInstance& cell) {
    audit.CellDestroying(cell);
    egress.Unbind(cell);
  };
  hooks.on_destroyed = [&audit, &workspaces](const std::string& cell_id,
                                             const sandbox::DestroyReport& report) {
    audit.CellDestroyed(cell_id, report);
    workspaces.Release(cell_id);  // after the cell is gone: its files are at rest
  };
  hooks.on_not_made = [&workspaces, &audit](const std::string& cell_id) {
    workspaces.Release(cell_id);
    audit.CellNotMade(cell_id);
  };
  hooks.on_paused = [&audit, &egress](sandbox::CellInstance& cell, const std::string& key) {
    egress.SetPaused(cell, true);
    audit.SessionPaused(cell, key);
  };
  hooks.on_unpaused = [&audit, &egress](sandbox::CellInstance& cell, const std::string& key,
                                        std::chrono::milliseconds paused_for, bool resumed) {
    egress.SetPaused(cell, false);
    audit.SessionUnpaused(cell, key, paused_for, resumed);
  };
  // At idle expiry a session hibernates: its files become its next cell's base.
  // A sandbox handle's idle expiry ends the handle (below): nothing to keep.
  hooks.hibernate = [&state, &sandboxes](sandbox::CellInstance& cell, const std::string& key,
                                         const std::string& profile,
                                         const sandbox::SessionBase* base,
                                         bool frozen) -> Result<sandbox::SessionBase> {
    if (sandboxes.OwnsKey(key)) return Error::Msg("a sandbox handle ends when it is idle");
    return state.Hibernate(cell, key, profile, base, frozen);
  };
  hooks.on_base_released = [&state, &resume](const std::string& key, const std::string& profile,
                                             const sandbox::SessionBase& base) {
    resume.BaseReleased(key, base);  // its record goes with the files it names
    state.BaseReleased(key, profile, base);
  };
  cells->SetCellHooks(std::move(hooks));
  state.Attach(cells.get());
  resume.Attach(cells.get());
  // At its maximum lifetime a session's cell is gone and its later calls are refused: its
  // session.end is written then (the MCP session's own close later writes nothing).
  cells->SetExpiryListener([&audit, &resume, &sandboxes](const std::string& key,
                                                         sandbox::SessionExpiry kind,
                                                         const std::string& why) {
    if (sandboxes.Ended(key, why)) return;  // its end listener closes it and audits
    if (kind != sandbox::SessionExpiry::kMaxLifetime) return;
    audit.SessionEnded(key, "max lifetime");
    resume.Ended(key, "maximum lifetime");  // never resumable
  });
  return cells;
}

// ---- tools ----

// What the tools use: the cells, the proxy, the server's limits and each tenant's (whose
// cell profiles are installed here).
Result<ToolEnv> MakeToolEnv(const ServeOptions& opts, const std::string& skeleton,
                            sandbox::CellSessionManager& cells, EgressRegistry& egress,
                            ServeAudit& audit, WorkspaceLeases& workspaces) {
  ToolEnv env;
  env.cells = &cells;
  env.egress = &egress;
  env.audit = audit.trail();
  env.usage = audit.usage();
  env.config = ToolsConfigFromPolicy(opts.effective);
  if (Status st = InstallTenantProfiles(opts.tenant_policies, opts.state_dir, skeleton, cells, env,
                                        &workspaces);
      !st) {
    return st.error().Wrap("mcpcell serve: --http-config " + opts.http_config);
  }
  return env;
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
  instructions += SecretsInstructions(policy.secrets);
  return instructions;
}

// Sessions and tool calls into the audit trail. An HTTP session's end is written from the
// HTTP transport's close callback, which knows why it ended (HttpOptionsFor); a stdio
// session ends when its client closes stdin, or at shutdown.
void SetAuditHooks(mcp::ServerOptions& o, ServeAudit& audit, bool stdio) {
  o.on_session_started = [&audit](const mcp::Session& s) { return audit.SessionStarted(s); };
  if (stdio) {
    o.on_session_ended = [&audit](const mcp::Session& s) {
      audit.SessionEnded(s.id(), audit.shutting_down() ? "server shutdown" : "client closed");
    };
  }
  o.on_tool_call = [&audit](const mcp::Session& s, const std::string& tool, bool refused) {
    audit.ToolCall(s, tool, refused);
  };
}

// The MCP server's definition: each session sees its tenant's tools and is told about its
// tenant's mounts; tools/list leaves out the tools its policy turns off (a call by name
// gets their refusal).
mcp::ServerOptions McpServerOptions(const ServeOptions& opts, const ToolEnv& env, ServeAudit& audit,
                                    SessionResume& resume) {
  mcp::ServerOptions server_options;
  server_options.name = "mcpcell";
  server_options.title = "mcpcell sandbox";
  server_options.version = "0.1.0";
  server_options.instructions = Instructions(opts.effective);
  // sandbox_create/close for 2026-07-28 requests only (serve/sandbox_tools.h).
  server_options.tool_filter = SandboxToolFilter(env, ServerToolFilter(env));
  server_options.tool_listed = SandboxToolFilter(env, ServerToolListed(env));
  server_options.session_resources = tools::WorkspaceResources(env);  // the cell's files
  // 2026-07-28 requests name their cell by a sandbox handle (ToolEnv::resolve_sandbox).
  server_options.serve_2026_era = true;
  std::map<std::string, std::string> tenant_instructions;
  for (const auto& [name, tenant_policy] : opts.tenant_policies) {
    tenant_instructions[name] = Instructions(tenant_policy);
  }
  server_options.session_instructions =
      [tenant_instructions, fallback = Instructions(opts.effective)](const mcp::Session& session) {
        if (session.tenant().empty()) return fallback;
        auto it = tenant_instructions.find(session.tenant());
        return it == tenant_instructions.end() ? std::string(kInstructions) : it->second;
      };
  server_options.max_message_bytes = opts.max_message_bytes;
  SetAuditHooks(server_options, audit, /*stdio=*/opts.http.empty());
  resume.ConnectServer(server_options);
  return server_options;
}

// ---- transport ----

// The path a client should launch: this server's front (mcpcell), else the name alone.
std::string FrontPath() {
  Result<std::string> front = sandbox::SiblingExecutable("mcpcell");
  return front ? *front : std::string("mcpcell");
}

int ServeOverStdio(mcp::Server& server, const ServeOptions& opts, int stop_fd) {
  std::string self = FrontPath();
  std::fprintf(stderr,
               "mcpcell: serving MCP over stdio (policy %s, state dir %s); connect a client by "
               "launching `%s serve` as a stdio server (e.g. `claude mcp add mcpcell -- %s "
               "serve`)\n",
               opts.effective.name.c_str(), opts.state_dir.c_str(), self.c_str(), self.c_str());
  std::fflush(stderr);
  mcp::StdioOptions stdio;
  stdio.max_message_bytes = opts.max_message_bytes;
  stdio.stop_fd = stop_fd;
  return mcp::ServeStdio(server, stdio);
}

// The HTTP transport's options from --http [ADDR:]PORT (ADDR defaults to 127.0.0.1) and
// the HTTP config. A session that ends (DELETE, idle expiry, shutdown) has its cell
// destroyed.
Result<mcp::HttpOptions> HttpOptionsFor(const ServeOptions& opts,
                                        std::shared_ptr<const HttpConfig> config,
                                        SessionResume& resume, ServeAudit& audit) {
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
    return Error::Msg("mcpcell serve: --http " + opts.http +
                      ": expected [ADDR:]PORT, e.g. 8765 or 0.0.0.0:8765");
  }
  if (!mcp::IsLoopbackHost(http.host) && config->tenants.empty()) {
    return Error::Msg("mcpcell serve: refusing to serve on non-loopback address " + http.host +
                      " without tokens: give --http-config with at least one [[tenant]] (see "
                      "docs/http.md)");
  }
  http.port = static_cast<int>(n);
  http.listen_fd = opts.http_listen_fd;  // checked against host:port by the listener
  http.idle_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(opts.effective.time.session_idle);
  http.resume_grace = std::chrono::seconds(opts.resume_grace_s);
  http.default_tenant.max_body_bytes = opts.max_message_bytes;
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
  // An expired HTTP session hibernates (its id revives it); at shutdown every session does,
  // after the transport stopped (RunServe); any other end is final (docs/lifecycle.md).
  http.on_session_closed = [&resume, &audit](const std::string& id, const std::string& tenant,
                                             const std::string& reason) {
    const std::string why = HttpEndReason(reason);
    audit.SessionEnded(id, why);
    if (why == "server shutdown") return;
    if (why == "idle") return resume.ParkLater(id);
    resume.Ended(id, "HTTP session of tenant " + tenant + " ended: " + reason);
  };
  resume.ConnectHttp(http);
  return http;
}

void PrintHttpGuidance(const mcp::HttpServer& s, const ServeOptions& opts,
                       const HttpConfig& config) {
  std::string url = s.url();
  std::fprintf(stderr,
               "mcpcell: serving MCP over Streamable HTTP at %s (state dir %s%s)\n"
               "  Claude Code:     claude mcp add --transport http mcpcell %s\n"
               "  VS Code:         .vscode/mcp.json: {\"servers\": {\"mcpcell\": {\"type\": "
               "\"http\", \"url\": \"%s\"}}}\n"
               "  MCP Inspector:   npx @modelcontextprotocol/inspector  (transport "
               "\"Streamable HTTP\", URL %s)\n"
               "  stdio instead:   mcpcell serve --stdio\n",
               url.c_str(), opts.state_dir.c_str(),
               config.tenants.empty() ? ", no tokens: loopback only" : ", bearer tokens required",
               url.c_str(), url.c_str(), url.c_str());
  for (const auto& [name, policy] : opts.tenant_policies) {
    std::fprintf(stderr, "  tenant %s: policy %s\n", name.c_str(), policy.name.c_str());
  }
  std::fflush(stderr);
}

// Streamable HTTP at /mcp on --http.
int ServeOverHttp(mcp::Server& server, SessionResume& resume, const ServeOptions& opts, int stop_fd,
                  ServeAudit& audit, const OpsEndpoints& ops) {
  auto config = std::make_shared<HttpConfig>(opts.http_settings);
  // A tenant's HTTP session expires after its own policy's idle time.
  for (auto& [name, tenant] : config->tenants) {
    tenant.quotas.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        opts.tenant_policies.at(name).time.session_idle);
  }
  auto http = HttpOptionsFor(opts, config, resume, audit);
  if (!http) return Refuse(http.error());
  AddAdminApi(*http, config, audit::AuditDir(opts.state_dir), audit.trail(), ops.admin);
  AddOpsRoutes(*http, ops, config);
  return mcp::ServeHttp(
      server, std::move(*http), stop_fd,
      [&](mcp::HttpServer& s) {
        PrintHttpGuidance(s, opts, *config);
        ops.admin->AttachHttp(&s);  // an operator's end closes the HTTP session
      },
      [&] { ops.admin->AttachHttp(nullptr); });
}

// Serves stdio or HTTP until EOF, SIGTERM or SIGINT; the stop signals are handled only
// while the transport serves (their old dispositions are back for the shutdown).
int ServeUntilStopped(mcp::Server& server, SessionResume& resume, const ServeOptions& opts,
                      ServeAudit& audit, const OpsEndpoints& ops) {
  auto stop_signals = StopSignals::Install();
  if (!stop_signals) return Refuse(stop_signals.error().Wrap("mcpcell serve"));
  const int stop_fd = (*stop_signals)->fd();
  int rc = opts.http.empty() ? ServeOverStdio(server, opts, stop_fd)
                             : ServeOverHttp(server, resume, opts, stop_fd, audit, ops);
  // A stdio session still draining when stdin closed ends as the client's doing; one cut by
  // SIGTERM or SIGINT ends by the server's shutdown.
  pollfd stop{.fd = stop_fd, .events = POLLIN, .revents = 0};
  if (::poll(&stop, 1, 0) > 0) audit.ShuttingDown();
  return rc;
}

// The MCP server with the cell tools, serving until stopped; its handlers are done when
// this returns, before the cells go.
int ServeTools(const ServeOptions& opts, const ToolEnv& env, SessionLogRouter& client_log,
               SessionResume& resume, ServeAudit& audit, const OpsEndpoints& ops,
               SandboxHandles& sandboxes) {
  mcp::ServerOptions server_options = McpServerOptions(opts, env, audit, resume);
  ops.admin->ConnectServer(server_options);  // an operator's hold refuses the session's calls
  mcp::Server server(std::move(server_options));
  ops.admin->AttachServer(&server);  // the operator page's sessions, until it goes
  client_log.Attach(&server);
  SessionLogRouter::DetachGuard detach_client_log{client_log};
  if (mcp::Status st = RegisterCellTools(server, env); !st) {
    std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
    return 2;
  }
  if (mcp::Status st = RegisterSandboxTools(
          server, sandboxes, env, audit,
          SandboxLimitsFor(opts.effective, opts.tenant_policies, opts.http_settings));
      !st) {
    std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
    return 2;
  }
  if (mcp::Status st = server.AddResourceTemplate(tools::MakeWorkspaceResourceTemplate(env)); !st) {
    std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
    return 2;
  }
  int rc = ServeUntilStopped(server, resume, opts, audit, ops);
  ops.admin->AttachServer(nullptr);
  server.Shutdown();
  // Its sessions have ended: recorded now, before their cells are destroyed (the MCP
  // server may report a stdio session's close later, from its reader thread).
  audit.EndOpenSessions(audit.shutting_down() ? "server shutdown" : "client closed");
  return rc;
}

// The tools see the sessions' secrets (exec env, session_info), tool results, progress,
// saved outputs and client log lines show [secret NAME] instead of a value the session
// holds (tools/redaction.h), and a block_and_end_session refusal closes the session's cell.
// RunServe clears the end-session hook before the cells go.
void ConnectSecrets(ToolEnv& env, SessionLogRouter& client_log, SessionSecrets& secrets,
                    SessionResume& resume) {
  env.secrets = &secrets;
  const tools::SecretValuesFn secret_values = [&secrets](const std::string& session_key) {
    tools::SecretValues values;
    for (tools::SecretValue& v : secrets.Values(session_key)) {
      values.emplace_back(std::move(v.name), std::move(v.value));
    }
    return values;
  };
  env.secret_values = secret_values;
  client_log.SetSecretValues(secret_values);
  secrets.SetEndSession(
      [&resume](const std::string& key, const std::string& reason) { resume.Ended(key, reason); });
}

}  // namespace

int RunServe(const ServeOptions& opts) {
  if (Status st = StartLogging(opts); !st) return Refuse(st.error());
  RaiseFdLimit();
  auto skeleton = PrepareStateDir(opts.state_dir);
  if (!skeleton) return Refuse(skeleton.error().Wrap("mcpcell: state dir " + opts.state_dir));
  std::optional<sandbox::ServerPlacement> placement = PlaceServerCpu(opts);
  // Warnings to MCP sessions outside their requests (a refusal of their cell's proxy or of
  // the package service); outlives both, attached to the server while it exists.
  SessionLogRouter client_log;
  // /metrics, /healthz, /readyz: the metrics see every audit event from the start.
  OpsEndpoints ops;
  auto audit = OpenAudit(opts, ops);
  if (!audit) return Refuse(audit.error());
  // The package service's refusals reach the egress registry through the relay while the
  // registry exists.
  auto relay = std::make_shared<RefusalRelay>();
  auto package_service = StartPackageService(opts, relay, **audit);
  if (!package_service) return Refuse(package_service.error());
  // The sessions' secrets outlive the proxy and the cells (Unbind releases them).
  SessionSecrets secrets;
  auto egress =
      StartEgressProxy(opts, package_service->get(), client_log, *relay, secrets, **audit);
  if (!egress) return Refuse(egress.error());
  RefusalRelay::DetachGuard detach_relay{*relay};
  // The audit's samples read the proxy's byte counters; every cell (the only thing they are
  // read for) is destroyed before the proxy.
  (*audit)->SetEgressView(egress->get());
  if (Status st = StartSecrets(opts, **egress, secrets); !st) return Refuse(st.error());
  // The sessions' snapshots and hibernated files; outlives the cells (their hooks call it).
  SessionState state({.state_dir = opts.state_dir,
                      .server_policy = &opts.effective,
                      .tenant_policies = &opts.tenant_policies,
                      .audit = audit->get()});
  // Named workspaces: locked per live cell (outlives the cells), old ones removed hourly.
  WorkspaceLeases workspaces(opts.state_dir);
  WorkspaceJanitor janitor(
      workspaces.store(), RetentionByOwner(opts.effective, opts.tenant_policies),
      [&audit](const WorkspaceInfo& w) { (*audit)->WorkspaceRemoved(w, "retention"); });
  // Hibernated sessions: their records, revival, parking (outlives nothing it is given).
  SessionResume resume({.state_dir = opts.state_dir,
                        .transport = opts.http.empty() ? "stdio" : "http",
                        .server_policy = &opts.effective,
                        .tenant_policies = &opts.tenant_policies,
                        .state = &state});
  // 2026-07-28 sandbox handles: each ends its cell session (set once the cells exist).
  SandboxHandles sandboxes(
      {.server_id = opts.server_id,
       .tenants = SandboxLimitsFor(opts.effective, opts.tenant_policies, opts.http_settings),
       .now = nullptr});
  auto cells = MakeCells(opts, *skeleton, **egress, **audit, workspaces, state, resume, sandboxes);
  sandboxes.SetEndListener(EndSandboxSession(*cells, **audit));
  // Records checked (bad ones named, ended ones removed), a stdio --resume ID checked.
  if (Status st = resume.Start(opts.resume_session, !opts.http.empty()); !st)
    return Refuse(st.error());
  auto env = MakeToolEnv(opts, *skeleton, *cells, **egress, **audit, workspaces);
  if (!env) return Refuse(env.error());
  env->snapshots = &state;
  env->processes = &state.processes();  // the sessions' background processes
  ConnectSecrets(*env, client_log, secrets, resume);
  ConnectSandboxHandles(*env, sandboxes);
  ConnectOps(ops, opts, **audit, *cells, *env);
  ops.admin = std::make_shared<ServeAdminView>(ServeAdminViewOptions{
      cells.get(), audit->get(), &resume, &opts.effective, &opts.tenant_policies, opts.warm_cells});
  auto admin = StartAdminListener(opts, ops, **audit);
  if (!admin) return Refuse(admin.error());
  int rc = ServeTools(opts, *env, client_log, resume, **audit, ops, sandboxes);
  if (*admin) (*admin)->Stop();       // before the cells its routes read
  secrets.SetEndSession(nullptr);     // ConnectSecrets' hook holds the cells
  sandboxes.SetEndListener(nullptr);  // as does EndSandboxSession
  // Stopped (a signal): every session hibernates, kept for a restart. A stdio client that
  // closed its input ended its session: its files go.
  const bool stopped = (*audit)->shutting_down();
  if (stopped) {
    resume.ParkAll();
  } else {
    resume.EndAll("client closed");
  }
  cells->CloseAll(/*keep_bases=*/stopped);
  // `audit` (declared before the package service, the proxy and the cells) goes after
  // them, once their last events are written: it ends any open session and writes the
  // final checkpoint.
  UnplaceServerCpu(placement);
  return rc;
}

}  // namespace mcpcell::serve
