#include "serve/session_resume.h"

#include <utility>
#include <vector>

#include "audit/record.h"
#include "mcp/log.h"
#include "policies/compiler.h"
#include "serve/workspaces.h"

namespace mcpcell::serve {
namespace {

std::string Now() { return FormatUtc(WallClock::now()); }

// How long a request for a session being parked waits for the park.
constexpr auto kParkWait = std::chrono::minutes(2);

}  // namespace

SessionResume::SessionResume(SessionResumeOptions options)
    : options_(std::move(options)),
      records_(options_.state_dir + "/sessions"),
      server_id_(NewResumeId()) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

SessionResume::~SessionResume() { Stop(); }

const policies::Policy* SessionResume::PolicyOf(const std::string& tenant) const {
  if (tenant.empty()) return options_.server_policy;
  if (!options_.tenant_policies) return nullptr;
  auto it = options_.tenant_policies->find(tenant);
  return it == options_.tenant_policies->end() ? nullptr : &it->second;
}

void SessionResume::Drop(const SessionRecord& record, const std::string& why) {
  (void)options_.state->store().Delete(StoreTenant(record.tenant), record.snapshot_id);
  if (Status st = records_.Remove(record.resume_id); !st)
    mcp::log::Warn("session " + record.resume_id + ": " + st.error().message);
  mcp::log::Info("session " + record.resume_id + " will not be resumed: " + why);
}

std::string SessionResume::Unusable(const SessionRecord& record) {
  const policies::Policy* policy = PolicyOf(record.tenant);
  if (!policy) {
    return "its tenant \"" + record.tenant + "\" has no policy on this server (" +
           records_.PathOf(record.resume_id) + " is kept)";
  }
  auto created = ParseUtc(record.created);
  if (created && WallClock::now() > *created + policy->time.session_max) {
    Drop(record, "it started at " + record.created + ", longer ago than its session_max");
    return "it ended: it started longer ago than its session_max";
  }
  auto snapshot = options_.state->store().Get(StoreTenant(record.tenant), record.snapshot_id);
  if (!snapshot || snapshot->kind != sandbox::kSnapshotKindHibernation)
    return "its files (hibernation snapshot " + record.snapshot_id + ") are gone";
  return "";
}

void SessionResume::Sweep() {
  std::vector<std::string> warnings;
  std::vector<SessionRecord> records = records_.List(&warnings);
  for (const std::string& w : warnings) mcp::log::Warn(w);
  std::set<std::string> kept;
  for (const SessionRecord& r : records) {
    if (std::string why = Unusable(r); !why.empty()) {
      mcp::log::Warn("session record " + records_.PathOf(r.resume_id) + ": not resumable: " + why);
      continue;
    }
    kept.insert(r.snapshot_id);
  }
  // Hibernation snapshots no record names belong to sessions that ended while no server
  // could delete them (a crash): no one can resume them.
  std::vector<std::string> tenants = {""};
  if (options_.tenant_policies)
    for (const auto& [name, policy] : *options_.tenant_policies) tenants.push_back(name);
  for (const std::string& tenant : tenants) {
    auto all = options_.state->store().List(StoreTenant(tenant));
    if (!all) continue;
    for (const sandbox::SnapshotInfo& s : *all) {
      if (s.kind != sandbox::kSnapshotKindHibernation || kept.count(s.id)) continue;
      if (Status st = options_.state->store().Delete(StoreTenant(tenant), s.id); st)
        mcp::log::Info("deleted hibernation snapshot " + s.id + ": no session record names it");
    }
  }
}

Status SessionResume::Start(const std::string& resume_id, bool http) {
  options_.state->SetHibernationListener(
      [this](const std::string& key, const std::string& tenant,
             const sandbox::SnapshotInfo& snapshot) { Hibernated(key, tenant, snapshot); });
  options_.state->SetResumeFacts([this](const std::string& key) { return Facts(key); });
  Sweep();
  if (resume_id.empty()) return Ok();
  if (http) {
    return Error::Msg(
        "mcpcell serve: --resume is for stdio; an HTTP client resumes its "
        "session by sending its Mcp-Session-Id");
  }
  return PrepareStdio(resume_id);
}

Status SessionResume::PrepareStdio(const std::string& resume_id) {
  const std::string how = "; `mcpcell session list --state-dir " + options_.state_dir +
                          "` lists the hibernated sessions";
  auto record = records_.Read(resume_id);
  if (!record)
    return Error::Msg("mcpcell serve: --resume " + resume_id + ": " + record.error().message + how);
  // Another tenant's session is not this server's own: the same answer as an unknown id.
  if (!record->tenant.empty())
    return Error::Msg("mcpcell serve: --resume " + resume_id + ": no hibernated session \"" +
                      resume_id + "\" of this server's own sessions" + how);
  if (std::string why = Unusable(*record); !why.empty())
    return Error::Msg("mcpcell serve: --resume " + resume_id + ": " + why + how);
  std::lock_guard lock(mu_);
  stdio_resume_ = std::move(*record);
  return Ok();
}

void SessionResume::Started(const mcp::Session& session) {
  Live live{.resume_id = "",
            .tenant = session.tenant(),
            .protocol_version = session.protocol_version(),
            .client_info = session.client_info(),
            .client_capabilities = session.client_capabilities(),
            .created = Now(),
            .last_used = Now(),
            .recorded_snapshot = "",
            .hibernated_at = ""};
  std::optional<SessionRecord> resumed;
  {
    std::lock_guard lock(mu_);
    if (options_.transport == "stdio") {
      resumed = std::exchange(stdio_resume_, std::nullopt);
      live.resume_id = resumed ? resumed->resume_id : NewResumeId();
      if (resumed) {
        live.created = resumed->created;
        live.recorded_snapshot = resumed->snapshot_id;
        live.hibernated_at = resumed->hibernated_at;
      }
    }
    live_[session.id()] = std::move(live);
  }
  if (resumed) Attach(session.id(), *resumed);
}

void SessionResume::Opened(const std::string& http_id, const mcp::Session& session) {
  std::optional<SessionRecord> revived;
  {
    std::lock_guard lock(mu_);
    Live& live = live_[session.id()];
    live.resume_id = http_id;
    if (auto it = pending_.find(http_id); it != pending_.end()) {
      revived = std::move(it->second);
      pending_.erase(it);
      live.created = revived->created;
      live.recorded_snapshot = revived->snapshot_id;
      live.hibernated_at = revived->hibernated_at;
    }
  }
  if (revived) Attach(session.id(), *revived);
}

void SessionResume::Attach(const std::string& key, const SessionRecord& record) {
  const std::string why = record.server_id == server_id_ ? "its connection's session expired"
                                                         : "the server restarted since";
  const std::string note = "the session hibernated at " + record.hibernated_at + " and " + why +
                           ": its programs were stopped, its files kept";
  if (Status st = options_.state->ResumeOver(key, record.tenant, record.snapshot_id, note); !st)
    mcp::log::Warn("session " + record.resume_id +
                   ": its files could not be brought back: " + st.error().message);
}

std::optional<mcp::HttpOptions::RevivedSession> SessionResume::Revive(const std::string& http_id,
                                                                      const std::string& tenant) {
  if (!IsResumeId(http_id)) return std::nullopt;
  {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, kParkWait, [&] { return !parking_.count(http_id); }))
      return std::nullopt;  // still being parked: not resumable yet
  }
  auto record = records_.Read(http_id);
  if (!record) {
    if (record.error().message.rfind("no hibernated session", 0) != 0)
      mcp::log::Warn(record.error().message);
    return std::nullopt;
  }
  if (record->tenant != tenant) return std::nullopt;  // another tenant's: as unknown
  if (std::string why = Unusable(*record); !why.empty()) {
    mcp::log::Warn("session " + http_id + " not resumed: " + why);
    return std::nullopt;
  }
  mcp::HttpOptions::RevivedSession revived{.protocol_version = record->protocol_version,
                                           .client_info = record->client_info,
                                           .client_capabilities = record->client_capabilities};
  std::lock_guard lock(mu_);
  pending_[http_id] = std::move(*record);
  return revived;
}

void SessionResume::Touch(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = live_.find(key); it != live_.end()) it->second.last_used = Now();
}

void SessionResume::Hibernated(const std::string& key, const std::string& tenant,
                               const sandbox::SnapshotInfo& snapshot) {
  std::lock_guard lock(mu_);  // one writer per record
  auto it = live_.find(key);
  if (it == live_.end() || it->second.resume_id.empty()) return;
  Live& live = it->second;
  const policies::Policy* policy = PolicyOf(tenant);
  SessionRecord record{
      .resume_id = live.resume_id,
      .transport = options_.transport,
      .tenant = tenant,
      .snapshot_id = snapshot.id,
      .policy_name = policy ? policy->name : "",
      .policy_sha256 = policy ? audit::Sha256Hex(policies::DescribePolicy(*policy)) : "",
      .protocol_version = live.protocol_version,
      .client_info = live.client_info,
      .client_capabilities = live.client_capabilities,
      .created = live.created,
      .last_used = live.last_used,
      .hibernated_at = Now(),
      .server_id = server_id_};
  if (Status st = records_.Write(record); !st) {
    mcp::log::Warn("session " + live.resume_id +
                   ": its record was not written (it will not "
                   "survive a restart): " +
                   st.error().message);
    return;
  }
  live.recorded_snapshot = snapshot.id;
  live.hibernated_at = record.hibernated_at;
}

void SessionResume::BaseReleased(const std::string& key, const sandbox::SessionBase& base) {
  if (!base.hibernation) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(key);
  if (it == live_.end() || it->second.recorded_snapshot != base.snapshot_id) return;
  if (Status st = records_.Remove(it->second.resume_id); !st)
    mcp::log::Warn("session " + it->second.resume_id + ": " + st.error().message);
  it->second.recorded_snapshot.clear();
}

void SessionResume::Park(const std::string& key, std::chrono::steady_clock::time_point deadline) {
  std::optional<Live> live;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(key); it != live_.end()) live = it->second;
  }
  if (!live) {
    (void)cells_->Close(key, "the session ended");
    return;
  }
  if (std::chrono::steady_clock::now() < deadline) {
    auto kept = options_.state->Park(key, live->tenant);
    if (!kept) {
      mcp::log::Warn("session " + live->resume_id + ": files not kept: " + kept.error().message);
    }
  } else {
    mcp::log::Warn("session " + live->resume_id +
                   ": not hibernated (the shutdown's time for "
                   "hibernation is spent); only the files of its last hibernation are kept");
  }
  // Its base (the hibernated files) stays for a revival; an unrecorded one is swept at start.
  (void)cells_->Close(key, "the session hibernated", /*keep_base=*/true);
  std::lock_guard lock(mu_);
  live_.erase(key);
}

void SessionResume::ParkLater(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(key);
    if (stopping_ && it != live_.end()) return;  // ParkAll parks it
    if (it != live_.end()) {
      parking_.insert(it->second.resume_id);
      queue_.push_back(key);
      changed_.notify_all();
      return;
    }
  }
  (void)cells_->Close(key, "the session ended");  // never started: nothing to keep
}

void SessionResume::EndAll(const std::string& reason) {
  Stop();
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, live] : live_) keys.push_back(key);
  }
  for (const std::string& key : keys) Ended(key, reason);
}

void SessionResume::ConnectServer(mcp::ServerOptions& server) {
  server.on_session_started = [this, audit = std::move(server.on_session_started)](
                                  const mcp::Session& session) -> std::string {
    if (audit)
      if (std::string refused = audit(session); !refused.empty()) return refused;
    Started(session);
    return "";
  };
  server.on_tool_call = [this, audit = std::move(server.on_tool_call)](
                            const mcp::Session& session, const std::string& tool, bool refused) {
    if (audit) audit(session, tool, refused);
    Touch(session.id());
  };
}

void SessionResume::ConnectHttp(mcp::HttpOptions& http) {
  http.revive_session = [this](const std::string& id, const std::string& tenant) {
    return Revive(id, tenant);
  };
  http.on_session_opened = [this](const std::string& id, const mcp::Session& session) {
    Opened(id, session);
  };
}

void SessionResume::WorkerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;  // the rest is parked by ParkAll
    const std::string key = queue_.front();
    queue_.pop_front();
    const std::string id = live_.count(key) ? live_[key].resume_id : "";
    lock.unlock();
    Park(key, std::chrono::steady_clock::time_point::max());
    lock.lock();
    parking_.erase(id);
    changed_.notify_all();
  }
}

void SessionResume::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void SessionResume::ParkAll() {
  Stop();
  const auto deadline = std::chrono::steady_clock::now() + options_.shutdown_budget;
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, live] : live_) keys.push_back(key);
    queue_.clear();
  }
  for (const std::string& key : keys) Park(key, deadline);
  std::lock_guard lock(mu_);
  parking_.clear();
  changed_.notify_all();
}

void SessionResume::Ended(const std::string& key, const std::string& reason) {
  std::string resume_id;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(key); it != live_.end()) {
      resume_id = it->second.resume_id;
      live_.erase(it);
    }
  }
  if (Status st = records_.Remove(resume_id); !st)
    mcp::log::Warn("session " + resume_id + ": " + st.error().message);
  (void)cells_->Close(key, reason);  // its base (hibernated files) is released
}

std::optional<ResumeFacts> SessionResume::Facts(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(key);
  if (it == live_.end()) return std::nullopt;
  return ResumeFacts{.resume_id = it->second.resume_id,
                     .transport = options_.transport,
                     .recorded = !it->second.recorded_snapshot.empty(),
                     .hibernated_at = it->second.hibernated_at};
}

}  // namespace mcpcell::serve
