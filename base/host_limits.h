// How many cells this host can hold, from the kernel and cgroup limits that each live cell
// draws on: tasks (kernel.pid_max, kernel.threads-max, the cgroup's pids.max), the
// server's file descriptors (its hard RLIMIT_NOFILE, which `serve` raises its soft limit
// to at start with RaiseFdLimitToHard; fs.file-max), memory (MemAvailable), and
// the namespaces every cell makes (user.max_{user,net,mnt,pid,ipc,uts,cgroup}_namespaces).
// The count is the smallest over those limits of what is free divided by one idle cell's
// share (CellFootprint); the limit that gives it is named "binding". inotify is reported
// beside it: an idle cell uses none, but every instance a cell's program makes counts
// against the limit of the user that made the cell (the kernel charges namespaced users up
// the chain). Used by `mcpcell doctor`; reads go through a TextSource so tests give fake
// /proc texts. No exceptions (base is built without them).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell {

// The text of a /proc or /sys file, or nullopt when it cannot be read.
using TextSource = std::function<std::optional<std::string>(const std::string& path)>;
TextSource RealTextSource();

// What one live session with an idle cell takes from the host; the defaults are measured
// with `http_load --mode hold` (bench/http_load/README.md).
struct CellFootprint {
  uint64_t tasks = 3;          // cell init, and the server's threads per HTTP session
  uint64_t server_fds = 6;     // fds the server holds per live session and cell
  uint64_t memory_kib = 1024;  // host memory per idle cell
};

struct HostLimit {
  std::string name;               // "pids: kernel.pid_max"
  std::string detail;             // "32768 (412 in use)"
  std::optional<uint64_t> cells;  // cells this limit leaves room for; nullopt: not a cap
};

struct HostCapacity {
  std::vector<HostLimit> limits;
  std::optional<uint64_t> cells;        // the smallest; nullopt when nothing could be read
  std::string binding;                  // the name of the limit that gives `cells`
  std::string inotify;                  // the inotify limits, in words (not part of `cells`)
  std::vector<std::string> unreadable;  // files that could not be read or parsed
};

// The soft RLIMIT_NOFILE of this process before and after RaiseFdLimitToHard, and the hard
// one. Each live session holds a few fds (its connection, its cell's channel and egress
// listener), so the usual soft 1024 would cap a server at a few hundred sessions; no part
// of the server uses select(), which the higher limit would break. Cells set their own.
struct FdLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;
  uint64_t hard = 0;
};
Result<FdLimit> RaiseFdLimitToHard();

HostCapacity AssessHostCapacity(const TextSource& read, const CellFootprint& per_cell = {});
std::string FormatHostCapacity(const HostCapacity& capacity);

}  // namespace mcpcell
