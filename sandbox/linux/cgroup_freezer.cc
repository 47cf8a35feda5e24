// The cgroup freezer, v2 (cgroup.freeze + cgroup.events) and v1 (freezer.state): what
// pausing a cell does to its processes. See cgroup_fs.h for the contract.
#include <time.h>

#include <string>

#include "sandbox/linux/cgroup_fs.h"

namespace mcpcell::sandbox::cgroupfs {
namespace {

constexpr long kPollNs = 200000;  // between reads of the state file while waiting

// Polls `read_state` until it returns `want`, an error, or `timeout_ms` passes. `last`
// receives the last state read (for the timeout's message). `nudge(round)`, called before
// every read after the first, may write the state file again.
template <typename Read, typename Nudge>
Status WaitForState(Read read_state, Nudge nudge, const std::string& want, int timeout_ms,
                    std::string* last) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int round = 0;; ++round) {
    if (round > 0) nudge(round);
    Result<std::string> state = read_state();
    if (!state) return state.error();
    *last = *state;
    if (*state == want) return Ok();
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long elapsed_ms =
        (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (elapsed_ms >= timeout_ms) return Error::Msg("timed out");
    timespec pause{0, kPollNs};
    nanosleep(&pause, nullptr);
  }
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Status SetFrozenV2(const std::string& dir, bool frozen, int timeout_ms) {
  const std::string value = frozen ? "1" : "0";
  if (Status s = WriteFile(dir, "cgroup.freeze", value); !s) return s;
  std::string last;
  auto read_frozen = [&]() -> Result<std::string> {
    Result<std::string> events = ReadFile(dir, "cgroup.events");
    if (!events) return events.error();
    Result<uint64_t> v = ParseKeyed(*events, "frozen", dir + "/cgroup.events");
    if (!v) return v.error();
    return std::to_string(*v);
  };
  Status waited = WaitForState(
      read_frozen, [](int) {}, value, timeout_ms, &last);
  if (waited) return Ok();
  Error e = Error::Msg(dir + "/cgroup.events: still \"frozen " + last + "\" " +
                       std::to_string(timeout_ms) + " ms after writing " + value +
                       " to cgroup.freeze (" + waited.error().message + ")");
  if (frozen) (void)WriteFile(dir, "cgroup.freeze", "0");  // do not leave it half frozen
  return e;
}

Status SetFrozenV1(const std::string& freezer_dir, bool frozen, int timeout_ms) {
  const std::string want = frozen ? "FROZEN" : "THAWED";
  if (Status s = WriteFile(freezer_dir, "freezer.state", want); !s) return s;
  std::string last;
  auto read_state = [&]() -> Result<std::string> {
    Result<std::string> state = ReadFile(freezer_dir, "freezer.state");
    if (!state) return state.error();
    return Trimmed(*state);
  };
  // A v1 freeze can stay FREEZING for good when a task was between states as the kernel
  // went through the list (a fork in flight, a vfork parent): writing FROZEN again sweeps
  // the tasks once more, and now and then a short thaw lets such a task move on first.
  auto nudge = [&](int round) {
    if (!frozen || last == want) return;
    if (round % 250 == 0) {
      (void)WriteFile(freezer_dir, "freezer.state", "THAWED");
      timespec settle{0, 2000000};
      nanosleep(&settle, nullptr);
    }
    if (round % 25 == 0 || round % 250 == 0) (void)WriteFile(freezer_dir, "freezer.state", want);
  };
  Status waited = WaitForState(read_state, nudge, want, timeout_ms, &last);
  if (waited) return Ok();
  Error e = Error::Msg(freezer_dir + "/freezer.state: still \"" + last + "\" " +
                       std::to_string(timeout_ms) + " ms after writing " + want + " (" +
                       waited.error().message + ")");
  if (frozen) (void)WriteFile(freezer_dir, "freezer.state", "THAWED");
  return e;
}

}  // namespace mcpcell::sandbox::cgroupfs
