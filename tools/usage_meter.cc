#include "tools/usage_meter.h"

#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <utility>

namespace mcpcell::tools {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

Result<uint64_t> DirectoryBytes(const std::string& dir) {
  // nftw's callback takes no context: the walk's state lives in thread-local variables.
  static thread_local uint64_t total;
  static thread_local std::set<std::pair<dev_t, ino_t>>* seen;
  std::set<std::pair<dev_t, ino_t>> inodes;
  total = 0;
  seen = &inodes;
  auto add = [](const char*, const struct stat* st, int type, struct FTW*) {
    if (type != FTW_NS && seen->insert({st->st_dev, st->st_ino}).second)
      total += static_cast<uint64_t>(st->st_blocks) * 512;
    return 0;
  };
  if (::nftw(dir.c_str(), add, 32, FTW_PHYS | FTW_MOUNT) != 0)
    return Error::Sys("walking \"" + dir + "\"");
  return total;
}

void UsageMeter::Sample(const UsageSample& s) {
  std::lock_guard lock(mu_);
  if (s.cell_id != cell_id_) {
    // A new cell: the old one's counters are final (its last sample), carry them over; the
    // memory curve starts again from this cell's first sample.
    carried_.cpu_ns += cell_.cpu_ns;
    carried_.egress_up += cell_.egress_up;
    carried_.egress_down += cell_.egress_down;
    cell_ = {};
    cell_id_ = s.cell_id;
    have_sample_ = false;
  }
  if (have_sample_ && s.at > last_at_) {
    memory_byte_s_ +=
        (static_cast<double>(last_memory_) + s.memory_current_bytes) / 2 * Seconds(s.at - last_at_);
  }
  if (!have_sample_ || s.at >= last_at_) {
    last_at_ = s.at;
    last_memory_ = s.memory_current_bytes;
  }
  have_sample_ = true;
  // Counters only grow within a cell; a late sample never takes them back.
  cell_.cpu_ns = std::max(cell_.cpu_ns, s.cpu_ns);
  cell_.egress_up = std::max(cell_.egress_up, s.egress_up_bytes);
  cell_.egress_down = std::max(cell_.egress_down, s.egress_down_bytes);
  peak_ = std::max({peak_, s.memory_peak_bytes, s.memory_current_bytes});
  if (s.storage_bytes) storage_ = *s.storage_bytes;
}

void UsageMeter::CountCall(const std::string& tool) {
  std::lock_guard lock(mu_);
  ++calls_[tool];
}

void UsageMeter::PauseBegan(std::chrono::steady_clock::time_point at) {
  std::lock_guard lock(mu_);
  if (!paused_since_) paused_since_ = at;
}

void UsageMeter::PauseEnded(std::chrono::steady_clock::time_point at) {
  std::lock_guard lock(mu_);
  if (!paused_since_) return;
  if (at > *paused_since_) paused_ += at - *paused_since_;
  paused_since_.reset();
}

void UsageMeter::SnapshotStored(const std::string& id, uint64_t bytes) {
  std::lock_guard lock(mu_);
  snapshots_[id] = bytes;
}

void UsageMeter::SnapshotRemoved(const std::string& id) {
  std::lock_guard lock(mu_);
  snapshots_.erase(id);
}

SessionUsage UsageMeter::Snapshot(std::chrono::steady_clock::time_point now) const {
  std::lock_guard lock(mu_);
  SessionUsage u;
  u.cpu_s = static_cast<double>(carried_.cpu_ns + cell_.cpu_ns) / 1e9;
  u.memory_gib_s = memory_byte_s_ / kGiB;
  u.peak_memory_bytes = peak_;
  const double wall = now > started_ ? Seconds(now - started_) : 0;
  std::chrono::steady_clock::duration paused = paused_;
  if (paused_since_ && now > *paused_since_) paused += now - *paused_since_;
  u.wall_paused_s = std::min(wall, Seconds(paused));
  u.wall_active_s = wall - u.wall_paused_s;
  u.egress_up_bytes = carried_.egress_up + cell_.egress_up;
  u.egress_down_bytes = carried_.egress_down + cell_.egress_down;
  u.storage_bytes = storage_;
  for (const auto& [id, bytes] : snapshots_) u.storage_bytes += bytes;
  u.calls_by_tool = calls_;
  return u;
}

std::shared_ptr<UsageMeter> UsageMeters::For(const std::string& session) {
  std::lock_guard lock(mu_);
  auto& meter = meters_[session];
  if (!meter) meter = std::make_shared<UsageMeter>(std::chrono::steady_clock::now());
  return meter;
}

std::shared_ptr<UsageMeter> UsageMeters::Find(const std::string& session) const {
  std::lock_guard lock(mu_);
  auto it = meters_.find(session);
  return it == meters_.end() ? nullptr : it->second;
}

std::shared_ptr<UsageMeter> UsageMeters::Take(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = meters_.find(session);
  if (it == meters_.end()) return nullptr;
  auto meter = std::move(it->second);
  meters_.erase(it);
  return meter;
}

std::vector<std::pair<std::string, std::shared_ptr<UsageMeter>>> UsageMeters::All() const {
  std::lock_guard lock(mu_);
  return {meters_.begin(), meters_.end()};
}

}  // namespace mcpcell::tools
