#include "serve/serve_audit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "audit/record.h"
#include "audit/trail_files.h"
#include "base/units.h"
#include "mcp/log.h"
#include "policies/compiler.h"
#include "serve/syslog_feed.h"
#include "tools/audit_events.h"

namespace mcpcell::serve {
namespace {

// The session's limits as session.start records them.
nlohmann::json LimitsFields(const policies::Policy& p) {
  return {{"memory_bytes", p.limits.memory_bytes},
          {"pids", p.limits.pids},
          {"cpu_millicores", p.limits.cpu_millicores},
          {"disk_bytes", p.limits.disk_bytes},
          {"tmp_bytes", p.limits.tmp_bytes},
          {"exec_max_s", p.time.exec_max.count()},
          {"session_idle_s", p.time.session_idle.count()},
          {"session_max_s", p.time.session_max.count()}};
}

// An egress proxy event (egress/proxy.h) as egress.connection's fields: the session and
// tenant move to the record's own keys, the proxy's time is the record's.
nlohmann::json EgressFields(const nlohmann::json& event) {
  nlohmann::json fields = event;
  for (const char* key : {"time", "session", "tenant"}) fields.erase(key);
  return fields;
}

std::string Str(const nlohmann::json& event, const char* key) {
  auto it = event.find(key);
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A server instance id: 8 random hex digits (the `server` of its records).
std::string RandomServerId() {
  uint32_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string ServerLockPath(const std::string& audit_dir, const std::string& server) {
  return audit_dir + "/servers/" + server + ".lock";
}

// <audit dir>/servers/<id>.lock, flock'ed for as long as this server runs: how a starting
// server tells a running server's open sessions from a crashed one's.
Result<UniqueFd> ClaimServerLock(const std::string& audit_dir, const std::string& server) {
  const std::string servers = audit_dir + "/servers";
  if (::mkdir(servers.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::Sys("mkdir(\"" + servers + "\")");
  const std::string path = ServerLockPath(audit_dir, server);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Error::Sys("open(\"" + path + "\")");
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return Error::Sys("flock(\"" + path + "\")");
  return fd;
}

}  // namespace

std::string HttpEndReason(const std::string& http_reason) {
  if (http_reason.rfind("idle", 0) == 0) return "idle";
  if (http_reason == "server stopping") return "server shutdown";
  return "client closed";
}

Result<std::unique_ptr<ServeAudit>> ServeAudit::Open(ServeAuditOptions options) {
  const policies::AuditPolicy& config = options.server_policy->audit;
  std::unique_ptr<ServeAudit> self(new ServeAudit(std::move(options)));
  if (!config.enabled) {
    mcp::log::Warn("audit: OFF ([audit] enabled = false in policy " +
                   self->options_.server_policy->name +
                   "): this server writes no audit trail (meant for benchmarks and "
                   "development machines)");
    self->usage_thread_ = std::thread([raw = self.get()] { raw->UsageLoop(); });
    return self;
  }
  audit::TrailOptions o;
  o.dir = audit::AuditDir(self->options_.state_dir);
  o.rotate_bytes = config.rotate_bytes;
  o.rotate_age = config.rotate_age;
  o.retention = config.retention;
  o.checkpoint_every = config.checkpoint_every;
  o.signing_key = config.signing_key;
  o.required = config.required;
  o.server = self->server_id_;
  auto trail = audit::Trail::Open(o);
  if (!trail)
    return trail.error().Wrap("mcpcell serve: audit trail of state dir " +
                              self->options_.state_dir);
  auto alive = ClaimServerLock(o.dir, self->server_id_);
  if (!alive) return alive.error().Wrap("mcpcell serve: audit");
  self->alive_lock_ = std::move(*alive);
  self->trail_ = std::move(*trail);
  if (!config.syslog.empty()) {
    auto sink = MakeSyslogFeed(config.syslog);
    if (!sink) return sink.error().Wrap("[audit] syslog");
    self->syslog_ = std::move(*sink);
    self->trail_->AddSink(self->syslog_->AsRecordSink());
  }
  self->Append("server.start", "", "", "",
               {{"pid", static_cast<int64_t>(::getpid())},
                {"transport", self->options_.transport},
                {"policy", self->options_.server_policy->name}});
  self->EndCrashedSessions();
  self->usage_thread_ = std::thread([raw = self.get()] { raw->UsageLoop(); });
  return self;
}

ServeAudit::ServeAudit(ServeAuditOptions options)
    : options_(std::move(options)), server_id_(RandomServerId()) {}

ServeAudit::~ServeAudit() { Close(); }

// A dead server's lock file is removed.
bool ServeAudit::ServerAlive(const std::string& audit_dir, const std::string& server) {
  if (server.empty() || server.find('/') != std::string::npos) return false;
  const std::string path = ServerLockPath(audit_dir, server);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return false;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  ::unlink(path.c_str());
  return false;
}

const policies::Policy& ServeAudit::PolicyOf(const std::string& tenant) const {
  if (!tenant.empty() && options_.tenant_policies) {
    auto it = options_.tenant_policies->find(tenant);
    if (it != options_.tenant_policies->end()) return it->second;
  }
  return *options_.server_policy;
}

void ServeAudit::Append(std::string_view type, const std::string& tenant,
                        const std::string& session, const std::string& cell,
                        const nlohmann::json& fields) {
  if (options_.observer) options_.observer(type, tenant, session, cell, fields);
  if (!trail_) return;  // [audit] enabled = false
  if (Status st = trail_->Append(type, tenant, session, cell, fields); !st) {
    mcp::log::Warn("audit: " + std::string(type) + " not recorded: " + st.error().message);
  }
}

egress::AuditSink ServeAudit::EgressSink() {
  return [this](const nlohmann::json& event) {
    Append("egress.connection", Str(event, "tenant"), Str(event, "session"), "",
           EgressFields(event));
  };
}

std::function<void(const nlohmann::json&)> ServeAudit::PackageSink() {
  return [this](const nlohmann::json& event) {
    nlohmann::json fields = event;
    fields.erase("session");
    fields.erase("tenant");
    Append("package." + Str(event, "result"), Str(event, "tenant"), Str(event, "session"), "",
           fields);
  };
}

void ServeAudit::SecretUsed(const egress::SecretEvent& event) {
  std::string tenant;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(event.session_id);
    if (it != sessions_.end()) tenant = it->second.tenant;
  }
  nlohmann::json fields = {{"secret", event.secret},
                           {"host", event.host},
                           {"surface", event.surface},
                           {"end_session", event.end_session}};
  if (!event.reason.empty()) fields["reason"] = event.reason;
  Append("secret." + event.decision, tenant, event.session_id, "", fields);
}

std::string ServeAudit::SessionStarted(const mcp::Session& session) {
  return SandboxStarted(session.id(), session.tenant(), session.client_info(), "");
}

std::string ServeAudit::SandboxStarted(const std::string& key, const std::string& tenant,
                                       const nlohmann::json& client_info, const std::string& era) {
  if (trail_ && !trail_->Healthy()) {
    return "mcpcell: the audit trail cannot be written (" + trail_->last_error() +
           ") and [audit] required = true: new sessions are refused until it can";
  }
  const policies::Policy& policy = PolicyOf(tenant);
  const mcp::Json client = client_info.is_object() ? client_info : mcp::Json::object();
  nlohmann::json fields = {
      {"client_name", client.value("name", "")},
      {"client_version", client.contains("version") && client["version"].is_string()
                             ? client["version"].get<std::string>()
                             : std::string()},
      {"transport", options_.transport},
      {"policy", policy.name},
      {"policy_sha256", audit::Sha256Hex(policies::DescribePolicy(policy))},
      {"template", policy.filesystem.template_name},
      {"limits", LimitsFields(policy)}};
  if (!era.empty()) fields["era"] = era;
  {
    std::lock_guard lock(mu_);
    sessions_[key] = {tenant, std::chrono::steady_clock::now()};
  }
  usage_.For(key);
  Append("session.start", tenant, key, "", fields);
  return "";
}

void ServeAudit::SetSessionEnding(
    std::function<void(const std::string& id, const std::string& why)> fn) {
  std::lock_guard lock(mu_);
  on_session_ending_ = std::move(fn);
}

void ServeAudit::SessionEnded(const std::string& session_id, const std::string& reason) {
  std::function<void(const std::string&, const std::string&)> ending;
  {
    std::lock_guard lock(mu_);
    ending = on_session_ending_;
  }
  if (ending) ending(session_id, reason);  // its records (exec.end) come first
  OpenSession ended;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return;
    ended = it->second;
    sessions_.erase(it);
    // The cell's last figures, if it is still there (HTTP destroys it after this).
    for (auto& [id, bound] : cells_) {
      if (bound.session == session_id) SampleCell(bound, *bound.cell);
    }
  }
  auto meter = usage_.Take(session_id);
  auto now = std::chrono::steady_clock::now();
  nlohmann::json fields = {
      {"reason", reason},
      {"duration_s", std::chrono::duration<double>(now - ended.started).count()}};
  if (meter) fields["usage"] = meter->Snapshot(now).ToJson();
  Append("session.end", ended.tenant, session_id, "", fields);
}

void ServeAudit::EndOpenSessions(const std::string& reason) {
  std::vector<std::string> open;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) open.push_back(id);
  }
  for (const std::string& id : open) SessionEnded(id, reason);
}

void ServeAudit::ToolCall(const mcp::Session& session, const std::string& tool, bool refused) {
  // A session already ended (at its maximum lifetime) has no meter: its usage was written.
  if (auto meter = usage_.Find(session.id())) meter->CountCall(tool);
  if (refused) {
    Append("policy.refused", session.tenant(), session.id(), "",
           {{"call", "tools/call " + tool},
            {"rule", "tools.enabled of policy " + PolicyOf(session.tenant()).name}});
  }
}

void ServeAudit::ShuttingDown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
}

bool ServeAudit::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

void ServeAudit::CellBound(sandbox::CellInstance& cell, const std::string& session_key,
                           const std::string& profile) {
  {
    std::lock_guard lock(mu_);
    cells_[cell.id()] = {&cell, session_key, profile};
  }
  Append("cell.create", profile, session_key, cell.id(),
         {{"profile", profile}, {"warnings", cell.warnings()}});
}

void ServeAudit::CellNotMade(const std::string& cell_id) {
  if (options_.observer)
    options_.observer("cell.failed", "", "", cell_id, nlohmann::json::object());
}

void ServeAudit::CellDestroying(sandbox::CellInstance& cell) {
  DestroyingCell destroying;
  destroying.fields = nlohmann::json::object();
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell.id());
    if (it == cells_.end()) return;
    destroying.bound = it->second;
    cells_.erase(it);
    SampleCell(destroying.bound, cell);
  }
  if (auto usage = cell.Usage()) {
    destroying.fields = {{"cpu_s", static_cast<double>(usage->cpu_usage_ns) / 1e9},
                         {"peak_memory_bytes", usage->memory_peak_bytes},
                         {"oom_kills", usage->oom_kill_count},
                         {"pids_left", usage->pids_current}};
  }
  std::lock_guard lock(mu_);
  destroying_[cell.id()] = std::move(destroying);
}

namespace {
// cell.destroy's `cleanup`: what the destruction removed, and each step that failed.
nlohmann::json CleanupFields(const sandbox::DestroyReport& report) {
  nlohmann::json left = nlohmann::json::array();
  for (const sandbox::DestroyReport::Left& l : report.left) {
    left.push_back({{"what", l.what}, {"why", l.why}});
  }
  return {{"processes_killed", report.processes_killed ? nlohmann::json(*report.processes_killed)
                                                       : nlohmann::json(nullptr)},
          {"namespaces", report.namespaces_gone},
          {"cgroup_removed", report.cgroup_removed},
          {"dirs_removed", report.dirs_removed},
          {"id_range_released", report.id_range_released},
          {"left", std::move(left)}};
}
}  // namespace

void ServeAudit::CellDestroyed(const std::string& cell_id, const sandbox::DestroyReport& report) {
  DestroyingCell destroyed;
  {
    std::lock_guard lock(mu_);
    auto it = destroying_.find(cell_id);
    if (it == destroying_.end()) return;
    destroyed = std::move(it->second);
    destroying_.erase(it);
  }
  destroyed.fields["cleanup"] = CleanupFields(report);
  destroyed.fields["result"] = report.result ? std::string("ok") : report.result.error().message;
  Append("cell.destroy", destroyed.bound.tenant, destroyed.bound.session, cell_id,
         destroyed.fields);
}

void ServeAudit::SetEgressView(const tools::CellEgressView* egress) {
  std::lock_guard lock(mu_);
  egress_ = egress;
}

// Called with mu_ held (the cell cannot be destroyed meanwhile). The proxy's counters are
// read here as well as after each call (tools::MeterCell): bytes moved after the session's
// last call (a background download, a connection closing late) would otherwise be missing
// from `usage` and session.end, and a replaced cell's last bytes lost. The registry's
// Report takes only its own and the proxy's leaf locks, never mu_.
void ServeAudit::SampleCell(const BoundCell& bound, sandbox::CellInstance& cell) {
  auto meter = usage_.Find(bound.session);
  if (!meter) return;
  auto usage = cell.Usage();
  if (!usage) return;
  tools::UsageSample sample{.at = std::chrono::steady_clock::now(),
                            .cell_id = cell.id(),
                            .cpu_ns = usage->cpu_usage_ns,
                            .memory_current_bytes = usage->memory_current_bytes,
                            .memory_peak_bytes = usage->memory_peak_bytes,
                            .storage_bytes = tools::WorkspaceBytes(cell.spec())};
  if (egress_) {
    if (auto report = egress_->Report(cell.id())) {
      sample.egress_up_bytes = report->bytes_up;
      sample.egress_down_bytes = report->bytes_down;
    }
  }
  meter->Sample(sample);
}

void ServeAudit::UsageLoop() {
  const auto interval = options_.server_policy->audit.usage_interval;
  std::unique_lock lock(mu_);
  while (!closed_) {
    if (wake_.wait_for(lock, interval, [this] { return closed_; })) break;
    for (auto& [id, bound] : cells_) SampleCell(bound, *bound.cell);
    lock.unlock();
    WriteUsageRecords();
    lock.lock();
  }
}

void ServeAudit::WriteUsageRecords() {
  std::map<std::string, OpenSession> open;
  {
    std::lock_guard lock(mu_);
    open = sessions_;
  }
  auto now = std::chrono::steady_clock::now();
  for (const auto& [id, session] : open) {
    auto meter = usage_.Find(id);
    if (!meter) continue;
    Append("usage", session.tenant, id, "", {{"usage", meter->Snapshot(now).ToJson()}});
  }
}

void ServeAudit::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    shutting_down_ = true;
  }
  wake_.notify_all();
  if (usage_thread_.joinable()) usage_thread_.join();
  EndOpenSessions("server shutdown");
  if (trail_) {
    Append("server.stop", "", "", "", nlohmann::json::object());
    if (Status st = trail_->Close(); !st) mcp::log::Warn("audit: close: " + st.error().message);
    ::unlink(ServerLockPath(audit::AuditDir(options_.state_dir), server_id_).c_str());
    alive_lock_.Reset();
  }
}

}  // namespace mcpcell::serve
