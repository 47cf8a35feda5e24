#include "sandbox/cell_session.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace mcpcell::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxEndedKeys = 4096;

std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

bool CellUsable(const std::shared_ptr<CellInstance>& cell) { return cell && cell->usable(); }

// `options` with its backend set: the namespace backend unless one was given.
CellSessionOptions WithBackend(CellSessionOptions options) {
  if (!options.backend) options.backend = std::make_shared<NamespaceBackend>(options.create);
  return options;
}

// The backend's report, or (a backend that does not report) one with only Destroy's
// Status: an error then leaves the whole cell in `left`, as nothing says what went.
DestroyReport ReportOf(const CellInstance& cell, const Status& destroyed) {
  if (std::optional<DestroyReport> report = cell.last_destroy_report()) return *report;
  DestroyReport report;
  report.result = destroyed;
  if (!destroyed) report.left.push_back({"cell", destroyed.error().message});
  return report;
}
}  // namespace

// ---- CellLease ----

CellLease::CellLease(CellSession* session, std::shared_ptr<CellInstance> cell, std::stop_token stop,
                     std::string replaced_reason, std::string lifetime_notice)
    : session_(session),
      cell_(std::move(cell)),
      stop_(std::move(stop)),
      replaced_reason_(std::move(replaced_reason)),
      lifetime_notice_(std::move(lifetime_notice)) {}

CellLease::CellLease(CellLease&& other) noexcept
    : session_(other.session_),
      cell_(std::move(other.cell_)),
      stop_(std::move(other.stop_)),
      replaced_reason_(std::move(other.replaced_reason_)),
      lifetime_notice_(std::move(other.lifetime_notice_)) {
  other.session_ = nullptr;
}

CellLease::~CellLease() {
  // Drop our reference first: if the cell was replaced meanwhile, the last reference
  // destroys it here, outside the session's lock.
  cell_.reset();
  if (session_) session_->Release();
}

const std::string& CellLease::id() const { return cell_->id(); }
const CellSpec& CellLease::spec() const { return cell_->spec(); }
bool CellLease::alive() const { return CellUsable(cell_); }
const std::vector<std::string>& CellLease::warnings() const { return cell_->warnings(); }
Result<CgroupUsage> CellLease::Usage() const { return cell_->Usage(); }

Result<ExecResult> CellLease::Exec(const ExecOptions& options) const {
  return cell_->Exec(options);
}
Status CellLease::SignalExec(uint64_t exec_id, int signo) const {
  return cell_->SignalExec(exec_id, signo);
}
Result<control::StatsReply> CellLease::Stats() const { return cell_->Stats(); }

Result<std::string> CellLease::ReadFile(const std::string& path, uint64_t max_bytes) const {
  return cell_->ReadFile(path, max_bytes);
}
Result<FileWindow> CellLease::ReadFileRange(const std::string& path, uint64_t offset,
                                            uint64_t max_bytes) const {
  return cell_->ReadFileRange(path, offset, max_bytes);
}
Status CellLease::WriteFile(const std::string& path, std::string_view data, uint32_t mode) const {
  return cell_->WriteFile(path, data, mode);
}
Status CellLease::WriteFileAt(const std::string& path, uint64_t offset, std::string_view data,
                              bool truncate, uint32_t mode) const {
  return cell_->WriteFileAt(path, offset, data, truncate, mode);
}
Status CellLease::AppendFile(const std::string& path, std::string_view data, uint32_t mode) const {
  return cell_->AppendFile(path, data, mode);
}
Status CellLease::WriteNewFile(const std::string& path, std::string_view data,
                               uint32_t mode) const {
  return cell_->WriteNewFile(path, data, mode);
}
Result<std::vector<control::DirEntry>> CellLease::ListDir(const std::string& path,
                                                          size_t max_entries) const {
  return cell_->ListDir(path, max_entries);
}
Result<control::FileStat> CellLease::Stat(const std::string& path, bool follow_symlinks) const {
  return cell_->Stat(path, follow_symlinks);
}
Status CellLease::Mkdir(const std::string& path, uint32_t mode, bool parents) const {
  return cell_->Mkdir(path, mode, parents);
}
Status CellLease::Remove(const std::string& path, bool recursive) const {
  return cell_->Remove(path, recursive);
}
Status CellLease::Rename(const std::string& from, const std::string& to, bool no_replace) const {
  return cell_->Rename(from, to, no_replace);
}

// ---- CellSession ----

CellSession::CellSession(std::string key, CellSpecFactory factory, CellSessionOptions options,
                         std::string profile, std::shared_ptr<const CellHooks> hooks,
                         std::shared_ptr<WarmPool> pool)
    : key_(std::move(key)),
      profile_(std::move(profile)),
      factory_(std::move(factory)),
      options_(WithBackend(std::move(options))),
      hooks_(std::move(hooks)),
      pool_(std::move(pool)),
      backend_(options_.backend),
      started_(Clock::now()),
      started_wall_(std::chrono::system_clock::now()),
      last_release_(Clock::now()) {}

CellSession::~CellSession() { (void)Close(); }

std::string CellSession::NextCellId() {
  // Random: ids name cgroups, which are per host, across servers and state dirs.
  return GenerateCellId();
}

Result<CellLease> CellSession::Acquire() {
  std::unique_lock lock(mu_);
  std::string replaced;
  for (;;) {
    if (closed_) return Error::Msg("the session has ended: " + closed_reason_);
    if (changing_) {
      released_.wait(lock);
      continue;
    }
    if (paused_ && cell_) {
      // Paused since it was idle: thaw first, transparently. A cell that does not thaw
      // cannot be trusted to run again: it is replaced, as a dead one is.
      if (Status resumed = ResumeLocked(lock); !resumed) {
        replaced = "the session's previous cell " + cell_->id() +
                   " could not be resumed from its pause (" + resumed.error().message +
                   "); this call runs in a fresh cell and files from before are gone";
        break;
      }
      continue;
    }
    if (CellUsable(cell_)) {
      ++leases_;
      ++calls_;
      return CellLease(this, cell_, stop_.get_token(), "", TakeLifetimeNoticeLocked());
    }
    break;
  }
  if (replaced.empty() && !cell_ && next_note_) {
    replaced = std::move(*next_note_);  // after a restart or a hibernation
  } else if (replaced.empty() && cell_) {
    replaced = "the session's previous cell " + cell_->id() +
               " had stopped (killed or out of memory); this call runs in a fresh cell and "
               "files from before are gone";
  } else if (replaced.empty() && cells_created_ > 0) {
    replaced = "the session's previous cell was destroyed after " + Seconds(options_.idle_timeout) +
               " idle; this call runs in a fresh cell and files from before are gone";
  }
  return ReplaceCellLocked(lock, std::move(replaced));
}

Result<CellLease> CellSession::ReplaceCellLocked(std::unique_lock<std::mutex>& lock,
                                                 std::string replaced) {
  std::shared_ptr<CellInstance> dead = std::move(cell_);  // destroyed below, outside the lock
  changing_ = true;
  next_note_.reset();
  hibernated_ = false;
  const std::vector<CellLayer> layers = base_ ? base_->layers : std::vector<CellLayer>{};
  std::string id = NextCellId();
  lock.unlock();
  if (dead) {
    (void)Retire(dead);  // kill, reap, rm -rf; never under mu_ (a lease may still hold it)
    dead.reset();
  }

  Result<std::unique_ptr<CellInstance>> created = MakeCell(id, layers);

  lock.lock();
  changing_ = false;
  released_.notify_all();
  if (!created) return created.error().Wrap("could not create the session's cell");
  std::shared_ptr<CellInstance> cell(std::move(created).value());
  if (closed_) {
    lock.unlock();
    (void)Retire(cell);
    return Error::Msg("the session has ended: " + closed_reason_);
  }
  cell_ = cell;
  ++cells_created_;
  ++leases_;
  ++calls_;
  return CellLease(this, std::move(cell), stop_.get_token(), std::move(replaced),
                   TakeLifetimeNoticeLocked());
}

std::string CellSession::TakeLifetimeNoticeLocked() {
  if (lifetime_noticed_) return "";
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      started_ + options_.max_lifetime - Clock::now());
  const std::chrono::milliseconds soon =
      std::max<std::chrono::milliseconds>(options_.max_lifetime / 10, std::chrono::minutes(5));
  if (left >= soon) return "";
  lifetime_noticed_ = true;
  return "this session ends in " + Seconds(std::max(left, std::chrono::milliseconds(0))) +
         ", at its maximum lifetime of " + Seconds(options_.max_lifetime) +
         " (time.session_max): its cell and files are destroyed then and later calls are "
         "refused; a new MCP session gets a new cell";
}

Result<std::unique_ptr<CellInstance>> CellSession::MakeCell(const std::string& id,
                                                            const std::vector<CellLayer>& layers) {
  // Over a snapshot: a parked pool cell finished with the layers (the pool's ready cells
  // have their filesystem already, without layers).
  std::unique_ptr<CellInstance> cell;
  if (pool_) cell = layers.empty() ? pool_->Take() : pool_->TakeOver(layers);
  if (!cell) {
    Result<CellSpec> spec = factory_(id);
    if (!spec) return spec.error().Wrap("cell spec");
    for (const CellLayer& layer : layers) {
      // A persistent workspace (a host dir) is the session's own: snapshots leave it be.
      if (layer.target == "/workspace" && !spec->workspace_host_dir.empty()) continue;
      spec->layers.push_back(layer);
    }
    Result<std::unique_ptr<CellInstance>> made = backend_->Create(*spec);
    if (!made && hooks_ && hooks_->on_not_made) hooks_->on_not_made(id);
    if (!made) return made.error();
    cell = std::move(made).value();
  }
  if (hooks_ && hooks_->on_bound) {
    if (Status s = hooks_->on_bound(*cell, key_, profile_); !s) {
      (void)cell->Destroy();
      if (hooks_->on_not_made) hooks_->on_not_made(cell->id());
      return s.error().Wrap("set up cell " + cell->id());
    }
  }
  return cell;
}

Status CellSession::Retire(const std::shared_ptr<CellInstance>& cell) {
  if (hooks_ && hooks_->on_destroying) hooks_->on_destroying(*cell);
  Status st = cell->Destroy();
  if (hooks_ && hooks_->on_destroyed) hooks_->on_destroyed(cell->id(), ReportOf(*cell, st));
  return st;
}

void CellSession::Release() {
  std::lock_guard lock(mu_);
  --leases_;
  last_release_ = Clock::now();
  released_.notify_all();
}

CellSession::TakenCell CellSession::StopLeasesAndTakeCellLocked(std::unique_lock<std::mutex>& lock,
                                                                bool wait_for_change) {
  stop_.request_stop();  // running programs of this session are killed
  released_.wait(lock, [&] { return leases_ == 0 && (!wait_for_change || !changing_); });
  TakenCell taken;
  taken.cell = std::move(cell_);
  taken.paused_for = DropPauseLocked();
  return taken;
}

Status CellSession::EndTakenCell(const TakenCell& taken, const std::optional<SessionBase>& released,
                                 const std::string& what) {
  Status st = Ok();
  if (taken.cell) {
    NotifyUnpaused(*taken.cell, taken.paused_for, false);
    st = Retire(taken.cell);
  }
  ReleaseBase(released);
  if (!st) return st.error().Wrap(what + " " + taken.cell->id());
  return Ok();
}

Status CellSession::Close(const std::string& reason, bool keep_base) {
  TakenCell taken;
  std::optional<SessionBase> released;
  {
    std::unique_lock lock(mu_);
    if (!closed_) {
      closed_ = true;
      closed_reason_ = reason;
    }
    taken = StopLeasesAndTakeCellLocked(lock, /*wait_for_change=*/true);
    // Forgotten either way, so that a later Close (the destructor's) releases nothing.
    released = std::exchange(base_, std::nullopt);
    if (keep_base) released.reset();
  }
  return EndTakenCell(taken, released, "destroy cell");
}

bool CellSession::Expired(Clock::time_point now, std::string* why, SessionExpiry* kind) const {
  std::lock_guard lock(mu_);
  if (closed_) return false;
  if (now - started_ >= options_.max_lifetime) {
    if (why) *why = "the session reached its maximum lifetime of " + Seconds(options_.max_lifetime);
    if (kind) *kind = SessionExpiry::kMaxLifetime;
    return true;
  }
  if (cell_ && leases_ == 0 && !changing_ && now - last_release_ >= options_.idle_timeout) {
    if (why) *why = "idle for " + Seconds(options_.idle_timeout);
    if (kind) *kind = SessionExpiry::kIdle;
    return true;
  }
  return false;
}

bool CellSession::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

CellSessionInfo CellSession::Info() const {
  std::lock_guard lock(mu_);
  CellSessionInfo info;
  info.session_key = key_;
  auto now = Clock::now();
  if (cell_) {
    info.cell_id = cell_->id();
    info.cell_alive = CellUsable(cell_);
    info.warnings = cell_->warnings();
  }
  info.cells_created = cells_created_;
  info.calls = calls_;
  info.active_leases = leases_;
  info.started_at = started_wall_;
  auto ms = [](Clock::duration d) {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(d));
  };
  info.lifetime_left = ms(started_ + options_.max_lifetime - now);
  info.paused = paused_;
  info.paused_total = ms(paused_total_ + (paused_ ? now - paused_since_ : Clock::duration(0)));
  if (base_) info.base_snapshot = base_->snapshot_id;
  info.hibernated = hibernated_ && !cell_ && base_ && base_->hibernation;
  info.idle_left =
      leases_ > 0 ? options_.idle_timeout : ms(last_release_ + options_.idle_timeout - now);
  return info;
}

// ---- CellSessionManager ----

CellSessionManager::CellSessionManager(CellSpecFactory factory, CellSessionOptions options)
    : factory_(std::move(factory)), options_(WithBackend(std::move(options))) {
  {
    std::lock_guard lock(mu_);
    (void)PoolLocked("", factory_);  // the default profile's cells start now
  }
  reaper_ = std::jthread([this](std::stop_token stop) { ReaperLoop(stop); });
}

CellSessionManager::~CellSessionManager() {
  reaper_.request_stop();
  wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  CloseAll();
}

std::shared_ptr<WarmPool> CellSessionManager::PoolLocked(const std::string& profile,
                                                         const CellSpecFactory& factory) {
  if (options_.warm_cells == 0 || stopped_pools_) return nullptr;
  auto it = pools_.find(profile);
  if (it != pools_.end()) return it->second;
  WarmPoolOptions pool_options;
  pool_options.floor = options_.warm_cells;
  pool_options.ceiling = options_.warm_cells_max;
  pool_options.parked = options_.warm_parked_cells;
  pool_options.makers = options_.warm_makers;
  auto pool = std::make_shared<WarmPool>(factory, options_.backend, std::move(pool_options));
  pools_.emplace(profile, pool);
  return pool;
}

void CellSessionManager::StopPools() {
  std::map<std::string, std::shared_ptr<WarmPool>> pools;
  {
    std::lock_guard lock(mu_);
    stopped_pools_ = true;
    pools.swap(pools_);
  }
  for (auto& [name, pool] : pools) pool->Stop();
}

void CellSessionManager::SetCellHooks(CellHooks hooks) {
  std::lock_guard lock(mu_);
  hooks_ = std::make_shared<const CellHooks>(std::move(hooks));
}

size_t CellSessionManager::warm_ready(const std::string& profile) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(profile);
  return it == pools_.end() ? 0 : it->second->ready();
}

size_t CellSessionManager::warm_parked(const std::string& profile) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(profile);
  return it == pools_.end() ? 0 : it->second->parked();
}

std::string CellSessionManager::warm_status(const std::string& profile) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(profile);
  return it == pools_.end() ? "" : it->second->status();
}

Status CellSessionManager::AddProfile(const std::string& name, CellSessionProfile profile) {
  if (name.empty()) return Error::Msg("a cell session profile needs a name");
  if (!profile.factory) return Error::Msg("cell session profile \"" + name + "\": no spec factory");
  std::lock_guard lock(mu_);
  if (!profiles_.emplace(name, std::move(profile)).second)
    return Error::Msg("cell session profile \"" + name + "\" is registered twice");
  return Ok();
}

std::shared_ptr<CellSession> CellSessionManager::Find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<CellSession>> CellSessionManager::Get(const std::string& key,
                                                             const std::string& profile) {
  std::lock_guard lock(mu_);
  if (auto it = ended_.find(key); it != ended_.end())
    return Error::Msg("the session has ended: " + it->second);
  if (auto it = sessions_.find(key); it != sessions_.end()) {
    if (it->second->profile() != profile) {
      return Error::Msg("session " + key + " belongs to profile \"" + it->second->profile() +
                        "\", not \"" + profile + "\"");
    }
    return it->second;
  }
  std::shared_ptr<CellSession> session;
  if (profile.empty()) {
    session = std::make_shared<CellSession>(key, factory_, options_, "", hooks_,
                                            PoolLocked("", factory_));
  } else {
    auto it = profiles_.find(profile);
    if (it == profiles_.end()) return Error::Msg("no cell session profile \"" + profile + "\"");
    CellSessionOptions options = options_;
    options.idle_timeout = it->second.idle_timeout;
    options.max_lifetime = it->second.max_lifetime;
    options.pause_idle = it->second.pause_idle;
    session = std::make_shared<CellSession>(key, it->second.factory, options, profile, hooks_,
                                            PoolLocked(profile, it->second.factory));
  }
  sessions_.emplace(key, session);
  return session;
}

Status CellSessionManager::Close(const std::string& key, const std::string& reason,
                                 bool keep_base) {
  std::shared_ptr<CellSession> session;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(key);
    if (it == sessions_.end()) return Ok();
    session = std::move(it->second);
    sessions_.erase(it);
    if (ended_.size() >= kMaxEndedKeys) {  // forget the oldest, not the smallest key
      ended_.erase(ended_order_.front());
      ended_order_.pop_front();
    }
    if (ended_.emplace(key, reason).second) ended_order_.push_back(key);
  }
  return session->Close(reason, keep_base);
}

void CellSessionManager::CloseAll(bool keep_bases) {
  std::map<std::string, std::shared_ptr<CellSession>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sessions_);
  }
  // At shutdown hibernated files are kept: they are what a restarted server would bring back.
  for (auto& [key, session] : all) (void)session->Close("the server is shutting down", keep_bases);
  StopPools();
}

bool CellSessionManager::BaseInUse(const std::string& snapshot_id) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, session] : sessions_) {
    std::optional<SessionBase> base = session->base();
    if (base && base->snapshot_id == snapshot_id) return true;
  }
  return false;
}

size_t CellSessionManager::live_sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void CellSessionManager::SetExpiryListener(ExpiryListener fn) {
  std::lock_guard lock(mu_);
  on_expired_ = std::move(fn);
}

void CellSessionManager::ReaperLoop(std::stop_token stop) {
  struct Expiry {
    std::shared_ptr<CellSession> session;
    SessionExpiry kind;
    std::string why;
  };
  std::mutex wait_mu;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(wait_mu);
      wake_.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
    }
    if (stop.stop_requested()) return;
    std::vector<Expiry> expired;
    std::vector<std::shared_ptr<CellSession>> to_pause;
    ExpiryListener listener;
    {
      std::lock_guard lock(mu_);
      auto now = Clock::now();
      for (auto& [key, session] : sessions_) {
        Expiry e{session, SessionExpiry::kIdle, ""};
        if (session->Expired(now, &e.why, &e.kind)) {
          expired.push_back(std::move(e));
        } else if (session->PauseDue(now)) {
          to_pause.push_back(session);
        }
      }
      listener = on_expired_;
    }
    // A cell that cannot be paused stays running (and is not tried again); its session
    // then only ends by idle expiry as before.
    for (auto& session : to_pause) (void)session->PauseIdleCell();
    for (auto& [session, kind, why] : expired) {
      if (kind == SessionExpiry::kMaxLifetime) {
        (void)Close(session->key(), why);
      } else {
        // Idle: the cell goes (its resources come back), the session stays; the next call
        // gets a fresh cell, over the hibernated files when they could be kept, and is told.
        (void)session->DestroyIdleCell();
      }
      if (listener) listener(session->key(), kind, why);
    }
  }
}

}  // namespace mcpcell::sandbox
