// Named workspaces on the host (serve/workspaces.h, serve/workspace_leases.h): made on first
// lock, one holder at a time (two lock holders, as two sessions or two servers would be),
// waiting for a busy one, last use recorded at release, list, delete refused while locked,
// retention with fake times, and the per-cell leases the serve hooks use.
#include "serve/workspaces.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "serve/workspace_leases.h"

namespace mcpcell::serve {
namespace {

namespace fs = std::filesystem;
using policies::WorkspaceBusy;
using std::chrono::hours;
using std::chrono::milliseconds;

class WorkspacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-ws-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override { fs::remove_all(state_); }

  std::string state_;
};

TEST_F(WorkspacesTest, ALockMakesTheWorkspaceUnderItsOwner) {
  WorkspaceStore store(state_);
  auto lock = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_EQ((*lock)->dir(), state_ + "/workspaces/alice/proj");
  EXPECT_TRUE(fs::is_directory(state_ + "/workspaces/alice/proj"));
  auto own = store.Lock({"", "proj"}, "c2", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(own) << own.error().message;
  EXPECT_EQ((*own)->dir(), state_ + "/workspaces/_/proj");  // another directory
}

TEST_F(WorkspacesTest, ASecondHolderIsRefusedNamingTheWorkspaceUntilTheFirstReleases) {
  WorkspaceStore store(state_);
  WorkspaceStore other_server(state_);  // another store on the same state dir
  auto first = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(first) << first.error().message;
  (*first)->NoteSession("c1", "sess-1");
  auto second = other_server.Lock({"alice", "proj"}, "c2", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_FALSE(second);
  const std::string& m = second.error().message;
  EXPECT_NE(m.find("workspace \"proj\" of tenant \"alice\""), std::string::npos) << m;
  EXPECT_NE(m.find("in use by another session"), std::string::npos) << m;
  EXPECT_NE(m.find("cell c1"), std::string::npos) << m;
  EXPECT_NE(m.find("session sess-1"), std::string::npos) << m;
  // Another tenant's "proj" is another workspace.
  EXPECT_TRUE(store.Lock({"bob", "proj"}, "c3", WorkspaceBusy::kRefuse, milliseconds(0)));
  first->reset();
  EXPECT_TRUE(other_server.Lock({"alice", "proj"}, "c2", WorkspaceBusy::kRefuse, milliseconds(0)));
}

TEST_F(WorkspacesTest, WaitGetsTheLockOnceTheHolderReleasesIt) {
  WorkspaceStore store(state_);
  auto first = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(first);
  std::thread release([&] {
    std::this_thread::sleep_for(milliseconds(300));
    first->reset();
  });
  // Long enough that only a failure to notice the release could exhaust it.
  auto second = store.Lock({"alice", "proj"}, "c2", WorkspaceBusy::kWait, std::chrono::minutes(5));
  release.join();
  EXPECT_TRUE(second) << second.error().message;
}

TEST_F(WorkspacesTest, WaitGivesUpAfterItsTimeSayingSo) {
  WorkspaceStore store(state_);
  auto first = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(first);
  auto second = store.Lock({"alice", "proj"}, "c2", WorkspaceBusy::kWait, milliseconds(200));
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("in use by another session"), std::string::npos);
  EXPECT_NE(second.error().message.find("waited"), std::string::npos);
}

TEST_F(WorkspacesTest, ReleaseRecordsTheLastUseAndSizeAndListShowsThem) {
  WorkspaceStore store(state_);
  const auto before = WallClock::now() - std::chrono::seconds(1);
  {
    auto lock = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
    ASSERT_TRUE(lock);
    std::ofstream((*lock)->dir() + "/a.txt") << std::string(1000, 'x');
    fs::create_directories((*lock)->dir() + "/sub");
    std::ofstream((*lock)->dir() + "/sub/b.txt") << std::string(24, 'y');
    auto during = store.List("alice");
    ASSERT_TRUE(during);
    ASSERT_EQ(during->size(), 1u);
    ASSERT_TRUE((*during)[0].holder.has_value());
    EXPECT_EQ((*during)[0].holder->cell, "c1");
    EXPECT_EQ((*during)[0].holder->pid, ::getpid());
  }
  auto list = store.List();
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 1u);
  const WorkspaceInfo& w = (*list)[0];
  EXPECT_EQ(w.owner, "alice");
  EXPECT_EQ(w.name, "proj");
  EXPECT_EQ(w.bytes, 1024u);
  EXPECT_FALSE(w.holder.has_value());
  ASSERT_TRUE(w.last_used.has_value());
  EXPECT_GE(*w.last_used, before);
  EXPECT_TRUE(store.List("bob")->empty());
}

TEST_F(WorkspacesTest, DeleteIsRefusedWhileLockedAndRemovesEverythingAfter) {
  WorkspaceStore store(state_);
  auto lock = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(lock);
  std::ofstream((*lock)->dir() + "/f") << "data";
  Status refused = store.Delete({"alice", "proj"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("in use"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(fs::exists(state_ + "/workspaces/alice/proj/f"));
  lock->reset();
  Status st = store.Delete({"alice", "proj"});
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_FALSE(fs::exists(state_ + "/workspaces/alice/proj"));
  EXPECT_TRUE(store.List()->empty());
  Status again = store.Delete({"alice", "proj"});
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("no workspace \"proj\""), std::string::npos);
  EXPECT_NE(store.Delete({"alice", "../x"}).error().message.find("is not a workspace name"),
            std::string::npos);
}

TEST_F(WorkspacesTest, RetentionRemovesOnlyUnlockedWorkspacesUnusedLongerThanTheirOwners) {
  WorkspaceStore store(state_);
  for (const char* owner : {"alice", "bob"}) {
    for (const char* name : {"old", "busy"}) {
      ASSERT_TRUE(store.Lock({owner, name}, "c", WorkspaceBusy::kRefuse, milliseconds(0)));
    }
  }
  auto held = store.Lock({"alice", "busy"}, "c9", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_TRUE(held);
  const auto days = [](int n) { return std::chrono::seconds(n * 86400); };
  auto retention = [&](const std::string& owner) { return owner == "alice" ? days(30) : days(60); };
  // Ten days on: nothing is old enough.
  EXPECT_TRUE(store.RemoveUnused(WallClock::now() + days(10), retention).empty());
  // Forty days on: alice's unlocked workspace goes, bob's keep their 60 days.
  auto removed = store.RemoveUnused(WallClock::now() + days(40), retention);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, "alice");
  EXPECT_EQ(removed[0].name, "old");
  EXPECT_FALSE(fs::exists(state_ + "/workspaces/alice/old"));
  EXPECT_TRUE(fs::exists(state_ + "/workspaces/alice/busy"));
  EXPECT_EQ(store.RemoveUnused(WallClock::now() + days(61), retention).size(), 2u);  // bob's
  EXPECT_TRUE(fs::exists(state_ + "/workspaces/alice/busy"));                        // still locked
}

TEST_F(WorkspacesTest, LeasesHoldOneLockPerCellUntilReleased) {
  WorkspaceLeases leases(state_);
  policies::Policy p;
  p.filesystem.workspace = policies::WorkspaceMode::kPersistent;
  p.filesystem.workspace_name = "proj";
  p.filesystem.workspace_owner = "alice";
  ASSERT_TRUE(leases.Take(p, "c1"));
  Status second = leases.Take(p, "c2");
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("in use by another session"), std::string::npos);
  leases.Release("c2");  // holds nothing: no effect
  EXPECT_FALSE(leases.Take(p, "c3"));
  leases.Release("c1");
  EXPECT_TRUE(leases.Take(p, "c3"));
  policies::Policy ephemeral;
  EXPECT_TRUE(leases.Take(ephemeral, "c4"));  // nothing to lock
  EXPECT_FALSE(fs::exists(state_ + "/workspaces/_"));
}

TEST_F(WorkspacesTest, UtcTimesRoundTrip) {
  auto t = WallClock::from_time_t(1767322800);  // 2026-01-02T03:00:00Z
  EXPECT_EQ(FormatUtc(t), "2026-01-02T03:00:00Z");
  EXPECT_EQ(ParseUtc("2026-01-02T03:00:00Z"), t);
  EXPECT_FALSE(ParseUtc("yesterday").has_value());
}

TEST_F(WorkspacesTest, TheJanitorRemovesAnOldWorkspaceAtStartAndReportsIt) {
  WorkspaceStore store(state_);
  for (const char* name : {"old", "recent"}) {
    ASSERT_TRUE(store.Lock({"alice", name}, "c1", WorkspaceBusy::kRefuse, milliseconds(0)));
  }
  // "old" was last used 40 days ago, as its record says.
  std::ofstream(state_ + "/workspaces/alice/.meta/old.json")
      << R"({"tenant":"alice","name":"old","bytes":0,"last_used":")"
      << FormatUtc(WallClock::now() - hours(40 * 24)) << "\"}\n";
  std::promise<WorkspaceInfo> removed;
  {
    WorkspaceJanitor janitor(
        store, [](const std::string&) { return std::chrono::seconds(30 * 86400); },
        [&](const WorkspaceInfo& w) { removed.set_value(w); });
    auto future = removed.get_future();
    ASSERT_EQ(future.wait_for(std::chrono::minutes(5)), std::future_status::ready);
    EXPECT_EQ(future.get().name, "old");
  }
  EXPECT_FALSE(fs::exists(state_ + "/workspaces/alice/old"));
  EXPECT_TRUE(fs::exists(state_ + "/workspaces/alice/recent"));
}

TEST_F(WorkspacesTest, RetentionIsTheTenantsOwnElseTheServers) {
  policies::Policy server;
  server.time.workspace_retention = std::chrono::seconds(7 * 86400);
  policies::Policy alice;
  alice.time.workspace_retention = std::chrono::seconds(90 * 86400);
  auto retention = RetentionByOwner(server, {{"alice", alice}});
  EXPECT_EQ(retention("alice"), std::chrono::seconds(90 * 86400));
  EXPECT_EQ(retention("_"), std::chrono::seconds(7 * 86400));
  EXPECT_EQ(retention("gone-tenant"), std::chrono::seconds(7 * 86400));
}

TEST_F(WorkspacesTest, AnotherProcessHoldingTheLockRefusesUntilItExits) {
  int ready[2];
  int go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another server: holds alice/proj until told to go
    auto lock = WorkspaceStore(state_).Lock({"alice", "proj"}, "c-other", WorkspaceBusy::kRefuse,
                                            milliseconds(0));
    char c = lock ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(go[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  WorkspaceStore store(state_);
  auto refused = store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("cell c-other"), std::string::npos);
  EXPECT_NE(refused.error().message.find("server pid " + std::to_string(child)), std::string::npos);
  (void)!::write(go[1], "x", 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // The child ended without releasing: the kernel dropped its lock with its files.
  EXPECT_TRUE(store.Lock({"alice", "proj"}, "c1", WorkspaceBusy::kRefuse, milliseconds(0)));
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

}  // namespace
}  // namespace mcpcell::serve
