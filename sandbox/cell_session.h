// CellSession: the one cell of one client session, and CellSessionManager: all of them.
//
// A CellSession creates its cell lazily, on the first Acquire (the first tool call), keeps
// it across calls so files and state persist, and destroys it when the session closes,
// after an idle timeout, or at a maximum lifetime. A cell that died (init OOM-killed,
// killed from the host) is noticed on the next Acquire: that call gets a fresh cell and
// is told so; it never hangs on a dead channel.
//
// Leases: every call holds a CellLease while it uses the cell. Idle time runs only while
// no lease is held; expiry (idle or lifetime) and Close wait for leases to end, after
// asking them to stop through the lease's stop token (running programs are killed).
//
// Pause: after `pause_idle` without a lease (shorter than the idle timeout) the reaper
// freezes the cell (CellInstance::Freeze): its processes keep their memory and stop using
// CPU. The next Acquire thaws it first; if that fails the cell is replaced and the call
// told so, as for a dead cell. Idle expiry and Close work on a paused cell (Destroy kills
// frozen cells). A cell that cannot be paused (no cgroup) is left running and not tried
// again. docs/lifecycle.md tells the states; cell_session_pause.cc holds this part.
//
// Base: a session may run over a snapshot (restore, fork, hibernation: SessionBase): every
// new cell of the session is then made with the snapshot's layers as its lowers: a parked
// cell of the warm pool finished over them (WarmPool::TakeOver), else a cell made now. RestartOver
// ends the cell and sets the base; at idle expiry the hibernate hook may keep the cell's files as
// the base instead of losing them (cell_session_state.cc holds this part).
//
// Threading: every method is thread-safe. The manager runs one reaper thread that checks
// idle and lifetime deadlines once a second; cells are destroyed on that thread or on the
// thread calling Close, never while a lease is held. Knows nothing of MCP.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "sandbox/backend.h"
#include "sandbox/cell.h"
#include "sandbox/cell_spec.h"
#include "sandbox/warm_pool.h"

namespace mcpcell::sandbox {

struct CellSessionOptions {
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds max_lifetime{std::chrono::hours(4)};
  // Unleased time before the cell is paused; 0 (or not shorter than idle_timeout): never.
  std::chrono::milliseconds pause_idle{0};
  // The namespace backend's options, used when `backend` is null.
  CellCreateOptions create;
  // What makes the cells (sandbox/backend.h); null: NamespaceBackend(create).
  std::shared_ptr<const CellBackend> backend;
  // Cells kept ready per profile (sandbox/warm_pool.h), so a session's first call does not
  // wait for one to be made. The default profile's pool starts filling when the manager is
  // made, a named profile's at its first session. 0: every cell is made on demand.
  size_t warm_cells = 0;
  // The most ready cells a profile's pool grows to with demand (WarmPoolOptions::ceiling;
  // not above warm_cells: fixed), and the cells it makes at once.
  size_t warm_cells_max = 0;
  size_t warm_makers = 1;
  // Parked cells kept besides them (with warm_cells > 0, where the backend parks cells), for
  // sessions over a snapshot (restore, fork, hibernation), which ready cells cannot serve.
  size_t warm_parked_cells = 1;
};

// The snapshot a session's cells are made over (CellSession::RestartOver, hibernation).
struct SessionBase {
  std::string snapshot_id;
  std::vector<CellLayer> layers;  // added to every new cell's spec
  bool hibernation = false;       // the session's own hidden hibernation snapshot
};

// What the server does with every cell of a session besides running calls in it (the
// egress proxy is attached here). Both run outside the session's lock.
struct CellHooks {
  // A cell was bound to session `key` (made with `profile`, "" = the manager's own), fresh
  // or from the warm pool, before any call uses it. An error fails that Acquire and the
  // cell is destroyed.
  std::function<Status(CellInstance&, const std::string& key, const std::string& profile)> on_bound;
  // A cell that on_bound accepted is about to be destroyed (session closed, idle expiry,
  // replaced after it died, server shutdown).
  std::function<void(CellInstance&)> on_destroying;
  // That cell's destruction: what it did and what it left and why (DestroyReport; its
  // `result` is what CellInstance::Destroy returned). Always after its on_destroying, on
  // the same thread.
  std::function<void(const std::string& cell_id, const DestroyReport& report)> on_destroyed;
  // The factory made cell `cell_id`'s spec but the cell was not made, or on_bound refused it
  // (what the factory took for it, such as a workspace lock, is to be let go).
  std::function<void(const std::string& cell_id)> on_not_made;
  // Session `key`'s cell was paused (frozen), on the reaper thread.
  std::function<void(CellInstance&, const std::string& key)> on_paused;
  // Its pause ended after `paused_for`: `resumed` true when a call thawed it (on that
  // call's thread, before the call runs), false when the cell is about to be destroyed
  // or replaced while paused (before its on_destroying).
  std::function<void(CellInstance&, const std::string& key, std::chrono::milliseconds paused_for,
                     bool resumed)>
      on_unpaused;
  // Session `key`'s idle cell is about to be destroyed at idle expiry: keep its files as the
  // base of the session's next cell (hibernation). Called on the reaper thread with no
  // lease held and the cell frozen when it could be (`frozen`), with the session's current
  // base (nullptr: none). An error: the files are lost and the next call is told why.
  // Unset: the files are lost.
  std::function<Result<SessionBase>(CellInstance&, const std::string& key,
                                    const std::string& profile, const SessionBase* base,
                                    bool frozen)>
      hibernate;
  // Session `key` (of `profile`) no longer uses `base` (a restore or a later hibernation
  // replaced it, or the session ended; not at server shutdown), after the cell over it was
  // destroyed.
  std::function<void(const std::string& key, const std::string& profile, const SessionBase& base)>
      on_base_released;
};

// Why the manager's reaper ended a session's cell (CellSessionManager::SetExpiryListener).
enum class SessionExpiry {
  kIdle,         // the cell was destroyed; the session stays open for a fresh one
  kMaxLifetime,  // the session was closed: later Acquires fail
};

// Makes the spec of a new cell with the given id (the policy decides everything in it).
using CellSpecFactory = std::function<Result<CellSpec>(const std::string& cell_id)>;

// A named alternative to the manager's own factory and timeouts (e.g. one per tenant, each
// from its own policy). A session's profile is chosen when it is first made.
struct CellSessionProfile {
  CellSpecFactory factory;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds max_lifetime{std::chrono::hours(4)};
  std::chrono::milliseconds pause_idle{0};  // CellSessionOptions::pause_idle
};

class CellSession;

// Proof that a call may use the cell, and the only way tools reach it: every request goes
// through the lease to the cell. Releases the cell on destruction. Move-only. The requests
// are thread-safe (as the cell's), and fail with an error once the cell died.
class CellLease {
 public:
  CellLease(CellLease&&) noexcept;
  CellLease& operator=(CellLease&&) = delete;
  CellLease(const CellLease&) = delete;
  ~CellLease();

  const std::string& id() const;
  // The spec the cell was made from (limits, sizes; session_info shows them).
  const CellSpec& spec() const;
  // False once the cell cannot take requests (init died, the cell was destroyed).
  bool alive() const;
  // What the cell does not enforce and why (CellInstance::warnings).
  const std::vector<std::string>& warnings() const;
  // The cell's resource use so far; an error when it is not accounted.
  Result<CgroupUsage> Usage() const;

  // Runs one program to completion (sandbox/backend.h, CellInstance::Exec).
  Result<ExecResult> Exec(const ExecOptions& options) const;
  Status SignalExec(uint64_t exec_id, int signo) const;
  Result<control::StatsReply> Stats() const;

  // File operations inside the cell, as the sandbox user (CellInstance's).
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) const;
  Result<FileWindow> ReadFileRange(const std::string& path, uint64_t offset,
                                   uint64_t max_bytes) const;
  Status WriteFile(const std::string& path, std::string_view data, uint32_t mode = 0644) const;
  Status WriteFileAt(const std::string& path, uint64_t offset, std::string_view data, bool truncate,
                     uint32_t mode = 0644) const;
  Status AppendFile(const std::string& path, std::string_view data, uint32_t mode = 0644) const;
  Status WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) const;
  Result<std::vector<control::DirEntry>> ListDir(const std::string& path,
                                                 size_t max_entries = 100000) const;
  Result<control::FileStat> Stat(const std::string& path, bool follow_symlinks = false) const;
  Status Mkdir(const std::string& path, uint32_t mode = 0755, bool parents = false) const;
  Status Remove(const std::string& path, bool recursive = false) const;
  Status Rename(const std::string& from, const std::string& to, bool no_replace = false) const;

  // Fires when the session is closing or expiring: stop work, kill the program.
  std::stop_token stop_token() const { return stop_; }
  // Non-empty when this call got a new cell because the previous one had died.
  const std::string& replaced_reason() const { return replaced_reason_; }
  // Non-empty for the session's first call made once less than a tenth of its maximum
  // lifetime, or less than 5 minutes, is left (whichever comes first): says when the
  // session ends. Once per session.
  const std::string& lifetime_notice() const { return lifetime_notice_; }

 private:
  friend class CellSession;
  CellLease(CellSession* session, std::shared_ptr<CellInstance> cell, std::stop_token stop,
            std::string replaced_reason, std::string lifetime_notice);
  CellSession* session_;
  std::shared_ptr<CellInstance> cell_;
  std::stop_token stop_;
  std::string replaced_reason_;
  std::string lifetime_notice_;
};

// What session_info shows.
struct CellSessionInfo {
  std::string session_key;
  std::string cell_id;  // empty before the first call or after the cell was destroyed
  bool cell_alive = false;
  uint64_t cells_created = 0;  // > 1 when a dead cell was replaced
  uint64_t calls = 0;
  int active_leases = 0;
  std::chrono::system_clock::time_point started_at;
  std::chrono::milliseconds idle_left{0};      // before idle expiry (full while in use)
  std::chrono::milliseconds lifetime_left{0};  // before the maximum lifetime
  bool paused = false;                         // the cell is frozen now
  std::chrono::milliseconds paused_total{0};   // all pauses of the session, the current too
  std::vector<std::string> warnings;           // from the cell: what is not enforced
  std::string base_snapshot;                   // the snapshot new cells are made over ("" = none)
  bool hibernated = false;  // no cell now; the next one gets the hibernated files
};

// What RestartOver ended.
struct RestartResult {
  uint64_t programs_ended = 0;  // the cell's processes but init (cgroup), else its running execs
  bool counted = false;         // false: not known (no cell, no cgroup and paused, Stats failed)
};

class CellSession {
 public:
  CellSession(std::string key, CellSpecFactory factory, CellSessionOptions options,
              std::string profile = "", std::shared_ptr<const CellHooks> hooks = nullptr,
              std::shared_ptr<WarmPool> pool = nullptr);
  ~CellSession();  // Close()
  CellSession(const CellSession&) = delete;
  CellSession& operator=(const CellSession&) = delete;

  // The live cell, created now if there is none or it died. Errors: the session is
  // closed or expired, or the cell could not be created (the message says why).
  Result<CellLease> Acquire();

  // Stops leases, waits for them, destroys the cell. Further Acquires fail. Idempotent.
  // `keep_base`: the base is not released (server shutdown keeps hibernated files).
  Status Close(const std::string& reason = "session closed", bool keep_base = false);

  // Stops the leases (their stop tokens, as Close), waits for them, destroys the cell and
  // makes `base` the session's base; the session stays open. The next Acquire's lease
  // carries `note` as its replaced_reason ("" = none). The previous base is released.
  Result<RestartResult> RestartOver(SessionBase base, std::string note = "");
  // Runs `fn` on the session's cell (made now if it has none) frozen (when it can be:
  // `frozen`), with the current base (nullptr: none); no other Acquire gets the cell
  // meanwhile. The cell is thawed afterwards, also when `fn` fails.
  Status WithFrozenCell(
      const std::function<Status(CellInstance&, const SessionBase* base, bool frozen)>& fn);
  std::optional<SessionBase> base() const;

  // Destroys the cell if it is still idle (no lease held); the session stays open and the
  // next Acquire makes a fresh cell. Called by the manager when the idle timeout passes.
  Status DestroyIdleCell();

  // Freezes the cell if it is still unleased after pause_idle (called by the reaper). An
  // error (the cell cannot be paused) leaves it running; that cell is not tried again.
  // `now` (an operator's pause): at once, whatever pause_idle says.
  Status PauseIdleCell(bool now = false);
  // Thaws a paused cell now (an operator's resume); nothing when it is not paused.
  Status ThawNow();
  // True when the pause deadline has passed for a running, unleased cell.
  bool PauseDue(std::chrono::steady_clock::time_point now) const;

  // True when idle or lifetime deadline has passed (checked by the manager's reaper);
  // `why` and `kind` say which.
  bool Expired(std::chrono::steady_clock::time_point now, std::string* why,
               SessionExpiry* kind = nullptr) const;
  bool closed() const;
  CellSessionInfo Info() const;
  const std::string& key() const { return key_; }
  const std::string& profile() const { return profile_; }  // "" = the manager's own

 private:
  friend class CellLease;
  void Release();
  std::string NextCellId();
  // A new cell (from the warm pool when it has one), over `layers` when there are some.
  Result<std::unique_ptr<CellInstance>> MakeCell(const std::string& id,
                                                 const std::vector<CellLayer>& layers);
  // The hibernate hook on `cell` (taken from the session, changing_ set); sets base_ and the
  // next lease's note. Outside mu_. Returns the base it replaced, to release.
  std::optional<SessionBase> Hibernate(const std::shared_ptr<CellInstance>& cell, bool frozen);
  void ReleaseBase(const std::optional<SessionBase>& base);
  // on_destroying, Destroy, on_destroyed. Outside mu_.
  Status Retire(const std::shared_ptr<CellInstance>& cell);
  // The cell taken from the session to be ended, and how long it had been paused (-1: not).
  struct TakenCell {
    std::shared_ptr<CellInstance> cell;
    std::chrono::milliseconds paused_for{-1};
  };
  // Close's and RestartOver's sequence, under mu_: asks the leases to stop (their stop
  // tokens fire, running programs are killed), waits until none is held (and, with
  // `wait_for_change`, no change runs), then takes cell_ and ends its pause.
  TakenCell StopLeasesAndTakeCellLocked(std::unique_lock<std::mutex>& lock, bool wait_for_change);
  // Outside mu_: on_unpaused(resumed=false) and Retire for the taken cell, then releases
  // `released`. The error (the cell's destruction) is wrapped with `what` and its id.
  Status EndTakenCell(const TakenCell& taken, const std::optional<SessionBase>& released,
                      const std::string& what);
  // CellLease::lifetime_notice for a lease made now. Under mu_.
  std::string TakeLifetimeNoticeLocked();
  // Thaws the paused cell_, releasing `lock` meanwhile (changing_ holds others off).
  Status ResumeLocked(std::unique_lock<std::mutex>& lock);
  // Ends the pause of a paused cell_ that is being taken away (destroyed or replaced):
  // on_unpaused(resumed=false) is due for the cell. Under mu_; returns the pause's length.
  std::chrono::milliseconds DropPauseLocked();
  // Makes the cell that replaces cell_ (none, dead or not resumable: `replaced` says why)
  // and leases it. Called with `lock` held; releases it around creation.
  Result<CellLease> ReplaceCellLocked(std::unique_lock<std::mutex>& lock, std::string replaced);
  void NotifyUnpaused(CellInstance& cell, std::chrono::milliseconds paused_for, bool resumed);

  const std::string key_;
  const std::string profile_;
  const CellSpecFactory factory_;
  const CellSessionOptions options_;
  const std::shared_ptr<const CellHooks> hooks_;
  const std::shared_ptr<WarmPool> pool_;
  const std::shared_ptr<const CellBackend> backend_;
  const std::chrono::steady_clock::time_point started_;
  const std::chrono::system_clock::time_point started_wall_;

  mutable std::mutex mu_;
  std::condition_variable released_;
  std::shared_ptr<CellInstance> cell_;  // under mu_
  std::stop_source stop_;               // requested by Close
  std::chrono::steady_clock::time_point last_release_;
  int leases_ = 0;
  uint64_t calls_ = 0;
  uint64_t cells_created_ = 0;
  // A cell is being made, frozen or thawed outside mu_: one at a time; others wait on
  // released_.
  bool changing_ = false;
  bool paused_ = false;  // cell_ is frozen
  std::chrono::steady_clock::time_point paused_since_;
  std::chrono::steady_clock::duration paused_total_{0};  // ended pauses of this session
  std::string unpausable_cell_;  // id of a cell whose Freeze failed: not tried again
  bool closed_ = false;
  bool lifetime_noticed_ = false;  // a lease carried the lifetime notice
  std::string closed_reason_;
  std::optional<SessionBase> base_;
  // The next new cell's lease note, when set (after a restart or a hibernation).
  std::optional<std::string> next_note_;
  bool hibernated_ = false;  // the cell went at idle expiry; base_ holds its files
};

// All cell sessions of one server, by session key (stdio: one; HTTP: one per session).
class CellSessionManager {
 public:
  CellSessionManager(CellSpecFactory factory, CellSessionOptions options);
  ~CellSessionManager();  // CloseAll()

  // Registers profile `name` (not empty, not yet registered). Thread-safe, but meant for
  // start-up: sessions made before it cannot use it.
  Status AddProfile(const std::string& name, CellSessionProfile profile);

  // Sets the hooks every session made from now on uses; call before the first session.
  void SetCellHooks(CellHooks hooks);

  // Ready cells of `profile`'s warm pool right now ("" = the manager's own), and its status
  // (why it is not making cells, "" while it works or has none).
  size_t warm_ready(const std::string& profile = "") const;
  size_t warm_parked(const std::string& profile = "") const;  // parked cells ready
  std::string warm_status(const std::string& profile = "") const;

  // The session for `key`, made on first use with `profile` ("" = the manager's own
  // factory and options). Error once `key` was closed or expired (a closed session's key
  // is not reused, so a late call cannot revive it), for an unknown profile, and when
  // `key` was made with another profile.
  Result<std::shared_ptr<CellSession>> Get(const std::string& key, const std::string& profile = "");
  // `keep_base`: CellSession::Close's (the server is shutting down).
  Status Close(const std::string& key, const std::string& reason = "session closed",
               bool keep_base = false);
  // Closes every session; `keep_bases` (server shutdown) keeps their bases.
  void CloseAll(bool keep_bases = true);
  size_t live_sessions() const;
  // The live session for `key`, or nullptr: never makes one (unlike Get).
  std::shared_ptr<CellSession> Find(const std::string& key) const;
  // True when a live session's cells are made over snapshot `snapshot_id` (its base).
  bool BaseInUse(const std::string& snapshot_id) const;
  // Called (on the reaper thread) with the key, the kind and the reason when a session
  // expires, after its cell was destroyed (and at kMaxLifetime the session closed).
  using ExpiryListener =
      std::function<void(const std::string& key, SessionExpiry kind, const std::string& why)>;
  void SetExpiryListener(ExpiryListener fn);

 private:
  void ReaperLoop(std::stop_token stop);
  // The warm pool of `profile` (made now if warm_cells > 0); nullptr without one. Under mu_.
  std::shared_ptr<WarmPool> PoolLocked(const std::string& profile, const CellSpecFactory& factory);
  void StopPools();

  const CellSpecFactory factory_;
  const CellSessionOptions options_;  // its backend set
  mutable std::mutex mu_;
  std::map<std::string, CellSessionProfile> profiles_;
  std::shared_ptr<const CellHooks> hooks_;
  std::map<std::string, std::shared_ptr<WarmPool>> pools_;  // by profile, made on first use
  bool stopped_pools_ = false;                              // CloseAll ran: no new pools
  std::map<std::string, std::shared_ptr<CellSession>> sessions_;
  std::map<std::string, std::string> ended_;  // key -> why, bounded
  std::deque<std::string> ended_order_;       // ended_'s keys, oldest first
  ExpiryListener on_expired_;
  std::condition_variable_any wake_;
  std::jthread reaper_;
};

}  // namespace mcpcell::sandbox
