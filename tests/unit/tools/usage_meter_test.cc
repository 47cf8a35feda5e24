// UsageMeter: memory integrated over time, counters carried over when the cell is replaced,
// calls counted by tool.
#include "tools/usage_meter.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mcpcell::tools {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kGiB = 1ull << 30;

TEST(UsageMeter, IntegratesMemoryOverTimeBetweenSamples) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.Sample({.at = t0, .cell_id = "c1", .memory_current_bytes = kGiB});
  m.Sample({.at = t0 + seconds(10), .cell_id = "c1", .memory_current_bytes = kGiB});
  // A rise from 1 to 3 GiB over 4 s: the trapezoid is 2 GiB * 4 s.
  m.Sample({.at = t0 + seconds(14),
            .cell_id = "c1",
            .memory_current_bytes = 3 * kGiB,
            .memory_peak_bytes = 3 * kGiB});
  SessionUsage u = m.Snapshot(t0 + seconds(20));
  EXPECT_DOUBLE_EQ(u.memory_gib_s, 10.0 + 8.0);
  EXPECT_EQ(u.peak_memory_bytes, 3 * kGiB);
  EXPECT_DOUBLE_EQ(u.wall_active_s, 20.0);
  EXPECT_DOUBLE_EQ(u.wall_paused_s, 0.0);
}

TEST(UsageMeter, CarriesTheOldCellsTotalsWhenTheCellIsReplaced) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.Sample({.at = t0,
            .cell_id = "c1",
            .cpu_ns = 1'000'000'000,
            .egress_up_bytes = 100,
            .egress_down_bytes = 1000});
  m.Sample({.at = t0 + seconds(1),
            .cell_id = "c1",
            .cpu_ns = 2'500'000'000,
            .egress_up_bytes = 150,
            .egress_down_bytes = 2000});
  // The replacement starts from zero: its counters add to what the first cell used.
  m.Sample({.at = t0 + seconds(2),
            .cell_id = "c2",
            .cpu_ns = 500'000'000,
            .egress_up_bytes = 10,
            .egress_down_bytes = 20});
  SessionUsage u = m.Snapshot(t0 + seconds(3));
  EXPECT_DOUBLE_EQ(u.cpu_s, 3.0);
  EXPECT_EQ(u.egress_up_bytes, 160u);
  EXPECT_EQ(u.egress_down_bytes, 2020u);
}

TEST(UsageMeter, ALateSampleNeverTakesCountersBack) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.Sample({.at = t0 + seconds(2), .cell_id = "c1", .cpu_ns = 2'000'000'000});
  m.Sample({.at = t0 + seconds(1), .cell_id = "c1", .cpu_ns = 1'000'000'000});
  EXPECT_DOUBLE_EQ(m.Snapshot(t0 + seconds(3)).cpu_s, 2.0);
}

TEST(UsageMeter, CountsCallsByTool) {
  UsageMeter m(Clock::now());
  m.CountCall("run_code");
  m.CountCall("run_code");
  m.CountCall("read_file");
  SessionUsage u = m.Snapshot(Clock::now());
  EXPECT_EQ(u.calls_by_tool["run_code"], 2u);
  EXPECT_EQ(u.calls_by_tool["read_file"], 1u);
  EXPECT_EQ(u.ToJson()["calls_by_tool"]["run_code"], 2);
}

TEST(UsageMeters, OneMeterPerSessionTakenAtItsEnd) {
  UsageMeters meters;
  auto a = meters.For("s1");
  EXPECT_EQ(meters.For("s1"), a);
  EXPECT_NE(meters.For("s2"), a);
  EXPECT_EQ(meters.Take("s1"), a);
  EXPECT_EQ(meters.Find("s1"), nullptr);
  EXPECT_EQ(meters.All().size(), 1u);
}

// Storage is a level: the latest reading, kept by samples that carry none.
TEST(UsageMeter, StorageIsTheLatestReading) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.Sample({.at = t0, .cell_id = "c1", .storage_bytes = 8192});
  m.Sample({.at = t0 + seconds(1), .cell_id = "c1"});
  EXPECT_EQ(m.Snapshot(t0 + seconds(1)).storage_bytes, 8192u);
  m.Sample({.at = t0 + seconds(2), .cell_id = "c2", .storage_bytes = 4096});
  EXPECT_EQ(m.Snapshot(t0 + seconds(2)).storage_bytes, 4096u);
  EXPECT_EQ(m.Snapshot(t0 + seconds(2)).ToJson()["storage_bytes"], 4096);
}

// Storage is the workspace's reading plus the snapshots the session made while they exist;
// deleting one it does not hold (another session's) changes nothing.
TEST(UsageMeter, StorageAddsTheSessionsSnapshotsUntilTheyAreDeleted) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.Sample({.at = t0, .cell_id = "c1", .storage_bytes = 8192});
  m.SnapshotStored("snap-a", 100000);
  m.SnapshotStored("snap-b", 50000);
  EXPECT_EQ(m.Snapshot(t0).storage_bytes, 8192u + 150000u);
  m.SnapshotRemoved("someone-elses");
  EXPECT_EQ(m.Snapshot(t0).storage_bytes, 8192u + 150000u);
  m.SnapshotRemoved("snap-a");
  EXPECT_EQ(m.Snapshot(t0).storage_bytes, 8192u + 50000u);
  m.Sample({.at = t0 + seconds(1), .cell_id = "c2", .storage_bytes = 0});  // a new cell
  EXPECT_EQ(m.Snapshot(t0 + seconds(1)).ToJson()["storage_bytes"], 50000);
}

// Allocated blocks of each inode once (a hard link is not counted twice), a symbolic link
// not followed; a missing directory is an error naming it.
TEST(DirectoryBytes, CountsAllocatedBlocksOfEachInodeOnce) {
  char tmpl[] = "/tmp/mcpcell-dirbytes-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto empty = DirectoryBytes(dir);
  ASSERT_TRUE(empty) << empty.error().message;
  std::filesystem::create_directory(dir + "/sub");
  std::ofstream(dir + "/sub/big") << std::string(100000, 'x');
  std::filesystem::create_hard_link(dir + "/sub/big", dir + "/link");
  std::filesystem::create_symlink("/usr", dir + "/usr");
  auto bytes = DirectoryBytes(dir);
  ASSERT_TRUE(bytes) << bytes.error().message;
  // The file's blocks (at least its size, at most a few blocks more) on top of the
  // directories' own, once although two names reach it; /usr is not walked.
  EXPECT_GE(*bytes - *empty, 100000u);
  EXPECT_LT(*bytes - *empty, 200000u);
  std::filesystem::remove_all(dir);
  auto missing = DirectoryBytes(dir);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(dir), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::tools
