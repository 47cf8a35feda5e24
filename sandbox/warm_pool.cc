#include "sandbox/warm_pool.h"

#include <algorithm>

namespace mcpcell::sandbox {
namespace {

// How far ahead a pool thread with nothing to do looks: it wakes then to recount demand
// even if no take or expiry woke it (a bound, not a schedule).
constexpr std::chrono::hours kIdleWake{1};

std::string Seconds(std::chrono::milliseconds d) {
  const long long ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

WarmPoolOptions FixedOptions(size_t target, WarmPoolPrepare prepare, size_t parked) {
  WarmPoolOptions o;
  o.floor = target;
  o.parked = parked;
  o.prepare = std::move(prepare);
  return o;
}

}  // namespace

WarmPool::WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend,
                   WarmPoolOptions options)
    : factory_(std::move(factory)),
      backend_(std::move(backend)),
      options_([&] {
        if (!backend_ || !backend_->ParksCells()) options.parked = 0;
        options.makers = std::max<size_t>(options.makers, 1);
        options.burst_span = std::max(options.burst_span, std::chrono::milliseconds(4));
        return std::move(options);
      }()),
      slot_(options_.burst_span / 4),
      target_(options_.floor) {
  const bool wanted = options_.floor > 0 || options_.ceiling > 0 || options_.parked > 0;
  if (!wanted || !factory_ || !backend_) return;
  for (size_t i = 0; i < options_.makers; ++i) {
    threads_.emplace_back([this](std::stop_token stop) { Loop(stop); });
  }
}

WarmPool::WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend, size_t target,
                   Prepare prepare, size_t parked_target)
    : WarmPool(std::move(factory), std::move(backend),
               FixedOptions(target, std::move(prepare), parked_target)) {}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::NoteTakeLocked(Clock::time_point now) {
  const int64_t index = (now - start_) / slot_;
  if (!demand_.empty() && demand_.back().index == index) {
    ++demand_.back().takes;
  } else {
    demand_.push_back({index, 1});
  }
  RecountLocked(now);
}

void WarmPool::RecountLocked(Clock::time_point now) {
  const int64_t index = (now - start_) / slot_;
  const int64_t window_slots = options_.demand_window / slot_;
  while (!demand_.empty() && demand_.front().index <= index - window_slots) demand_.pop_front();
  // The most takes in any four consecutive slots (one burst_span), two pointers.
  size_t peak = 0, sum = 0, first = 0;
  for (size_t last = 0; last < demand_.size(); ++last) {
    sum += demand_[last].takes;
    while (demand_[first].index <= demand_[last].index - 4) sum -= demand_[first++].takes;
    peak = std::max(peak, sum);
  }
  const size_t ceiling = std::max(options_.floor, options_.ceiling);
  target_ = std::clamp(peak, options_.floor, ceiling);
}

WarmPool::Clock::time_point WarmPool::NextExpiryLocked() const {
  if (demand_.empty()) return Clock::now() + kIdleWake;
  const int64_t window_slots = options_.demand_window / slot_;
  return start_ + (demand_.front().index + window_slots) * slot_;
}

WarmPool::Work WarmPool::NextWorkLocked(Clock::time_point now) const {
  // Beyond the target (demand fell): the oldest ready cell goes first.
  if (ready_.size() > target_) return Work::kShrink;
  if (now < retry_at_) return Work::kNone;  // backing off after a failure
  // Paused, an empty pool still makes one: runs that keep overlapping must not leave it
  // empty for good (each would then make its own cell, the slow way).
  const bool ready_empty = ready_.empty() && making_ready_ == 0;
  if (ready_.size() + making_ready_ < target_ && (pauses_ == 0 || ready_empty)) {
    return Work::kReady;
  }
  const bool parked_empty = parked_.empty() && making_parked_ == 0;
  if (parked_.size() + making_parked_ < options_.parked && (pauses_ == 0 || parked_empty)) {
    return Work::kParked;
  }
  return Work::kNone;
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
  if (cell && options_.prepare) {
    if (Status s = options_.prepare(**cell, stop); !s) {
      (void)(*cell)->Destroy();
      return s.error().Wrap("preparing cell " + id);
    }
  }
  return cell;
}

void WarmPool::Loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stop.stop_requested() || disabled_) return;
    Clock::time_point now = Clock::now();
    RecountLocked(now);
    const Work work = NextWorkLocked(now);
    if (work == Work::kNone) {
      // Woken by a take, a return to the pool, a resume or Stop; else when demand leaves
      // the window (the target may fall) or the back-off ends.
      Clock::time_point wake = NextExpiryLocked();
      if (retry_at_ > now) wake = std::min(wake, retry_at_);
      changed_.wait_until(lock, stop, wake,
                          [&] { return disabled_ || NextWorkLocked(Clock::now()) != Work::kNone; });
      continue;
    }
    if (work == Work::kShrink) {
      std::unique_ptr<CellInstance> cell = std::move(ready_.front());
      ready_.pop_front();
      lock.unlock();
      (void)cell->Destroy();  // a surplus cell: nothing to report to anyone
      cell.reset();
      lock.lock();
      continue;
    }
    const bool parked = work == Work::kParked;
    ++(parked ? making_parked_ : making_ready_);
    lock.unlock();
    std::string persistent;
    Result<std::unique_ptr<CellInstance>> cell = Make(parked, stop, persistent);
    lock.lock();
    --(parked ? making_parked_ : making_ready_);
    if (!persistent.empty()) {
      disabled_ = true;
      status_ = "off: the policy names a persistent workspace (" + persistent +
                "), which one cell at a time may use";
    } else if (cell) {
      (parked ? parked_ : ready_).push_back(std::move(cell).value());
      failures_ = 0;
      status_.clear();
    } else {
      ++failures_;
      std::chrono::milliseconds delay = options_.retry_first;
      for (size_t i = 1; i < failures_ && delay < options_.retry_max; ++i) delay *= 2;
      delay = std::min(delay, options_.retry_max);
      retry_at_ = Clock::now() + delay;
      // "retrying: " first: /readyz reports a pool whose status starts so
      // (serve/metrics_wiring.cc).
      status_ = "retrying: " + cell.error().message + " (next try in " + Seconds(delay) + ", " +
                std::to_string(failures_) + " failed in a row)";
    }
    changed_.notify_all();
  }
}

std::unique_ptr<CellInstance> WarmPool::TakeFrom(bool parked, std::chrono::milliseconds max_wait) {
  const auto deadline = Clock::now() + max_wait;
  std::deque<std::unique_ptr<CellInstance>>& queue = parked ? parked_ : ready_;
  size_t& making = parked ? making_parked_ : making_ready_;
  size_t& waiting = parked ? waiting_parked_ : waiting_ready_;
  std::unique_lock lock(mu_);
  if (!parked) NoteTakeLocked(Clock::now());  // a miss is demand too
  for (;;) {
    while (!queue.empty()) {
      std::unique_ptr<CellInstance> cell = std::move(queue.front());
      queue.pop_front();
      changed_.notify_all();  // refill (see Loop)
      lock.unlock();
      // A parked cell takes no request yet: a dead one fails its Unpark instead.
      if (parked ? cell->parked() : cell->usable()) return cell;
      (void)cell->Destroy();  // died while waiting (killed from the host): never handed out
      cell.reset();
      lock.lock();
    }
    // Every cell being made has a caller waiting for it already: making one's own is
    // sooner than queueing behind them.
    if (making <= waiting) {
      changed_.notify_all();  // the target may have risen with this take
      return nullptr;
    }
    ++waiting;
    const bool timed_out = changed_.wait_until(lock, deadline) == std::cv_status::timeout;
    --waiting;
    if (timed_out && queue.empty()) return nullptr;
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
  for (std::jthread& t : threads_) t.request_stop();
  // Creations in progress finish first; their cells land in ready_ or parked_.
  for (std::jthread& t : threads_) {
    if (t.joinable()) t.join();
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

size_t WarmPool::target() const {
  std::lock_guard lock(mu_);
  return target_;
}

std::string WarmPool::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace mcpcell::sandbox
