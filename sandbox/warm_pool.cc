#include "sandbox/warm_pool.h"

namespace mcpcell::sandbox {
namespace {

// After a failed creation the pool waits this long before it tries again, so a host that
// cannot make cells is not hammered; sessions still make (and report) their own meanwhile.
constexpr std::chrono::seconds kRetryAfterFailure{5};

}  // namespace

WarmPool::WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend, size_t target,
                   Prepare prepare, size_t parked_target)
    : factory_(std::move(factory)),
      backend_(std::move(backend)),
      target_(target),
      prepare_(std::move(prepare)),
      parked_target_(backend_ && backend_->ParksCells() ? parked_target : 0) {
  if ((target_ > 0 || parked_target_ > 0) && factory_ && backend_) {
    thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
  }
}

WarmPool::~WarmPool() { Stop(); }

int WarmPool::LackingLocked() const {
  // Paused, an empty pool still makes one: runs that keep overlapping must not leave it
  // empty for good (each would then make its own cell, the slow way).
  if (ready_.size() < target_ && (pauses_ == 0 || ready_.empty())) return 1;
  if (parked_.size() < parked_target_ && (pauses_ == 0 || parked_.empty())) return 2;
  return 0;
}

Result<std::unique_ptr<CellInstance>> WarmPool::Make(bool parked, std::stop_token stop,
                                                     std::string& persistent) {
  const std::string id = GenerateCellId('w');
  Result<CellSpec> spec = factory_(id);
  if (!spec) return spec.error().Wrap("cell spec");
  if (!spec->workspace_host_dir.empty()) {
    persistent = spec->workspace_host_dir;
    return Error::Msg("persistent workspace");
  }
  if (parked) return backend_->CreateParked(*spec);
  Result<std::unique_ptr<CellInstance>> cell = backend_->Create(*spec);
  if (cell && prepare_) {
    if (Status s = prepare_(**cell, stop); !s) {
      (void)(*cell)->Destroy();
      return s.error().Wrap("preparing cell " + id);
    }
  }
  return cell;
}

void WarmPool::Loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    changed_.wait(lock, stop, [&] { return disabled_ || LackingLocked() != 0; });
    if (stop.stop_requested() || disabled_) return;
    const bool parked = LackingLocked() == 2;
    making_ = true;
    making_parked_ = parked;
    lock.unlock();
    std::string persistent;
    Result<std::unique_ptr<CellInstance>> cell = Make(parked, stop, persistent);
    lock.lock();
    making_ = false;
    if (!persistent.empty()) {
      disabled_ = true;
      status_ = "off: the policy names a persistent workspace (" + persistent +
                "), which one cell at a time may use";
    } else if (cell) {
      (parked ? parked_ : ready_).push_back(std::move(cell).value());
      status_.clear();
    } else {
      status_ = "retrying: " + cell.error().message;
    }
    changed_.notify_all();
    if (!cell && !disabled_) {
      changed_.wait_for(lock, stop, kRetryAfterFailure, [] { return false; });
    }
  }
}

std::unique_ptr<CellInstance> WarmPool::TakeFrom(bool parked, std::chrono::milliseconds max_wait) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  std::deque<std::unique_ptr<CellInstance>>& queue = parked ? parked_ : ready_;
  std::unique_lock lock(mu_);
  for (;;) {
    while (!queue.empty()) {
      std::unique_ptr<CellInstance> cell = std::move(queue.front());
      queue.pop_front();
      if (LackingLocked() != 0) changed_.notify_all();  // refill (see Loop)
      lock.unlock();
      // A parked cell takes no request yet: a dead one fails its Unpark instead.
      if (parked ? cell->parked() : cell->usable()) return cell;
      (void)cell->Destroy();  // died while waiting (killed from the host): never handed out
      cell.reset();
      lock.lock();
    }
    if (!making_ || making_parked_ != parked) return nullptr;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && queue.empty()) {
      return nullptr;
    }
  }
}

std::unique_ptr<CellInstance> WarmPool::Take(std::chrono::milliseconds max_wait) {
  return TakeFrom(false, max_wait);
}

std::unique_ptr<CellInstance> WarmPool::TakeOver(const std::vector<CellLayer>& layers,
                                                 std::chrono::milliseconds max_wait) {
  std::unique_ptr<CellInstance> cell = TakeFrom(true, max_wait);
  if (!cell) return nullptr;
  if (Status s = cell->Unpark(layers); !s) {
    (void)cell->Destroy();
    std::lock_guard lock(mu_);
    status_ = "a parked cell could not take its layers: " + s.error().message;
    return nullptr;
  }
  return cell;
}

void WarmPool::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();  // a creation in progress finishes first; its cell lands in ready_
  }
  std::deque<std::unique_ptr<CellInstance>> cells;
  {
    std::lock_guard lock(mu_);
    disabled_ = true;
    cells.swap(ready_);
    for (auto& cell : parked_) cells.push_back(std::move(cell));
    parked_.clear();
    changed_.notify_all();
  }
  for (auto& cell : cells) (void)cell->Destroy();
}

void WarmPool::PauseRefill() {
  std::lock_guard lock(mu_);
  ++pauses_;
}

void WarmPool::ResumeRefill() {
  std::lock_guard lock(mu_);
  if (pauses_ > 0 && --pauses_ == 0) changed_.notify_all();
}

size_t WarmPool::ready() const {
  std::lock_guard lock(mu_);
  return ready_.size();
}

size_t WarmPool::parked() const {
  std::lock_guard lock(mu_);
  return parked_.size();
}

std::string WarmPool::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace mcpcell::sandbox
