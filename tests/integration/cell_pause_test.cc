// Pause and resume of a real cell (issue 28): a background counter stops advancing while
// the cell is frozen and continues from where it was once thawed; a frozen cell is
// destroyed without hanging and leaves nothing; through CellSession, a call on a paused
// session thaws it transparently and sees the same processes. Without a cgroup (the
// unprivileged run) a cell cannot be paused and says so.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::Eventually;
using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kCounter =
    "i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.01; done >/dev/null 2>&1 &";

// The counter as the host sees it through the cell's root (no request to the cell, which
// would wait while it is frozen). -1 while the file is missing or being rewritten.
long ReadCounter(pid_t init_pid) {
  std::ifstream f("/proc/" + std::to_string(init_pid) + "/root/tmp/c");
  long v = -1;
  if (!(f >> v)) return -1;
  return v;
}

TEST(CellPause, AFrozenCellsCounterStopsAndContinuesFromWhereItWas) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(made) << made.error().message;
  Cell& cell = **made;
  if (!cell.cgroup()) {
    Status s = cell.Freeze();
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("cannot be paused: it has no cgroup"));
    GTEST_SKIP() << "no cgroup here (unprivileged): pausing is refused, as checked";
  }
  auto started = RunInCell(cell, {"/bin/sh", "-c", kCounter});
  ASSERT_TRUE(started.ok) << started.error;
  ASSERT_TRUE(Eventually([&] { return ReadCounter(cell.init_pid()) >= 3; }));

  Status frozen = cell.Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message;
  EXPECT_TRUE(cell.frozen());
  const long at_freeze = ReadCounter(cell.init_pid());
  const uint64_t cpu_at_freeze = cell.Usage()->cpu_usage_ns;
  std::this_thread::sleep_for(300ms);  // some thirty ticks of the counter, had it run
  EXPECT_EQ(ReadCounter(cell.init_pid()), at_freeze);
  EXPECT_EQ(cell.Usage()->cpu_usage_ns, cpu_at_freeze);

  Status thawed = cell.Thaw();
  ASSERT_TRUE(thawed.ok()) << thawed.error().message;
  EXPECT_FALSE(cell.frozen());
  ASSERT_TRUE(Eventually([&] { return ReadCounter(cell.init_pid()) > at_freeze + 2; }));
  // The same process counted on: a fresh one would have started from 1 again.
  auto read = RunInCell(cell, {"/bin/cat", "/tmp/c"});
  ASSERT_TRUE(read.ok) << read.error;
  EXPECT_GT(std::stol(read.out), at_freeze);
  ASSERT_TRUE(cell.Destroy().ok());
}

TEST(CellPause, AFrozenCellIsDestroyedWithoutHangingAndLeavesNothing) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(made) << made.error().message;
  Cell& cell = **made;
  if (!cell.cgroup()) GTEST_SKIP() << "no cgroup here (unprivileged)";
  ASSERT_TRUE(RunInCell(cell, {"/bin/sh", "-c", kCounter}).ok);
  const std::vector<std::string> paths = cell.cgroup()->Paths();
  ASSERT_TRUE(cell.Freeze().ok());
  Status destroyed = cell.Destroy();
  ASSERT_TRUE(destroyed.ok()) << destroyed.error().message;
  for (const std::string& p : paths) EXPECT_NE(access(p.c_str(), F_OK), 0) << p;
  EXPECT_TRUE(celltest::CellDirNames(state.path()).empty());
}

TEST(CellPause, ASessionPausedWhileIdleIsResumedByTheNextCall) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CellSessionOptions o;
  o.create = TestCreateOptions();
  o.pause_idle = 1ms;
  o.idle_timeout = 1h;
  CellSession session("k", celltest::ProbeFactory(state), o);
  std::string id;
  {
    auto lease = session.Acquire();
    ASSERT_TRUE(lease) << lease.error().message;
    id = lease->id();
    ASSERT_TRUE(RunInCell(*lease, {"/bin/sh", "-c", kCounter}).ok);
  }
  std::this_thread::sleep_for(5ms);
  Status paused = session.PauseIdleCell();
  if (!paused.ok() && paused.error().message.find("no cgroup") != std::string::npos) {
    GTEST_SKIP() << "no cgroup here (unprivileged): " << paused.error().message;
  }
  ASSERT_TRUE(paused.ok()) << paused.error().message;
  ASSERT_TRUE(session.Info().paused);
  std::this_thread::sleep_for(5ms);  // paused for a measurable while
  auto lease = session.Acquire();
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ(lease->id(), id);
  EXPECT_TRUE(lease->replaced_reason().empty());
  auto read = RunInCell(*lease, {"/bin/cat", "/tmp/c"});
  ASSERT_TRUE(read.ok) << read.error;
  EXPECT_GT(std::stol(read.out), 0);
  EXPECT_FALSE(session.Info().paused);
  EXPECT_GT(session.Info().paused_total.count(), 0);
}

}  // namespace
}  // namespace mcpcell::sandbox
