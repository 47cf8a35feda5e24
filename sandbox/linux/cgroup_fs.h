// cgroupfs files: reading, writing and parsing them, shared by cgroup_v1.cc and
// cgroup_v2.cc. Internal to sandbox/linux (users include cgroup.h). The format functions are
// pure or read a given directory, so tests can check them against a fake tree in a temp dir;
// everything that mkdirs, moves processes or kills runs only against a real cgroupfs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sandbox/linux/cgroup.h"

namespace mcpcell::sandbox::cgroupfs {

// The CFS bandwidth period of cpu limits (v1 cpu.cfs_period_us, v2 cpu.max's second
// field): 10 ms, not the kernel's default 100 ms. Within a period a cell may use its whole
// quota at once on every CPU and is then stalled until the period ends, so the period is
// how long a cell at its limit can hold all CPUs. With 100 ms, a fork bomb at a 1-CPU
// quota on a 2-CPU host held both CPUs for half a period at a time, and another session's
// `run_command true` waited behind it (bench/isolation_under_attack: p99 up to 18x quiet);
// with 10 ms the bursts are a tenth as long. The average a cell gets is the same.
inline constexpr uint64_t kCpuPeriodUs = 10000;
// The kernel's bounds: quota >= 1 ms, period <= 1 s.
inline constexpr uint64_t kMinCpuQuotaUs = 1000;
inline constexpr uint64_t kMaxCpuPeriodUs = 1000000;

// The quota and period for `millicores` (> 0): kCpuPeriodUs, lengthened where the quota
// would fall below the kernel's minimum, so small shares stay exact (10 millicores: 1 ms
// per 100 ms) instead of being rounded up.
struct CpuBandwidth {
  uint64_t quota_us;
  uint64_t period_us;
};
CpuBandwidth CpuBandwidthFor(uint32_t millicores);

// Writes `value` to dir/file (no O_CREAT: a missing file means a missing controller).
Status WriteFile(const std::string& dir, const std::string& file, const std::string& value);
// Reads dir/file (up to 1 MiB).
Result<std::string> ReadFile(const std::string& dir, const std::string& file);
bool FileExists(const std::string& dir, const std::string& file);

// "123\n" -> 123; "max\n" -> UINT64_MAX.
Result<uint64_t> ParseValue(const std::string& text, const std::string& what);
// Flat keyed files (memory.events, cpu.stat, pids.events, memory.oom_control):
// "key value" lines; returns the value of `key`, or nullopt-like error if absent.
Result<uint64_t> ParseKeyed(const std::string& text, const std::string& key,
                            const std::string& what);
// cgroup.procs: one pid per line.
Result<std::vector<pid_t>> ParsePids(const std::string& text, const std::string& what);
// Space-separated controller lists (cgroup.controllers, cgroup.subtree_control).
std::vector<std::string> ParseControllerList(const std::string& text);

// The writes that apply `limits` in a new cgroup, in order: (file, value).
std::vector<std::pair<std::string, std::string>> V2LimitWrites(const CgroupLimits& limits,
                                                               bool swap_file_present);
// v1: (controller, file, value), in order (memory.limit_in_bytes before memsw).
struct V1Write {
  std::string controller, file, value;
};
std::vector<V1Write> V1LimitWrites(const CgroupLimits& limits, bool memsw_present);

// Usage from a v2 cgroup directory / from v1 per-controller directories. Files of
// controllers that are not there read as zero (v2 without the memory controller).
Result<CgroupUsage> ReadV2Usage(const std::string& dir);
Result<CgroupUsage> ReadV1Usage(const std::string& memory_dir, const std::string& pids_dir,
                                const std::string& cpuacct_dir);

// One counter of a flat keyed file that is read again and again: memory.events' (v2) or
// memory.oom_control's (v1) oom_kill, read before and after every exec. The file is opened
// at the first read and kept; each read is one pread at offset 0, which makes cgroupfs
// generate the file afresh (instead of a path walk, open, read, read and close, which
// were about a third of the server's CPU per exec). Thread-safe. A file that does not
// exist reads as zero (and is looked for again next time).
class KeyedCounterFile {
 public:
  KeyedCounterFile(std::string dir, std::string file, std::string key);
  ~KeyedCounterFile();
  KeyedCounterFile(const KeyedCounterFile&) = delete;
  KeyedCounterFile& operator=(const KeyedCounterFile&) = delete;
  Result<uint64_t> Read() const;

 private:
  const std::string path_, key_;
  mutable std::mutex mu_;
  mutable int fd_ = -1;  // under mu_
};

// Sends SIGKILL to every pid in dir/cgroup.procs; returns how many were listed.
Result<size_t> KillListed(const std::string& dir);
// Polls dir/cgroup.procs until it is empty or `timeout_ms` passes.
Status WaitEmpty(const std::string& dir, int timeout_ms);
// rmdir with a short retry on EBUSY (the kernel releases a cgroup just after its last task
// exits); ENOENT counts as success.
Status RemoveDir(const std::string& dir, int timeout_ms);

// The freezer (cgroup_freezer.cc). v2: writes "1"/"0" to dir/cgroup.freeze and waits
// until dir/cgroup.events says "frozen 1"/"frozen 0". v1: writes FROZEN/THAWED to
// dir/freezer.state and waits until it reads back that state (FREEZING while tasks are
// still being stopped). Both wait at most `timeout_ms`, then fail naming the file and the
// state it still showed; a freeze that timed out is undone (thawed) before returning.
Status SetFrozenV2(const std::string& dir, bool frozen, int timeout_ms);
Status SetFrozenV1(const std::string& freezer_dir, bool frozen, int timeout_ms);
// How long Cgroup::Freeze/Thaw wait for the kernel to report the new state.
inline constexpr int kFreezeWaitMs = 2000;

// Attach to cgroups that already exist (for ReapStaleCgroups).
std::unique_ptr<Cgroup> OpenExistingV2(const std::string& dir);
std::unique_ptr<Cgroup> OpenExistingV1(std::vector<std::pair<std::string, std::string>> dirs);

// DetectCgroupHost on given /proc/self/mountinfo and /proc/self/cgroup texts (the cgroupfs
// directories they point to are still looked at: cgroup.controllers, write access).
CgroupHost DetectCgroupHostFrom(const std::string& mountinfo, const std::string& proc_self_cgroup);

// Turns on `controllers` in dir/cgroup.subtree_control (those not on yet); `enabled`, if
// given, receives the ones this call turned on.
Status EnableControllers(const std::string& dir, const std::vector<std::string>& controllers,
                         std::vector<std::string>* enabled = nullptr);

// PlaceServerAboveCells / UnplaceServer against given directories: `own` is the server's
// cgroup (v2) or its cpu cgroup (v1), `pid` the process to move. Works on a fake tree whose
// files exist (tests); the real ones run against the host's cgroupfs.
Result<ServerPlacement> PlaceServerIn(CgroupMode mode, const std::string& own, pid_t pid,
                                      const CpuWeights& weights);
Status UnplaceServerFrom(const ServerPlacement& placement, pid_t pid);
// The weight file and value of a cpu weight (v2 cpu.weight; v1 cpu.shares, scaled).
std::pair<std::string, std::string> CpuWeightWrite(CgroupMode mode, uint32_t weight);

}  // namespace mcpcell::sandbox::cgroupfs
