// UsageMeter's paused time: pauses (ended and current) count as wall_paused_s and not as
// active time; unmatched calls change nothing.
#include <gtest/gtest.h>

#include "tools/usage_meter.h"

namespace mcpcell::tools {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

TEST(UsageMeterPause, PausedTimeIsMeteredApartFromActiveTime) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.PauseBegan(t0 + seconds(10));
  m.PauseEnded(t0 + seconds(25));
  m.PauseBegan(t0 + seconds(40));
  // During the second pause: it counts up to now.
  SessionUsage during = m.Snapshot(t0 + seconds(50));
  EXPECT_DOUBLE_EQ(during.wall_paused_s, 25.0);
  EXPECT_DOUBLE_EQ(during.wall_active_s, 25.0);
  m.PauseEnded(t0 + seconds(60));
  SessionUsage after = m.Snapshot(t0 + seconds(100));
  EXPECT_DOUBLE_EQ(after.wall_paused_s, 35.0);
  EXPECT_DOUBLE_EQ(after.wall_active_s, 65.0);
  EXPECT_DOUBLE_EQ(after.ToJson()["wall_paused_s"].get<double>(), 35.0);
}

TEST(UsageMeterPause, UnmatchedPauseCallsChangeNothing) {
  const Clock::time_point t0 = Clock::now();
  UsageMeter m(t0);
  m.PauseEnded(t0 + seconds(5));  // no pause began
  m.PauseBegan(t0 + seconds(10));
  m.PauseBegan(t0 + seconds(20));  // already paused: the first start stands
  m.PauseEnded(t0 + seconds(30));
  SessionUsage u = m.Snapshot(t0 + seconds(40));
  EXPECT_DOUBLE_EQ(u.wall_paused_s, 20.0);
  EXPECT_DOUBLE_EQ(u.wall_active_s, 20.0);
}

}  // namespace
}  // namespace mcpcell::tools
