// WarmPool: cells made ahead of need, so that a session's first tool call does not wait
// for a cell to be built (clone, mounts, cgroup, init's setup: most of a first call's
// latency; figures in bench/).
//
// A pool keeps ready cells of one spec factory (one policy profile). Take() hands out a
// ready cell at once; when none is ready but one is being made that no other caller waits
// for, it waits for that one (it started earlier than anything the caller could start now);
// otherwise it returns nullptr and the caller makes its own cell, so a pool that cannot make
// cells never makes a session fail differently.
//
// Growth with demand: `floor` ready cells are kept however quiet the server is. Every Take
// counts as demand (a miss too); the pool's target is the most takes within any
// `burst_span` over the last `demand_window`, between `floor` and `ceiling`. So a burst
// that drains the pool raises the target to the burst's size and the pool refills to it in
// the background, ready for the next burst; once a whole window passes without such a
// burst, the target falls back and the cells beyond it are destroyed (one at a time, by
// the pool's threads). `makers` cells at most are made at once (one thread each), which
// bounds what the refill takes from the CPUs the calls run on.
//
// A failed creation makes the pool back off (`retry_first`, doubling up to `retry_max`,
// reset by a success) and status() says why and when it tries again; sessions meanwhile
// make (and report) their own cells.
//
// Parked cells: besides its ready cells, a pool may keep `parked` parked ones
// (CellBackend::CreateParked: made but for their filesystem) for sessions over snapshot
// layers (restore, fork, hibernation), which a ready cell cannot serve: TakeOver finishes
// one with the session's layers (CellInstance::Unpark) on the caller's thread. Ready cells
// are made first; parked ones only when the backend can park (ParksCells). Their number
// does not grow.
//
// A pool may prepare each cell it makes before handing it out (`Prepare`, on the pool's
// thread, after the cell is ready): `mcpcell pool` runs warm-up commands in it. A cell
// whose preparation fails is destroyed, as one that could not be made.
//
// What a pooled cell must not depend on: the session. The spec factory is called with a
// fresh id only, and a spec that names a persistent host workspace disables the pool (two
// live cells on one persistent workspace are unsupported: the second would re-own the
// files of the first). A pooled cell that died while waiting is destroyed, never handed out.
//
// Threading: every method is thread-safe; cells are made and destroyed on the pool's
// threads or on the thread calling Take/Stop, never under the pool's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "sandbox/backend.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::sandbox {

// Called with each new cell before it is ready; `stop` fires when the pool stops.
using WarmPoolPrepare = std::function<Status(CellInstance& cell, std::stop_token stop)>;

struct WarmPoolOptions {
  size_t floor = 0;    // ready cells kept however quiet
  size_t ceiling = 0;  // the most ready cells demand raises the target to; <= floor: fixed
  size_t parked = 0;   // parked cells kept (0 where the backend cannot park)
  size_t makers = 1;   // cells made at once, each on its own thread (at least 1)
  std::chrono::milliseconds burst_span{std::chrono::seconds(1)};
  std::chrono::milliseconds demand_window{std::chrono::minutes(1)};
  // After a failed creation: the first wait before the next try, doubled after each
  // further failure up to retry_max, so a host that cannot make cells is not hammered.
  std::chrono::milliseconds retry_first{std::chrono::seconds(1)};
  std::chrono::milliseconds retry_max{std::chrono::minutes(1)};
  WarmPoolPrepare prepare;
};

class WarmPool {
 public:
  using SpecFactory = std::function<Result<CellSpec>(const std::string& cell_id)>;
  using Prepare = WarmPoolPrepare;

  // Starts making cells with `backend` at once (floor, ceiling and parked 0: never makes
  // any; Take returns nullptr).
  WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend,
           WarmPoolOptions options);
  // A pool of a fixed `target` with one maker (`mcpcell pool`).
  WarmPool(SpecFactory factory, std::shared_ptr<const CellBackend> backend, size_t target,
           Prepare prepare = {}, size_t parked_target = 0);
  ~WarmPool();  // Stop()
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // A ready, live cell; or the one being made, once ready (waits at most `max_wait`);
  // nullptr when neither (the caller makes its own).
  std::unique_ptr<CellInstance> Take(std::chrono::milliseconds max_wait = std::chrono::seconds(30));
  // A parked cell (or the one being parked, as Take waits) finished over `layers`; nullptr
  // when there is none or Unpark failed (that cell is destroyed, status() says why): the
  // caller makes its own, which reports any error that is the layers' own.
  std::unique_ptr<CellInstance> TakeOver(
      const std::vector<CellLayer>& layers,
      std::chrono::milliseconds max_wait = std::chrono::seconds(30));

  // While at least one pause is held, the pool starts making no cell (one being made is
  // finished) unless none is ready: work that waits on a cell's program, on a host with
  // few CPUs, then does not share them with a cell being made (`mcpcell pool` pauses for
  // each run), and overlapping pauses cannot keep the pool empty. Every PauseRefill needs
  // one ResumeRefill.
  void PauseRefill();
  void ResumeRefill();

  // Stops making cells, waits for the one being made, destroys the ready ones. Idempotent.
  void Stop();

  size_t ready() const;
  size_t parked() const;
  // The number of ready cells the pool aims at now (floor <= target <= ceiling).
  size_t target() const;
  // Why the pool stopped making cells on its own ("" while it works): a spec with a
  // persistent workspace, or the last creation error while it backs off.
  std::string status() const;

 private:
  using Clock = std::chrono::steady_clock;
  enum class Work { kNone, kReady, kParked, kShrink };

  void Loop(std::stop_token stop);
  // What a pool thread should do now (under mu_): make a ready or a parked cell, destroy
  // a ready cell beyond the target, or nothing. Counts cells being made as made.
  Work NextWorkLocked(Clock::time_point now) const;
  // Drops demand older than the window and recomputes target_ (under mu_).
  void RecountLocked(Clock::time_point now);
  // When the oldest demand leaves the window (the target may fall then); max() if never.
  Clock::time_point NextExpiryLocked() const;
  // Records that a ready cell was taken (or missed) now.
  void NoteTakeLocked(Clock::time_point now);
  // A cell of `parked` kind made with a fresh spec (and prepared when ready); outside mu_.
  // `persistent` is set when the spec names a persistent workspace (nothing is made).
  Result<std::unique_ptr<CellInstance>> Make(bool parked, std::stop_token stop,
                                             std::string& persistent);
  // The first live cell of `queue`, or the one of that kind being made once ready.
  std::unique_ptr<CellInstance> TakeFrom(bool parked, std::chrono::milliseconds max_wait);

  // Takes counted per slot of a quarter of burst_span: the peak is the largest sum of four
  // consecutive slots, so memory and work stay bounded whatever the rate.
  struct DemandSlot {
    int64_t index;  // time since the pool started / slot width
    size_t takes;
  };

  const SpecFactory factory_;
  const std::shared_ptr<const CellBackend> backend_;
  const WarmPoolOptions options_;  // parked is 0 when the backend cannot park
  const Clock::time_point start_ = Clock::now();
  const Clock::duration slot_;  // burst_span / 4
  mutable std::mutex mu_;
  std::condition_variable_any changed_;
  std::deque<std::unique_ptr<CellInstance>> ready_;   // under mu_
  std::deque<std::unique_ptr<CellInstance>> parked_;  // under mu_
  std::deque<DemandSlot> demand_;                     // under mu_, oldest first
  size_t target_ = 0;                                 // under mu_
  size_t making_ready_ = 0;                           // under mu_
  size_t making_parked_ = 0;                          // under mu_
  size_t waiting_ready_ = 0;      // under mu_: Take callers waiting for a cell being made
  size_t waiting_parked_ = 0;     // under mu_
  bool disabled_ = false;         // under mu_: never again
  size_t pauses_ = 0;             // under mu_
  size_t failures_ = 0;           // under mu_: creations failed in a row
  Clock::time_point retry_at_{};  // under mu_: no creation starts before
  std::string status_;            // under mu_
  std::vector<std::jthread> threads_;
};

}  // namespace mcpcell::sandbox
