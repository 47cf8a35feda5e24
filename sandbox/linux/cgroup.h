// The cgroup of a cell: memory (swap off), pids and cpu limits, usage, kill-all, removal.
//
// Each cell gets its own cgroup at <server's own cgroup>/mcpcell/<cell_id>, one directory in
// the unified hierarchy (v2: memory.max, memory.swap.max=0, pids.max, cpu.max, cgroup.kill)
// or one per controller (v1: memory with memsw so swap cannot extend the limit, pids, cpu
// with a CFS quota, cpuacct for usage, freezer for an atomic kill). The server creates it
// before cloning the cell and adds the cell's pid 1 before that process creates its cgroup
// namespace, so every process of the cell is inside and sees it as its root.
//
// Ownership: Cell (sandbox/cell.cc) owns the Cgroup; Destroy kills what is left, waits for
// it to be gone and removes the directories; the destructor does not act (destroy is
// explicit so errors are reported). Threading: a Cgroup may be used from any thread, one
// caller at a time; creation functions are thread-safe with respect to other cells.
// When the host offers no usable cgroup (unprivileged, no delegation) CreateCellCgroup
// fails with the reason and the cell runs with "limits not enforced: <reason>".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace mcpcell::sandbox {

// 0 means unlimited for every field.
struct CgroupLimits {
  uint64_t memory_max_bytes = 0;
  uint64_t pids_max = 0;
  uint32_t cpu_millicores = 0;  // 1000 = one full CPU
};

// Checks values a cell can live with; the message names the field ("limits.pids_max: ...").
// CreateCellCgroup and CreateCgroupV1/V2 call it; spec validation may call it earlier.
Status ValidateCgroupLimits(const CgroupLimits& limits);

struct CgroupUsage {
  uint64_t cpu_usage_ns = 0;
  uint64_t memory_current_bytes = 0;
  uint64_t memory_peak_bytes = 0;  // high-water mark since creation
  uint64_t oom_kill_count = 0;     // processes killed by the cgroup's OOM killer
  uint64_t pids_current = 0;
  uint64_t pids_limit_hits = 0;  // forks refused by pids.max (v2 pids.events "max")
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Moves `pid` (the whole process) into the cgroup, in every controller.
  virtual Status AddProcess(pid_t pid) = 0;
  virtual Result<CgroupUsage> Usage() const = 0;
  // Only the OOM-kill counter (one file: checked before and after every exec).
  virtual Result<uint64_t> OomKillCount() const = 0;
  // SIGKILLs every process in the cgroup atomically (v2 cgroup.kill, v1 freeze-kill-thaw);
  // returns once the signal is sent, not once they are reaped.
  virtual Status KillAll() = 0;
  // Pause: stops every process of the cgroup where it is (v2 cgroup.freeze, v1 the freezer
  // controller); they keep their memory and use no CPU until Thaw. Returns once the kernel
  // reports the cgroup frozen, or (bounded wait) an error naming the file, the cgroup then
  // thawed again. A frozen cgroup can still be killed and destroyed (KillAll thaws on v1).
  virtual Status Freeze() = 0;
  // Resumes a frozen cgroup; returns once the kernel reports it thawed. Ok if not frozen.
  virtual Status Thaw() = 0;
  // KillAll, waits (bounded) until the cgroup is empty, removes its directories.
  // Idempotent; after it, Paths() no longer exist.
  virtual Status Destroy() = 0;
  // The cgroup's directories (one for v2, one per controller for v1).
  virtual std::vector<std::string> Paths() const = 0;
  // v2: an O_DIRECTORY fd on the cgroup for clone3(CLONE_INTO_CGROUP); -1 for v1.
  virtual int DirFd() const = 0;
  // v1: O_WRONLY|O_CLOEXEC fds on each controller's `tasks` file, for JoinCgroupFromChild;
  // the caller owns and closes them. v2: empty (use DirFd with CLONE_INTO_CGROUP).
  virtual Result<std::vector<int>> OpenJoinFds() const = 0;
  virtual const CgroupLimits& limits() const = 0;
};

// The fast way for a new process to enter a v1 cgroup: called by the (single-threaded)
// child itself, before it runs anything else, with fds from OpenJoinFds() opened by the
// server. It writes "0" (itself) to each `tasks` file and closes the fds. A thread moving
// itself skips the kernel's global cgroup_threadgroup_rwsem, whose write side costs an RCU
// grace period (milliseconds) when the server writes the pid to cgroup.procs
// instead; permission is checked against the credentials that opened the fds, so it works
// from inside the new user namespace. Async-signal-safe (write, close); returns 0 or errno.
// Precondition: the caller has a single thread (so moving the thread moves the process).
int JoinCgroupFromChild(const int* fds, size_t count);

enum class CgroupMode { kV2, kV1, kNone };
const char* CgroupModeName(CgroupMode mode);

struct CgroupHost {
  CgroupMode mode = CgroupMode::kNone;
  bool can_create = false;  // a cell cgroup with all limits can be created here
  std::string detail;       // what was found, and if !can_create, why not
  // Where cells go: v2 one directory; v1 one per controller ("memory" -> "/sys/.../mcpcell").
  std::vector<std::pair<std::string, std::string>> cell_parents;
};

// Reads /proc/self/cgroup and /proc/self/mountinfo; v2 is used when the unified hierarchy
// has the memory, pids and cpu controllers available to us, else v1 if those controllers
// are mounted as v1 hierarchies. Checks (without creating anything) whether we can write.
CgroupHost DetectCgroupHost();

// Creates <own cgroup>/mcpcell/<cell_id> for the detected mode and applies `limits`.
// cell_id must be a single path component of [A-Za-z0-9._-] (not "." or "..").
Result<std::unique_ptr<Cgroup>> CreateCellCgroup(const std::string& cell_id,
                                                 const CgroupLimits& limits);

// The same with explicit parents, for tests and for callers with their own layout.
// v2: `parent` is a directory on a cgroup2 mount whose subtree_control enables what the
// limits need (CreateCellCgroup arranges that). v1: one parent per controller, keys
// "memory", "pids", "cpu", "cpuacct", "freezer"; every key must be present.
Result<std::unique_ptr<Cgroup>> CreateCgroupV2(const std::string& parent, const std::string& name,
                                               const CgroupLimits& limits);
Result<std::unique_ptr<Cgroup>> CreateCgroupV1(
    const std::vector<std::pair<std::string, std::string>>& parents, const std::string& name,
    const CgroupLimits& limits);

// Removes every <own cgroup>/mcpcell/<id> for which is_live(id) is false, killing what
// runs in it first: cgroups left by a crashed predecessor.
Status ReapStaleCgroups(const std::function<bool(const std::string&)>& is_live);

// CPU weights of the server's own threads and of all its cells together, in cgroup v2
// cpu.weight units (1..10000, the kernel's default 100); v1 cpu.shares get weight*1024/100.
struct CpuWeights {
  uint32_t server = 1000;
  uint32_t cells = 100;
};
Status ValidateCpuWeights(const CpuWeights& weights);

// What PlaceServerAboveCells did, for UnplaceServer and the log.
struct ServerPlacement {
  CgroupMode mode = CgroupMode::kNone;
  std::string own_dir;               // the cgroup the server was in (v1: of the cpu controller)
  std::string server_dir;            // <own>/mcpcell-server, where it is now
  std::string cells_dir;             // <own>/mcpcell, the parent of its cells
  std::vector<std::string> enabled;  // v2: controllers it turned on in own's subtree_control
  std::string Describe() const;
};

// Puts the server's CPU scheduling above its cells': moves this whole process into
// <own>/mcpcell-server with cpu weight `weights.server` and gives <own>/mcpcell (the
// parent of every cell) `weights.cells`, creating both. Under CFS/EEVDF group scheduling a
// group's weight is split across CPUs by where its load is, so a cell running at its quota
// on every CPU made the server's group (and, on v1 hosts, its autogroup) light on the CPU
// where a request's thread woke; with its own heavier group the server's threads run
// first. v2: the server and the cells' parent are siblings (no-internal-process rule);
// v1: only the cpu hierarchy changes (memory, pids, freezer stay where they were).
// Fails, with the reason, when the host offers no writable cgroup (unprivileged without
// delegation): the server then runs where it is and says so.
Result<ServerPlacement> PlaceServerAboveCells(const CpuWeights& weights);
// At shutdown, once the cells are gone: moves the server back to where it was and removes
// what placement created and nobody else uses (another server or its cells keep them).
Status UnplaceServer(const ServerPlacement& placement);

}  // namespace mcpcell::sandbox
