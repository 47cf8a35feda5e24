// WarmPool: cells made ahead of need, so that a session's first tool call does not wait
// for a cell to be built (clone, mounts, cgroup, init's setup: most of a first call's
// latency; figures in bench/).
//
// A pool keeps `target` ready cells of one spec factory (one policy profile). Take() hands
// out a ready cell at once; when none is ready but one is being made, it waits for that one
// (it started earlier than anything the caller could start now); otherwise it returns
// nullptr and the caller makes its own cell, so a pool that cannot make cells never makes
// a session fail differently. Every Take starts a refill on the pool's own thread.
//
// Parked cells: besides its `target` ready cells, a pool may keep `parked_target` parked
// ones (CellBackend::CreateParked: made but for their filesystem) for sessions over
// snapshot layers (restore, fork, hibernation), which a ready cell cannot serve: TakeOver
// finishes one with the session's layers (CellInstance::Unpark) on the caller's thread.
// Ready cells are made first; parked ones only when the backend can park (ParksCells).
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
// thread or on the thread calling Take/Stop, never under the pool's lock.
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

class WarmPool {
 public:
  using SpecFactory = std::function<Result<CellSpec>(const std::string& cell_id)>;
  // Called with each new cell before it is ready; `stop` fires when the pool stops.
  using Prepare = std::function<Status(CellInstance& cell, std::stop_token stop)>;

  // Starts making cells with `backend` at once (target 0: never makes any; Take returns
  // nullptr).
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
  // Why the pool stopped making cells on its own ("" while it works): a spec with a
  // persistent workspace, or the last creation error while it backs off.
  std::string status() const;

 private:
  void Loop(std::stop_token stop);
  // What the pool lacks now, ready cells first (under mu_): 0 none, 1 ready, 2 parked.
  int LackingLocked() const;
  // A cell of `parked` kind made with a fresh spec (and prepared when ready); outside mu_.
  // `persistent` is set when the spec names a persistent workspace (nothing is made).
  Result<std::unique_ptr<CellInstance>> Make(bool parked, std::stop_token stop,
                                             std::string& persistent);
  // The first live cell of `queue`, or the one of that kind being made once ready.
  std::unique_ptr<CellInstance> TakeFrom(bool parked, std::chrono::milliseconds max_wait);

  const SpecFactory factory_;
  const std::shared_ptr<const CellBackend> backend_;
  const size_t target_;
  const Prepare prepare_;
  const size_t parked_target_;  // 0 when the backend cannot park
  mutable std::mutex mu_;
  std::condition_variable_any changed_;
  std::deque<std::unique_ptr<CellInstance>> ready_;   // under mu_
  std::deque<std::unique_ptr<CellInstance>> parked_;  // under mu_
  bool making_ = false;                               // under mu_
  bool making_parked_ = false;                        // under mu_: the one being made parks
  bool disabled_ = false;                             // under mu_: never again
  size_t pauses_ = 0;                                 // under mu_
  std::string status_;                                // under mu_
  std::jthread thread_;
};

}  // namespace mcpcell::sandbox
