// How many cells this host can hold, from the kernel and cgroup limits that each live cell
// draws on: tasks (kernel.pid_max, kernel.threads-max, the cgroup's pids.max), the
// server's file descriptors (its RLIMIT_NOFILE, fs.file-max), memory (MemAvailable), and
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

HostCapacity AssessHostCapacity(const TextSource& read, const CellFootprint& per_cell = {});
std::string FormatHostCapacity(const HostCapacity& capacity);

}  // namespace mcpcell
