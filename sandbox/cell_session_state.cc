// CellSession's base (cell_session.h): restarting a session over a snapshot (restore and
// fork), running something on its frozen cell (a snapshot's capture), and idle expiry
// (DestroyIdleCell; with the hibernate hook the cell's files become the next cell's base). The rest
// of CellSession is in cell_session.cc and cell_session_pause.cc.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "sandbox/cell_session.h"

namespace mcpcell::sandbox {

using Clock = std::chrono::steady_clock;

std::optional<SessionBase> CellSession::base() const {
  std::lock_guard lock(mu_);
  return base_;
}

void CellSession::ReleaseBase(const std::optional<SessionBase>& base) {
  if (base && hooks_ && hooks_->on_base_released) hooks_->on_base_released(key_, profile_, *base);
}

Result<RestartResult> CellSession::RestartOver(SessionBase base, std::string note) {
  RestartResult result;
  std::unique_lock lock(mu_);
  released_.wait(lock, [&] { return !changing_ || closed_; });
  if (closed_) return Error::Msg("the session has ended: " + closed_reason_);
  changing_ = true;  // no new lease from here on
  std::shared_ptr<CellInstance> cell = cell_;
  const bool frozen = paused_;
  lock.unlock();
  // Count before stopping them: the cgroup's processes besides cell init (background ones
  // too; readable while frozen), else the running execs (a frozen cell answers no request).
  if (cell) {
    if (Result<CgroupUsage> usage = cell->Usage(); usage && usage->pids_current > 0) {
      result.programs_ended = usage->pids_current - 1;
      result.counted = true;
    } else if (!frozen && cell->usable()) {
      if (Result<control::StatsReply> stats = cell->Stats(); stats) {
        result.programs_ended = stats->running_execs;
        result.counted = true;
      }
    }
  }
  lock.lock();
  // changing_ is ours here: wait for the leases only.
  const TakenCell taken = StopLeasesAndTakeCellLocked(lock, /*wait_for_change=*/false);
  stop_ = std::stop_source();  // later leases get a fresh token
  std::optional<SessionBase> released = std::exchange(base_, std::move(base));
  if (released && released->snapshot_id == base_->snapshot_id) released.reset();
  next_note_ = std::move(note);
  hibernated_ = false;
  changing_ = false;
  released_.notify_all();
  lock.unlock();
  if (Status st = EndTakenCell(taken, released, "destroy cell"); !st) return st.error();
  return result;
}

Status CellSession::WithFrozenCell(
    const std::function<Status(CellInstance&, const SessionBase* base, bool frozen)>& fn) {
  std::optional<CellLease> lease;
  std::optional<SessionBase> base;
  for (;;) {
    Result<CellLease> acquired = Acquire();  // makes the cell, thaws a paused one
    if (!acquired) return acquired.error();
    lease.emplace(std::move(acquired).value());
    std::unique_lock lock(mu_);
    if (!changing_ && cell_ == lease->cell_) {
      changing_ = true;  // holds new leases off while the cell is frozen
      base = base_;
      break;
    }
    // Something else changes the cell (a restart waits for our lease): let it, then retry.
    lock.unlock();
    lease.reset();
    lock.lock();
    released_.wait(lock, [&] { return !changing_; });
  }
  CellInstance& cell = *lease->cell_;
  const bool frozen = cell.Freeze().ok();
  Status st = fn(cell, base ? &*base : nullptr, frozen);
  Status thawed = frozen ? cell.Thaw() : Ok();
  {
    std::lock_guard lock(mu_);
    changing_ = false;
    if (!thawed) {
      // Left frozen: the next Acquire tries to thaw it again and replaces it if it fails.
      paused_ = true;
      paused_since_ = Clock::now();
    }
    released_.notify_all();
  }
  if (!thawed && st) return thawed.error().Wrap("thaw cell " + cell.id() + " after the capture");
  return st;
}

Status CellSession::DestroyIdleCell() {
  std::shared_ptr<CellInstance> cell;
  std::chrono::milliseconds paused_for{-1};
  bool hibernate = false, frozen = false;
  {
    std::lock_guard lock(mu_);
    // In use again, or used since the reaper looked: not idle any more.
    if (leases_ > 0 || changing_ || !cell_) return Ok();
    if (Clock::now() - last_release_ < options_.idle_timeout) return Ok();
    hibernate = hooks_ && hooks_->hibernate;
    if (hibernate) {
      changing_ = true;  // no Acquire until the files are kept (or known lost)
      cell = cell_;
      frozen = paused_;
    } else {
      cell = std::move(cell_);
      paused_for = DropPauseLocked();  // destroyed frozen: Destroy handles it
    }
  }
  std::optional<SessionBase> replaced;
  if (hibernate) {
    if (!frozen) frozen = cell->Freeze().ok();  // a consistent copy when it can be frozen
    replaced = Hibernate(cell, frozen);
    std::lock_guard lock(mu_);
    cell_.reset();
    paused_for = DropPauseLocked();
    changing_ = false;
    released_.notify_all();
  }
  return EndTakenCell({cell, paused_for}, replaced, "destroy idle cell");
}

std::optional<SessionBase> CellSession::Hibernate(const std::shared_ptr<CellInstance>& cell,
                                                  bool frozen) {
  std::optional<SessionBase> current = base();  // only this thread changes it now
  Result<SessionBase> kept =
      hooks_->hibernate(*cell, key_, profile_, current ? &*current : nullptr, frozen);
  const std::string idle =
      std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(options_.idle_timeout).count()) +
      " s";
  std::lock_guard lock(mu_);
  if (!kept) {
    // Today's behaviour: the files go with the cell. A later cell still runs over the base
    // it had (the files from before this cell), which stays.
    next_note_ = "the session's previous cell was destroyed after " + idle +
                 " idle and its files could not be kept (" + kept.error().message +
                 "); this call runs in a fresh cell and files from before are gone";
    return std::nullopt;
  }
  std::optional<SessionBase> replaced = std::exchange(base_, std::move(*kept));
  if (replaced && replaced->snapshot_id == base_->snapshot_id) replaced.reset();
  next_note_ = "the session hibernated after " + idle +
               " of idle: its programs were stopped, its files kept";
  hibernated_ = true;
  return replaced;
}

}  // namespace mcpcell::sandbox
