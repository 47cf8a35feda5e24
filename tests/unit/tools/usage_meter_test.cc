// UsageMeter: memory integrated over time, counters carried over when the cell is replaced,
// calls counted by tool.
#include "tools/usage_meter.h"

#include <gtest/gtest.h>

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
  m.Sample({.at = t0 + seconds(14), .cell_id = "c1", .memory_current_bytes = 3 * kGiB,
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
  m.Sample({.at = t0, .cell_id = "c1", .cpu_ns = 1'000'000'000, .egress_up_bytes = 100,
            .egress_down_bytes = 1000});
  m.Sample({.at = t0 + seconds(1), .cell_id = "c1", .cpu_ns = 2'500'000'000,
            .egress_up_bytes = 150, .egress_down_bytes = 2000});
  // The replacement starts from zero: its counters add to what the first cell used.
  m.Sample({.at = t0 + seconds(2), .cell_id = "c2", .cpu_ns = 500'000'000,
            .egress_up_bytes = 10, .egress_down_bytes = 20});
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

}  // namespace
}  // namespace mcpcell::tools
