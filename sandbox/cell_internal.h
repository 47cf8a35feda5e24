// What the files of Cell share and nothing else includes: Cell::Impl (the steps of
// Create, as static functions with access to the Cell) and the timer of the server's steps.
// cell.cc is Create and the host-side preparation (dirs, ids, workspace, cgroup, device
// nodes); cell_launch.cc clones the child and starts cell init up to Ready;
// cell_destroy.cc is Destroy and ReapOrphans.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/cell.h"

namespace mcpcell::sandbox {
namespace cell_internal {

using Clock = std::chrono::steady_clock;

inline uint64_t MicrosSince(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// Times the server's steps into SetupTimings.
class ServerSteps {
 public:
  explicit ServerSteps(SetupTimings& t) : timings_(t), last_(Clock::now()) {}
  void Mark(const char* name) {
    timings_.steps_us.emplace_back(name, MicrosSince(last_));
    last_ = Clock::now();
  }

 private:
  SetupTimings& timings_;
  Clock::time_point last_;
};

// The steps of a launch, in order (cell_launch.cc). kChild* run in the cloned child.
enum class LaunchStep : int {
  kNone = 0,
  kPrepare,
  kCgroup,
  kClone,
  kChildSignals,
  kChildCredentials,
  kChildFds,
  kChildExec,
  kInitRecord,
  kIdMaps,
  kGo,
  kRootOrder,
  kHandOver,
  kReady,
};

// Test seam for the leak tests of every launch step (tests/integration/cell_launch_test.cc):
// the next launch that reaches `step` fails there with `err`, as if that step's call had
// returned it; then the seam disarms. Process-wide; one armed step at a time.
void FailNextLaunchAt(LaunchStep step, int err);
// The armed failure for `step` (and disarms it), or Ok. A relaxed atomic load otherwise.
Status InjectedLaunchFailure(LaunchStep step, const char* what);
// Whether one of the child's steps is armed: its LaunchStep and errno, disarmed.
LaunchStep TakeChildLaunchFailure(int& err);

}  // namespace cell_internal

struct Cell::Impl {
  // Create and CreateParked.
  static Result<std::unique_ptr<Cell>> Make(const CellSpec& spec, const CellCreateOptions& options,
                                            bool park);
  static Status MakeDirs(Cell& c, const CellCreateOptions& options);
  static Status ClaimIds(Cell& c);
  static Status PrepareWorkspace(Cell& c);
  static bool CgroupBeforeClone(const CellCreateOptions& options);
  static Status CreateCgroupFor(Cell& c, bool skip);
  static std::string MakeDeviceNodes(Cell& c);
  static Status WriteMapsFor(Cell& c);
  struct Launch;
  static Status PrepareLaunch(Cell& c, const CellCreateOptions& options, Launch& l);
  static Status CloneChild(Cell& c, const CellCreateOptions& options, const Launch& l);
  static Result<std::vector<UniqueFd>> OpenLayerMounts(Cell& c,
                                                       const std::vector<CellLayer>& layers);
  static Status SendOrder(int sock, char tag, int first, const std::vector<UniqueFd>& mounts);
  static Status SendRootOrder(Cell& c, Launch& l);
  static Status HandOver(Cell& c, Launch& l, cell_internal::ServerSteps& steps);
  static Status WaitExec(Launch& l);
  static Status StartInit(Cell& c, const CellCreateOptions& options,
                          cell_internal::ServerSteps& steps, UniqueFd& control);
  static Status WaitReady(Cell& c, std::chrono::milliseconds timeout, int control_fd);
  static void OpenChannel(Cell& c, UniqueFd control);
  static Result<UniqueFd> SpecMemfd(const CellSpec& spec);
};

}  // namespace mcpcell::sandbox
