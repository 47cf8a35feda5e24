// WarmPool with real cells: a ready cell is handed out at once and works, the pool refills,
// a pooled cell that died is never handed out, a persistent workspace turns the pool off,
// a failing factory makes Take return nullptr (the caller makes its own), a cell is
// prepared before it is handed out, parked cells are finished over a session's layers
// (TakeOver), a burst grows the pool and it shrinks back, and Stop leaves nothing behind.
#include "sandbox/warm_pool.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::Eventually;
using celltest::ProbeFactory;
using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestBackend;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

size_t CellDirs(const std::string& state_dir) { return celltest::CellDirNames(state_dir).size(); }

TEST(WarmPool, HandsOutAReadyCellThatWorksAndRefills) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPool pool(ProbeFactory(state), TestBackend(), 1);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  std::unique_ptr<CellInstance> cell = pool.Take();
  ASSERT_NE(cell, nullptr);
  auto r = celltest::RunInCell(*cell, {"/bin/sh", "-c", "echo hi; id -u"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "hi\n1000\n");
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 1; })) << "refill: " << pool.status();
  std::unique_ptr<CellInstance> second = pool.Take();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->id(), cell->id());
  EXPECT_TRUE(cell->Destroy().ok());
  EXPECT_TRUE(second->Destroy().ok());
  pool.Stop();
  EXPECT_EQ(CellDirs(state.path()), 0u) << "Stop destroys the refilled cell";
}

// While a pause is held no cell is started (mcpcell pool pauses for each run, so the
// refill does not share the CPUs with the run's program), unless the pool is empty; the
// last resume refills.
TEST(WarmPool, NoRefillWhilePausedUnlessEmpty) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPool pool(ProbeFactory(state), TestBackend(), 2);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 2; })) << pool.status();
  pool.PauseRefill();
  pool.PauseRefill();
  std::unique_ptr<CellInstance> first = pool.Take();
  ASSERT_NE(first, nullptr);
  pool.ResumeRefill();
  std::this_thread::sleep_for(300ms);  // a cell takes ~10 ms to make here
  EXPECT_EQ(pool.ready(), 1u) << "one pause is still held";
  EXPECT_EQ(CellDirs(state.path()), 2u) << "no cell was started";
  // The last one taken while paused: an empty pool makes one all the same, and only one.
  std::unique_ptr<CellInstance> second = pool.Take();
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(pool.ready(), 1u) << "paused: no second cell";
  pool.ResumeRefill();
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 2; })) << "refill: " << pool.status();
  EXPECT_TRUE(first->Destroy().ok());
  EXPECT_TRUE(second->Destroy().ok());
  pool.Stop();
  EXPECT_EQ(CellDirs(state.path()), 0u);
}

TEST(WarmPool, KilledWhileWaitingInThePool) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  // A factory that records the ids it made, so the test can find the pooled cell's init.
  std::mutex mu;
  std::vector<std::string> ids;
  WarmPool pool(
      [&](const std::string& id) -> Result<CellSpec> {
        std::lock_guard lock(mu);
        ids.push_back(id);
        CellSpec spec = ProbeSpec(state);
        spec.id = id;
        return spec;
      },
      TestBackend(), 1);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  std::string first;
  {
    std::lock_guard lock(mu);
    first = ids.at(0);
  }
  // The init record names the pooled cell's init pid.
  std::ifstream in(state.path() + "/cells/" + first + "/init");
  long pid = 0;
  in >> pid;
  ASSERT_GT(pid, 1) << "no init record for " << first;
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  std::this_thread::sleep_for(50ms);
  std::unique_ptr<CellInstance> cell = pool.Take(60s);
  if (cell) {
    EXPECT_NE(cell->id(), first) << "a dead pooled cell was handed out";
    EXPECT_TRUE(cell->usable());
    EXPECT_TRUE(cell->Destroy().ok());
  }
  struct stat st;
  EXPECT_NE(::stat((state.path() + "/cells/" + first).c_str(), &st), 0)
      << "the dead pooled cell was destroyed";
}

TEST(WarmPool, PersistentWorkspaceTurnsThePoolOff) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  const std::string ws = state.path() + "/ws";
  ASSERT_EQ(::mkdir(ws.c_str(), 0777), 0);
  WarmPool pool(
      [&](const std::string& id) -> Result<CellSpec> {
        CellSpec spec = ProbeSpec(state);
        spec.id = id;
        spec.workspace_host_dir = ws;
        return spec;
      },
      TestBackend(), 1);
  ASSERT_TRUE(Eventually([&] { return !pool.status().empty(); }));
  EXPECT_THAT(pool.status(), HasSubstr("persistent workspace"));
  EXPECT_EQ(pool.Take(100ms), nullptr);
  EXPECT_EQ(CellDirs(state.path()), 0u);
}

TEST(WarmPool, FailingFactoryMeansNullptrAndAReason) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPool pool([](const std::string&) -> Result<CellSpec> { return Error::Msg("no spec today"); },
                TestBackend(), 1);
  ASSERT_TRUE(Eventually([&] { return !pool.status().empty(); }));
  EXPECT_THAT(pool.status(), HasSubstr("no spec today"));
  EXPECT_EQ(pool.Take(100ms), nullptr);
}

// Prepare runs on each new cell before it is ready (mcpcell pool's warm-ups): what it did is
// there when the cell is taken. A cell it fails on is destroyed, never handed out, and the
// pool says why.
TEST(WarmPool, PrepareRunsBeforeACellIsHandedOutAndAFailureDestroysIt) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  std::atomic<int> prepared{0};
  WarmPool pool(
      ProbeFactory(state), TestBackend(), 1, [&](CellInstance& cell, std::stop_token) -> Status {
        auto r = celltest::RunInCell(cell, {"/bin/sh", "-c", "echo warm > /tmp/prepared"});
        if (!r.ok) return Error::Msg(r.error);
        ++prepared;
        return Ok();
      });
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  std::unique_ptr<CellInstance> cell = pool.Take();
  ASSERT_NE(cell, nullptr);
  auto r = celltest::RunInCell(*cell, {"/bin/cat", "/tmp/prepared"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "warm\n");
  EXPECT_TRUE(cell->Destroy().ok());
  EXPECT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  EXPECT_EQ(prepared.load(), 2);
  pool.Stop();

  WarmPool failing(
      ProbeFactory(state), TestBackend(), 1,
      [](CellInstance&, std::stop_token) -> Status { return Error::Msg("cold forever"); });
  ASSERT_TRUE(Eventually([&] { return !failing.status().empty(); }));
  EXPECT_THAT(failing.status(), HasSubstr("preparing cell"));
  EXPECT_THAT(failing.status(), HasSubstr("cold forever"));
  EXPECT_EQ(failing.Take(100ms), nullptr);
  failing.Stop();
  EXPECT_EQ(CellDirs(state.path()), 0u) << "the cell prepare failed on was destroyed";
}

// A layer dir as the snapshot store keeps one: a file of the sandbox user (1000 on disk).
std::string WorkspaceLayer(const TempStateDir& state) {
  const std::string dir = state.path() + "/layer-ws";
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::ofstream(dir + "/from-layer") << "layered\n";
  EXPECT_EQ(::chown(dir.c_str(), 1000, 1000), 0);
  EXPECT_EQ(::chown((dir + "/from-layer").c_str(), 1000, 1000), 0);
  return dir;
}

TEST(WarmPool, AParkedCellIsFinishedOverTheSessionsLayersAndRefilled) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPool pool(ProbeFactory(state), TestBackend(), 1, {}, 1);
  if (::geteuid() != 0) {
    // Layers need per-cell id ranges: an unprivileged pool parks nothing.
    ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
    EXPECT_EQ(pool.parked(), 0u);
    EXPECT_EQ(pool.TakeOver({{"/workspace", state.path()}}, 0ms), nullptr);
    return;
  }
  const std::string layer = WorkspaceLayer(state);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1 && pool.parked() == 1; })) << pool.status();
  std::unique_ptr<CellInstance> cell = pool.TakeOver({{"/workspace", layer}});
  ASSERT_NE(cell, nullptr) << pool.status();
  EXPECT_FALSE(cell->parked());
  auto r = celltest::RunInCell(*cell, {"/bin/sh", "-c", "cat /workspace/from-layer; id -u"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "layered\n1000\n");
  EXPECT_EQ(pool.ready(), 1u) << "the ready cell stays for sessions without layers";
  EXPECT_TRUE(Eventually([&] { return pool.parked() == 1; })) << "refill: " << pool.status();
  // Layers a cell cannot take: nullptr (the caller makes its own and reports the error),
  // the parked cell is destroyed and the status says why.
  EXPECT_EQ(pool.TakeOver({{"/workspace", state.path() + "/missing"}}), nullptr);
  EXPECT_THAT(pool.status(), HasSubstr("missing"));
  EXPECT_TRUE(cell->Destroy().ok());
  pool.Stop();
  EXPECT_EQ(CellDirs(state.path()), 0u);
}

// Growth with real cells: a burst that drains the pool raises its target, the pool fills
// to it with working cells, and after the demand window it shrinks back to its floor,
// destroying the surplus entirely.
TEST(WarmPool, GrowsWithABurstAndShrinksBackWithRealCells) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPoolOptions options;
  options.floor = 1;
  options.ceiling = 3;
  options.makers = 2;
  options.demand_window = 2s;
  WarmPool pool(ProbeFactory(state), TestBackend(), options);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 1; })) << pool.status();
  std::vector<std::unique_ptr<CellInstance>> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(pool.Take(0ms));  // one hit, two misses
  ASSERT_NE(taken[0], nullptr);
  EXPECT_EQ(pool.target(), 3u);
  ASSERT_TRUE(Eventually([&] { return pool.ready() == 3; })) << pool.status();
  std::unique_ptr<CellInstance> cell = pool.Take();
  ASSERT_NE(cell, nullptr);
  auto r = celltest::RunInCell(*cell, {"/bin/sh", "-c", "echo grown"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "grown\n");
  EXPECT_TRUE(cell->Destroy().ok());
  for (auto& t : taken) {
    if (t) {
      EXPECT_TRUE(t->Destroy().ok());
    }
  }
  EXPECT_TRUE(Eventually([&] { return pool.target() == 1 && pool.ready() == 1; }))
      << "target " << pool.target() << ", ready " << pool.ready();
  EXPECT_TRUE(Eventually([&] { return CellDirs(state.path()) == 1; }))
      << "the surplus cells were destroyed";
  pool.Stop();
  EXPECT_EQ(CellDirs(state.path()), 0u);
}

TEST(WarmPool, TargetZeroMakesNothing) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  WarmPool pool(ProbeFactory(state), TestBackend(), 0);
  EXPECT_EQ(pool.Take(10ms), nullptr);
  EXPECT_EQ(CellDirs(state.path()), 0u);
}

}  // namespace
}  // namespace mcpcell::sandbox
