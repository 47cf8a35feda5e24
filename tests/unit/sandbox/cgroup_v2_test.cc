// cgroup v2 mechanics on a real cgroup2 mount, even when it has no controllers (as on a
// v1 host): lifecycle with cgroup.kill and CLONE_INTO_CGROUP, the freezer, and limits that
// need enabled controllers. Skips with the reason when there is no writable cgroup2 mount.
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

// ---- v2 mechanics on a real cgroup2 mount -------------------------------------------------

std::string FindCgroup2Mount() {
  for (const char* p : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    struct statfs fs {};
    if (statfs(p, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) return p;
  }
  return "";
}

class RealCgroupV2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string mount = FindCgroup2Mount();
    if (mount.empty()) GTEST_SKIP() << "no cgroup2 mount";
    // Our own v2 cgroup, from "0::/path".
    const std::string self = Slurp("/proc/self/cgroup");
    const size_t pos = self.find("0::");
    if (pos == std::string::npos) GTEST_SKIP() << "not in a v2 cgroup";
    std::string own = self.substr(pos + 3, self.find('\n', pos) - pos - 3);
    if (own == "/") own.clear();
    parent_ = mount + own + "/mcpcell-unit-v2-" + std::to_string(getpid());
    if (mkdir(parent_.c_str(), 0755) != 0) {
      GTEST_SKIP() << "cannot create " << parent_ << ": " << strerror(errno);
    }
  }
  void TearDown() override {
    if (!parent_.empty()) rmdir(parent_.c_str());
  }
  std::string parent_;
};

TEST_F(RealCgroupV2, LifecycleWithCgroupKillAndCloneIntoCgroup) {
  auto cg = CreateCgroupV2(parent_, "cell", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  const std::string dir = (*cg)->Paths()[0];
  ASSERT_GE((*cg)->DirFd(), 0);
  Result<std::vector<int>> join = (*cg)->OpenJoinFds();
  ASSERT_TRUE(join.ok());
  EXPECT_TRUE(join->empty());

  // clone3(CLONE_INTO_CGROUP) with DirFd(): the child starts inside, as A's Cell does.
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>((*cg)->DirFd());
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    CpuSecondsOfSpin(0.05);
    pause();
    _exit(0);
  }
  ASSERT_GT(pid, 0) << strerror(errno);
  EXPECT_EQ(Slurp(dir + "/cgroup.procs"), std::to_string(pid) + "\n");
  // AddProcess moves a second process in.
  HeldChild other([] {
    pause();
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(other.pid()).ok());
  other.Release();
  usleep(100000);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GT(u->cpu_usage_ns, 10000000u);  // cpu.stat works without the cpu controller

  ASSERT_TRUE((*cg)->KillAll().ok());  // cgroup.kill
  int status = 0;
  waitpid(static_cast<pid_t>(pid), &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  status = other.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_TRUE((*cg)->Destroy().ok());
  EXPECT_FALSE(Exists(dir));
}

// The v2 freezer on a real cgroup2 mount (cgroup.freeze is there without any controller):
// a child counting in shared memory stops while frozen and continues once thawed; a
// frozen cgroup is destroyed (cgroup.kill kills frozen tasks) without hanging.
TEST_F(RealCgroupV2, FreezeStopsACountingChildAndThawResumesIt) {
  auto cg = CreateCgroupV2(parent_, "paused", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  auto* counter = static_cast<volatile uint64_t*>(
      mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  *counter = 0;
  HeldChild child([counter] {
    for (;;) *counter = *counter + 1;
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(child.pid()).ok());
  child.Release();
  while (*counter < 1000) usleep(1000);

  Status frozen = (*cg)->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message;
  const uint64_t at_freeze = *counter;
  usleep(100000);
  EXPECT_EQ(*counter, at_freeze);  // not one more increment while frozen
  Status thawed = (*cg)->Thaw();
  ASSERT_TRUE(thawed.ok()) << thawed.error().message;
  for (int i = 0; i < 3000 && *counter <= at_freeze; ++i) usleep(1000);
  EXPECT_GT(*counter, at_freeze);

  ASSERT_TRUE((*cg)->Freeze().ok());
  Status destroyed = (*cg)->Destroy();
  ASSERT_TRUE(destroyed.ok()) << destroyed.error().message;
  const int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  munmap(const_cast<uint64_t*>(counter), sizeof(uint64_t));
}

TEST_F(RealCgroupV2, LimitsNeedEnabledControllers) {
  const std::string controllers = Slurp(parent_ + "/cgroup.controllers");
  if (controllers.find("memory") != std::string::npos) GTEST_SKIP() << "memory is available";
  auto cg = CreateCgroupV2(parent_, "cell", CgroupLimits{64 << 20, 0, 0});
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.error().message.find("\"memory\" is not enabled"), std::string::npos)
      << cg.error().message;
  EXPECT_FALSE(Exists(parent_ + "/cell"));
}

}  // namespace
}  // namespace mcpcell::sandbox
