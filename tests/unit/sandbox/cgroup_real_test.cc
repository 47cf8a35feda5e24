// cgroups on this host's real cgroupfs (under our own cgroup, cleaned up): limits written,
// processes moved, OOM kills, fork limits and CPU quota observed, kill-all and removal,
// the v1 join through server-opened fds, stale reaping and the server's placement. Tests
// needing a writable cgroupfs skip with the reason when there is none.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/cgroup_fs.h"
#include "tests/unit/sandbox/cgroup_test_util.h"

namespace mcpcell::sandbox {
namespace {

using cgroup_test::CpuSecondsOfSpin;
using cgroup_test::Exists;
using cgroup_test::HeldChild;
using cgroup_test::Slurp;
using cgroup_test::Spit;
using cgroup_test::UniqueId;

// ---- the real cgroupfs of this host ------------------------------------------------------

class RealCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = DetectCgroupHost();
    if (!host_.can_create) GTEST_SKIP() << "no writable cgroup here: " << host_.detail;
  }
  Result<std::unique_ptr<Cgroup>> Create(const char* what, CgroupLimits limits) {
    return CreateCellCgroup(UniqueId(what), limits);
  }
  CgroupHost host_;
};

TEST_F(RealCgroup, CreateWritesLimitsAndDestroyRemovesEverything) {
  auto cg = Create("limits", CgroupLimits{64ull << 20, 32, 250});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  const std::vector<std::string> paths = (*cg)->Paths();
  ASSERT_FALSE(paths.empty());
  for (const std::string& p : paths) EXPECT_TRUE(Exists(p)) << p;
  if (host_.mode == CgroupMode::kV1) {
    for (const std::string& p : paths) {
      if (Exists(p + "/memory.limit_in_bytes")) {
        EXPECT_EQ(Slurp(p + "/memory.limit_in_bytes"), "67108864\n");
        if (Exists(p + "/memory.memsw.limit_in_bytes")) {
          EXPECT_EQ(Slurp(p + "/memory.memsw.limit_in_bytes"), "67108864\n");
        }
      }
      if (Exists(p + "/pids.max")) {
        EXPECT_EQ(Slurp(p + "/pids.max"), "32\n");
      }
      if (Exists(p + "/cpu.cfs_quota_us")) {
        EXPECT_EQ(Slurp(p + "/cpu.cfs_quota_us"), "2500\n");
        EXPECT_EQ(Slurp(p + "/cpu.cfs_period_us"), "10000\n");
      }
    }
    EXPECT_EQ((*cg)->DirFd(), -1);
  } else {
    EXPECT_EQ(Slurp(paths[0] + "/memory.max"), "67108864\n");
    EXPECT_EQ(Slurp(paths[0] + "/pids.max"), "32\n");
    EXPECT_EQ(Slurp(paths[0] + "/cpu.max"), "2500 10000\n");
    EXPECT_GE((*cg)->DirFd(), 0);
  }
  ASSERT_TRUE((*cg)->Destroy().ok());
  for (const std::string& p : paths) EXPECT_FALSE(Exists(p)) << p;
  EXPECT_TRUE((*cg)->Destroy().ok());  // idempotent
}

TEST_F(RealCgroup, ProcessesJoinAndKillAllKillsThemAll) {
  auto cg = Create("kill", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  // The child forks a grandchild, then both sleep: KillAll must get both.
  HeldChild child([] {
    if (fork() == 0) pause();
    pause();
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(child.pid()).ok());
  child.Release();
  const std::string procs = (*cg)->Paths()[0] + "/cgroup.procs";
  for (int i = 0; i < 200 && Slurp(procs).find('\n') == Slurp(procs).rfind('\n'); ++i) {
    usleep(5000);  // until the grandchild is listed too
  }
  EXPECT_NE(Slurp("/proc/" + std::to_string(child.pid()) + "/cgroup")
                .find((*cg)->Paths()[0].substr((*cg)->Paths()[0].find("/mcpcell/"))),
            std::string::npos);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->pids_current, 2u);
  ASSERT_TRUE((*cg)->KillAll().ok());
  const int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_TRUE((*cg)->Destroy().ok());  // waits for the reparented grandchild to be gone
}

TEST_F(RealCgroup, MemoryHogIsOomKilledAndCounted) {
  auto cg = Create("oom", CgroupLimits{32ull << 20, 0, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild hog([] {
    const size_t size = 256ull << 20;
    char* p = static_cast<char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 2;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return 0;  // reaching here means the limit did not hold
  });
  ASSERT_TRUE((*cg)->AddProcess(hog.pid()).ok());
  hog.Release();
  const int status = hog.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->oom_kill_count, 1u);
  EXPECT_LE(u->memory_peak_bytes, (32ull << 20) + (1 << 20));
  EXPECT_GT(u->memory_peak_bytes, 16ull << 20);
  ASSERT_TRUE((*cg)->Destroy().ok());
}

TEST_F(RealCgroup, ForkBombStopsAtPidsMax) {
  auto cg = Create("pids", CgroupLimits{0, 16, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild bomb([] {
    int forked = 0;
    for (int i = 0; i < 100; ++i) {
      pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p < 0) return errno == EAGAIN ? forked : 200;
      ++forked;
    }
    return 201;  // 100 forks succeeded: no limit
  });
  ASSERT_TRUE((*cg)->AddProcess(bomb.pid()).ok());
  bomb.Release();
  const int status = bomb.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 15);  // 16 pids: the bomb itself and 15 children
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->pids_limit_hits, 1u);
  ASSERT_TRUE((*cg)->Destroy().ok());  // kills the 15 paused children
}

TEST_F(RealCgroup, CpuQuotaHolds) {
  auto cg = Create("cpu", CgroupLimits{0, 0, 100});  // a tenth of a CPU
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild spinner([] {
    CpuSecondsOfSpin(1.0);
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(spinner.pid()).ok());
  spinner.Release();
  ASSERT_EQ(spinner.Wait(), 0);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  // One second of wall time at 10%: about 0.1 s of CPU; 0.3 s leaves room for the period
  // boundaries and still fails clearly without a quota (about 1 s).
  EXPECT_LT(u->cpu_usage_ns, 300000000u);
  EXPECT_GT(u->cpu_usage_ns, 5000000u);  // it ran at all (a loaded CI machine may give less)
  ASSERT_TRUE((*cg)->Destroy().ok());
}

// The v1 fast path A's Cell uses: the child, already in a new user namespace, joins through
// fds the server opened, and lands in every controller.
TEST_F(RealCgroup, ChildJoinsThroughServerOpenedFds) {
  if (host_.mode != CgroupMode::kV1) GTEST_SKIP() << "v1 only (v2 uses CLONE_INTO_CGROUP)";
  auto cg = Create("join", CgroupLimits{64ull << 20, 16, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  Result<std::vector<int>> fds = (*cg)->OpenJoinFds();
  ASSERT_TRUE(fds.ok()) << fds.error().message;
  ASSERT_EQ(fds->size(), (*cg)->Paths().size());
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  if (pid == 0) {
    // As in a cell: a new user namespace, no capabilities over the host's cgroupfs.
    if (unshare(CLONE_NEWUSER) != 0) _exit(10);
    const int err = JoinCgroupFromChild(fds->data(), fds->size());
    if (write(done[1], &err, sizeof err) != sizeof err) _exit(11);
    pause();
    _exit(0);
  }
  for (int fd : *fds) close(fd);
  close(done[1]);
  int err = -1;
  ASSERT_EQ(read(done[0], &err, sizeof err), static_cast<ssize_t>(sizeof err));
  close(done[0]);
  EXPECT_EQ(err, 0) << strerror(err);
  for (const std::string& p : (*cg)->Paths()) {
    EXPECT_EQ(Slurp(p + "/cgroup.procs"), std::to_string(pid) + "\n") << p;
  }
  ASSERT_TRUE((*cg)->Destroy().ok());
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST_F(RealCgroup, ExistingCgroupIsNotReused) {
  const std::string id = UniqueId("twice");
  auto first = CreateCellCgroup(id, CgroupLimits{});
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = CreateCellCgroup(id, CgroupLimits{});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("already exists"), std::string::npos)
      << second.error().message;
  for (const std::string& p : (*first)->Paths()) EXPECT_TRUE(Exists(p)) << p;  // untouched
  ASSERT_TRUE((*first)->Destroy().ok());
}

TEST_F(RealCgroup, ReapStaleRemovesOnlyTheDeadOnes) {
  const std::string stale_id = UniqueId("stale");
  const std::string live_id = UniqueId("live");
  auto stale = CreateCellCgroup(stale_id, CgroupLimits{0, 8, 0});
  auto live = CreateCellCgroup(live_id, CgroupLimits{});
  ASSERT_TRUE(stale.ok() && live.ok());
  HeldChild orphan([] {
    pause();
    return 0;
  });
  ASSERT_TRUE((*stale)->AddProcess(orphan.pid()).ok());
  orphan.Release();
  const std::vector<std::string> stale_paths = (*stale)->Paths();
  stale->reset();  // the server "crashed": nobody owns this cgroup any more
  // Other cells on this host (other tests running now) count as live.
  ASSERT_TRUE(ReapStaleCgroups([&](const std::string& id) { return id != stale_id; }).ok());
  const int status = orphan.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  for (const std::string& p : stale_paths) EXPECT_FALSE(Exists(p)) << p;
  for (const std::string& p : (*live)->Paths()) EXPECT_TRUE(Exists(p)) << p;
  ASSERT_TRUE((*live)->Destroy().ok());
}

// The real placement on this host: this test process is the "server". It moves into
// <own>/mcpcell-server with the weight, a cell made meanwhile lands in <own>/mcpcell, and
// undoing it puts the process back and leaves nothing of ours.
TEST_F(RealCgroup, ServerPlacementAndUndo) {
  const std::string before = Slurp("/proc/self/cgroup");
  Result<ServerPlacement> p = PlaceServerAboveCells({800, 100});
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::string during = Slurp("/proc/self/cgroup");
  EXPECT_NE(during.find("/mcpcell-server\n"), std::string::npos) << during;
  const auto [file, value] = cgroupfs::CpuWeightWrite(host_.mode, 800);
  EXPECT_EQ(Slurp(p->server_dir + "/" + file), value + "\n");
  EXPECT_NE(Slurp(p->server_dir + "/cgroup.procs").find(std::to_string(getpid()) + "\n"),
            std::string::npos);
  // Cells still go next to the server, not below it: detection run now (as a server that
  // placed itself before its first cell does) and the cell made now.
  const CgroupHost placed_host = DetectCgroupHost();
  for (const auto& [controller, dir] : placed_host.cell_parents) {
    if (controller == "cpu" || controller == "unified") {
      EXPECT_EQ(dir, p->cells_dir) << controller;
    }
  }
  auto cg = Create("placed", CgroupLimits{0, 16, 100});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  bool under_cells_dir = false;
  for (const std::string& path : (*cg)->Paths()) {
    under_cells_dir = under_cells_dir || path.rfind(p->cells_dir + "/", 0) == 0;
  }
  EXPECT_TRUE(under_cells_dir) << p->cells_dir;
  ASSERT_TRUE((*cg)->Destroy().ok());

  Status undo = UnplaceServer(*p);
  // Other servers' cells on this host may keep the shared parents (v2: and us in our leaf).
  if (!undo.ok()) {
    EXPECT_NE(undo.error().message.find("still in use"), std::string::npos) << undo.error().message;
    return;
  }
  EXPECT_EQ(Slurp("/proc/self/cgroup"), before);
  // mcpcell-server is gone unless another process (a server) is in it.
  if (Exists(p->server_dir)) {
    EXPECT_EQ(Slurp(p->server_dir + "/cgroup.procs").find(std::to_string(getpid()) + "\n"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace mcpcell::sandbox
