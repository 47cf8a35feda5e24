// CellSession's pause and resume (cell_session.h): freezing an unleased cell after
// pause_idle (the reaper's PauseIdleCell), thawing it for the next Acquire, and ending a
// pause when a paused cell is taken away. The rest of CellSession is in cell_session.cc.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "sandbox/cell_session.h"

namespace mcpcell::sandbox {

using Clock = std::chrono::steady_clock;

Status CellSession::ResumeLocked(std::unique_lock<std::mutex>& lock) {
  changing_ = true;
  std::shared_ptr<CellInstance> cell = cell_;
  const Clock::time_point since = paused_since_;
  lock.unlock();
  Status thawed = cell->Thaw();
  const auto paused_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
  NotifyUnpaused(*cell, paused_for, thawed.ok());
  lock.lock();
  changing_ = false;
  paused_ = false;
  paused_total_ += paused_for;
  released_.notify_all();
  return thawed;
}

std::chrono::milliseconds CellSession::DropPauseLocked() {
  if (!paused_) return std::chrono::milliseconds(-1);
  const auto paused_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - paused_since_);
  paused_ = false;
  paused_total_ += paused_for;
  return paused_for;
}

void CellSession::NotifyUnpaused(CellInstance& cell, std::chrono::milliseconds paused_for,
                                 bool resumed) {
  if (paused_for.count() >= 0 && hooks_ && hooks_->on_unpaused)
    hooks_->on_unpaused(cell, key_, paused_for, resumed);
}

bool CellSession::PauseDue(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return !closed_ && cell_ && !paused_ && !changing_ && leases_ == 0 &&
         options_.pause_idle.count() > 0 && options_.pause_idle < options_.idle_timeout &&
         cell_->id() != unpausable_cell_ && now - last_release_ >= options_.pause_idle;
}

Status CellSession::PauseIdleCell(bool now) {
  std::shared_ptr<CellInstance> cell;
  {
    std::lock_guard lock(mu_);
    if (closed_ || !cell_ || paused_ || changing_ || leases_ > 0) return Ok();
    if (!now && (options_.pause_idle.count() <= 0 || cell_->id() == unpausable_cell_)) return Ok();
    if (!now && Clock::now() - last_release_ < options_.pause_idle) return Ok();
    changing_ = true;
    cell = cell_;
  }
  Status frozen = cell->Freeze();
  {
    std::lock_guard lock(mu_);
    changing_ = false;
    if (frozen) {
      paused_ = true;
      paused_since_ = Clock::now();
    } else {
      unpausable_cell_ = cell->id();
    }
    released_.notify_all();
  }
  if (!frozen) return frozen.error().Wrap("pause idle cell " + cell->id());
  if (hooks_ && hooks_->on_paused) hooks_->on_paused(*cell, key_);
  return Ok();
}

Status CellSession::ThawNow() {
  std::unique_lock lock(mu_);
  if (closed_ || !cell_ || !paused_ || changing_) return Ok();
  return ResumeLocked(lock);
}

}  // namespace mcpcell::sandbox
