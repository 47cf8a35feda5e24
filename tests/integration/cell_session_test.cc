// CellSessionManager with real cells: the warm pool serves a session's first cell, the
// hooks see every cell bound and destroyed (close, replacement after death, idle), a failing
// on_bound fails the call and leaves nothing, and profiles get pools of their own.
#include "sandbox/cell_session.h"

#include <dirent.h>
#include <signal.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::Eventually;
using celltest::ProbeFactory;
using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Records what the hooks saw.
struct HookLog {
  std::mutex mu;
  std::vector<std::string> bound;      // "key/profile/cell id"
  std::vector<std::string> destroyed;  // cell ids
  std::vector<pid_t> init_pids;        // of the cells bound, in order
  CellHooks Hooks() {
    CellHooks h;
    h.on_bound = [this](CellInstance& cell, const std::string& key, const std::string& profile) {
      std::lock_guard lock(mu);
      bound.push_back(key + "/" + profile + "/" + cell.id());
      init_pids.push_back(dynamic_cast<Cell&>(cell).init_pid());  // the namespace backend
      return Status();
    };
    h.on_destroying = [this](CellInstance& cell) {
      std::lock_guard lock(mu);
      destroyed.push_back(cell.id());
    };
    return h;
  }
};

CellSessionOptions Options(size_t warm) {
  CellSessionOptions o;
  o.create = TestCreateOptions();
  o.warm_cells = warm;
  return o;
}

TEST(CellSessionManager, WarmPoolServesTheFirstCallAndHooksSeeEveryCell) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  HookLog log;
  {
    CellSessionManager manager(ProbeFactory(state), Options(1));
    manager.SetCellHooks(log.Hooks());
    ASSERT_TRUE(Eventually([&] { return manager.warm_ready() == 1; })) << manager.warm_status();
    auto session = manager.Get("s1");
    ASSERT_TRUE(session.ok()) << session.error().message;
    std::string cell_id;
    {
      auto lease = (*session)->Acquire();
      ASSERT_TRUE(lease.ok()) << lease.error().message;
      cell_id = lease->id();
      EXPECT_EQ(cell_id[0], 'w') << "the first cell came from the warm pool: " << cell_id;
      auto r = celltest::RunInCell(*lease, {"/bin/true"});
      EXPECT_TRUE(r.ok && r.exit_code == 0) << r.error;
    }
    {
      std::lock_guard lock(log.mu);
      ASSERT_EQ(log.bound.size(), 1u);
      EXPECT_EQ(log.bound[0], "s1//" + cell_id);
    }
    ASSERT_TRUE(manager.Close("s1").ok());
    {
      std::lock_guard lock(log.mu);
      EXPECT_EQ(log.destroyed, std::vector<std::string>{cell_id});
    }
    EXPECT_EQ(celltest::CellDirNames(state.path()).count(cell_id), 0u);
    // The pool refilled for the next session.
    EXPECT_TRUE(Eventually([&] { return manager.warm_ready() == 1; })) << manager.warm_status();
  }
  EXPECT_TRUE(celltest::CellDirNames(state.path()).empty())
      << "the manager's end destroys the pooled cell";
}

TEST(CellSessionManager, ADeadCellIsRetiredThroughTheHookAndReplaced) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  HookLog log;
  CellSessionManager manager(ProbeFactory(state), Options(0));
  manager.SetCellHooks(log.Hooks());
  auto session = manager.Get("s");
  ASSERT_TRUE(session.ok());
  std::string first;
  {
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    first = lease->id();
    pid_t init_pid = -1;
    {
      std::lock_guard lock(log.mu);
      ASSERT_EQ(log.init_pids.size(), 1u);
      init_pid = log.init_pids[0];
    }
    ASSERT_EQ(::kill(init_pid, SIGKILL), 0);  // our own descendant
    ASSERT_TRUE(Eventually([&] { return !lease->alive(); }));
  }
  auto lease = (*session)->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_NE(lease->id(), first);
  EXPECT_THAT(lease->replaced_reason(), HasSubstr("had stopped"));
  {
    std::lock_guard lock(log.mu);
    EXPECT_EQ(log.destroyed, std::vector<std::string>{first});
    EXPECT_EQ(log.bound.size(), 2u);
  }
  EXPECT_EQ(celltest::CellDirNames(state.path()).count(first), 0u);
}

// Less than 5 minutes of a 10 hour lifetime left is "near its end", and so is less than a
// tenth of a 60 s one (that is, from the start): the first call then carries the notice, and
// only the first.
TEST(CellSessionManager, TheFirstCallNearTheMaximumLifetimeCarriesANoticeOnce) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CellSessionOptions far = Options(0);
  far.max_lifetime = 10h;
  CellSessionManager long_lived(ProbeFactory(state), far);
  auto far_session = long_lived.Get("far");
  ASSERT_TRUE(far_session.ok());
  {
    auto lease = (*far_session)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_EQ(lease->lifetime_notice(), "");
  }
  CellSessionOptions near = Options(0);
  near.max_lifetime = 60s;
  CellSessionManager manager(ProbeFactory(state), near);
  auto session = manager.Get("near");
  ASSERT_TRUE(session.ok());
  {
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    EXPECT_THAT(lease->lifetime_notice(), HasSubstr("this session ends in"));
    EXPECT_THAT(lease->lifetime_notice(), HasSubstr("maximum lifetime of 60 s"));
  }
  auto again = (*session)->Acquire();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->lifetime_notice(), "") << "once per session";
}

TEST(CellSessionManager, FailingOnBoundFailsTheCallAndLeavesNothing) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CellSessionManager manager(ProbeFactory(state), Options(0));
  CellHooks hooks;
  int destroyed = 0;
  hooks.on_bound = [](CellInstance&, const std::string&, const std::string&) -> Status {
    return Error::Msg("egress proxy refused the cell");
  };
  hooks.on_destroying = [&](CellInstance&) { ++destroyed; };
  manager.SetCellHooks(hooks);
  auto session = manager.Get("s");
  ASSERT_TRUE(session.ok());
  auto lease = (*session)->Acquire();
  ASSERT_FALSE(lease.ok());
  EXPECT_THAT(lease.error().message, HasSubstr("egress proxy refused the cell"));
  EXPECT_EQ(destroyed, 0) << "on_destroying only for cells on_bound accepted";
  EXPECT_TRUE(celltest::CellDirNames(state.path()).empty());
}

TEST(CellSessionManager, ProfilesGetTheirOwnPoolAtFirstUse) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CellSessionManager manager(ProbeFactory(state), Options(1));
  CellSessionProfile profile;
  profile.factory = ProbeFactory(state);
  ASSERT_TRUE(manager.AddProfile("tenant-b", profile).ok());
  EXPECT_EQ(manager.warm_ready("tenant-b"), 0u) << "no pool before the profile is used";
  auto session = manager.Get("b1", "tenant-b");
  ASSERT_TRUE(session.ok()) << session.error().message;
  EXPECT_TRUE(Eventually([&] { return manager.warm_ready("tenant-b") == 1; }))
      << manager.warm_status("tenant-b");
  EXPECT_TRUE(Eventually([&] { return manager.warm_ready() == 1; }));
}

}  // namespace
}  // namespace mcpcell::sandbox
