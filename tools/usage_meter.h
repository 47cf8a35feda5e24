// UsageMeter: what one MCP session has used, for metering (docs/audit.md "Metering"): CPU
// seconds, memory GiB-seconds, peak memory, wall seconds, egress bytes, the workspace's
// bytes on disk (when a sample carries a reading) and calls by tool, as
// audit::UsageFigures (the records' and the report's struct). Fed with samples of its cell's
// cumulative counters (cgroup CPU and memory, the egress proxy's bytes) at each call's end, at each
// usage interval and when the cell is destroyed; memory is integrated over time between samples
// (trapezoids), and when the session's cell is replaced the old cell's totals are carried over, so
// the figures cover the session, not one cell. Time while the session's cell is paused
// (PauseBegan..PauseEnded) is wall_paused_s, and active time excludes it. storage_bytes is
// the workspace's last reading plus the stored bytes of the snapshots the session made and
// that still exist (SnapshotStored..SnapshotRemoved). UsageMeters holds one meter per
// session id.
// Threading: every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "audit/usage_report.h"
#include "base/status.h"

namespace mcpcell::tools {

// A cell's cumulative counters at one moment (since the cell was created).
struct UsageSample {
  std::chrono::steady_clock::time_point at;
  std::string cell_id;
  uint64_t cpu_ns = 0;
  uint64_t memory_current_bytes = 0;
  uint64_t memory_peak_bytes = 0;
  uint64_t egress_up_bytes = 0;
  uint64_t egress_down_bytes = 0;
  // The workspace's bytes on disk now (DirectoryBytes), when read for this sample: only at
  // moments that report usage (not after every exec, where the walk would cost).
  std::optional<uint64_t> storage_bytes = std::nullopt;
};

using SessionUsage = audit::UsageFigures;

// Bytes on disk (allocated blocks, each inode once) of the files under `dir`, without
// following symbolic links or leaving its filesystem. Errors name the directory.
Result<uint64_t> DirectoryBytes(const std::string& dir);

class UsageMeter {
 public:
  explicit UsageMeter(std::chrono::steady_clock::time_point started) : started_(started) {}

  void Sample(const UsageSample& sample);
  void CountCall(const std::string& tool);
  // The session's cell was paused at `at` / its pause ended at `at` (resumed, or destroyed
  // while paused). A second PauseBegan without PauseEnded, or a PauseEnded without a pause,
  // changes nothing.
  void PauseBegan(std::chrono::steady_clock::time_point at);
  void PauseEnded(std::chrono::steady_clock::time_point at);
  // A snapshot the session made (its id and stored bytes, as the quota counts them), and
  // one deleted (by any session of the tenant: an id the meter does not hold changes
  // nothing). Both count in storage_bytes while the snapshot exists.
  void SnapshotStored(const std::string& id, uint64_t bytes);
  void SnapshotRemoved(const std::string& id);
  // The usage so far; wall time runs to `now`.
  SessionUsage Snapshot(std::chrono::steady_clock::time_point now) const;

 private:
  struct CellTotals {  // the last sample of one cell
    uint64_t cpu_ns = 0, egress_up = 0, egress_down = 0;
  };
  const std::chrono::steady_clock::time_point started_;
  mutable std::mutex mu_;
  // Totals of the cells already replaced, and the current cell's last counters.
  CellTotals carried_;
  std::string cell_id_;
  CellTotals cell_;
  bool have_sample_ = false;
  std::chrono::steady_clock::time_point last_at_;
  uint64_t last_memory_ = 0;
  double memory_byte_s_ = 0;
  uint64_t peak_ = 0;
  uint64_t storage_ = 0;                       // the workspace's last reading
  std::map<std::string, uint64_t> snapshots_;  // bytes by snapshot id
  std::map<std::string, uint64_t> calls_;
  std::chrono::steady_clock::duration paused_{0};                      // ended pauses
  std::optional<std::chrono::steady_clock::time_point> paused_since_;  // the current one
};

class UsageMeters {
 public:
  // The meter of `session`, made (started now) on first use.
  std::shared_ptr<UsageMeter> For(const std::string& session);
  // The meter of `session` if there is one, else nullptr.
  std::shared_ptr<UsageMeter> Find(const std::string& session) const;
  // Removes and returns the meter (nullptr when none): at the session's end.
  std::shared_ptr<UsageMeter> Take(const std::string& session);
  std::vector<std::pair<std::string, std::shared_ptr<UsageMeter>>> All() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<UsageMeter>> meters_;
};

}  // namespace mcpcell::tools
