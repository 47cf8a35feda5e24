#include "sandbox/warm_pool.h"

namespace mcpcell::sandbox {
namespace {

// After a failed creation the pool waits this long before it tries again, so a host that
// cannot make cells is not hammered; sessions still make (and report) their own meanwhile.
constexpr std::chrono::seconds kRetryAfterFailure{5};

}  // namespace

WarmPool::WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend, size_t target,
                   Prepare prepare)
    : factory_(std::move(factory)),
      backend_(std::move(backend)),
      target_(target),
      prepare_(std::move(prepare)) {
  if (target_ > 0 && factory_ && backend_) {
    thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
  }
}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    // Paused, an empty pool still makes one: runs that keep overlapping must not leave it
    // empty for good (each would then make its own cell, the slow way).
    changed_.wait(lock, stop, [&] {
      return disabled_ || (ready_.size() < target_ && (pauses_ == 0 || ready_.empty()));
    });
    if (stop.stop_requested() || disabled_) return;
    making_ = true;
    lock.unlock();
    const std::string id = GenerateCellId('w');
    Result<CellSpec> spec = factory_(id);
    Result<std::unique_ptr<CellInstance>> cell = Error::Msg("not made");
    bool persistent_workspace = false;
    if (!spec) {
      cell = spec.error().Wrap("cell spec");
    } else if (!spec->workspace_host_dir.empty()) {
      persistent_workspace = true;
    } else {
      cell = backend_->Create(*spec);
      if (cell && prepare_) {
        if (Status s = prepare_(**cell, stop); !s) {
          (void)(*cell)->Destroy();
          cell = s.error().Wrap("preparing cell " + id);
        }
      }
    }
    lock.lock();
    making_ = false;
    if (persistent_workspace) {
      disabled_ = true;
      status_ = "off: the policy names a persistent workspace (" + spec->workspace_host_dir +
                "), which one cell at a time may use";
    } else if (cell) {
      ready_.push_back(std::move(cell).value());
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

std::unique_ptr<CellInstance> WarmPool::Take(std::chrono::milliseconds max_wait) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  std::unique_lock lock(mu_);
  for (;;) {
    while (!ready_.empty()) {
      std::unique_ptr<CellInstance> cell = std::move(ready_.front());
      ready_.pop_front();
      if (pauses_ == 0 || ready_.empty()) changed_.notify_all();  // refill (see Loop)
      lock.unlock();
      if (cell->usable()) return cell;
      (void)cell->Destroy();  // died while waiting (killed from the host): never handed out
      cell.reset();
      lock.lock();
    }
    if (!making_) return nullptr;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && ready_.empty()) {
      return nullptr;
    }
  }
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

std::string WarmPool::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace mcpcell::sandbox
