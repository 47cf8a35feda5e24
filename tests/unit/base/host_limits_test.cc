// base/host_limits: the cell count and its binding limit from fake /proc and /sys texts.
#include "base/host_limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

namespace mcpcell {
namespace {

// A host whose texts are given; anything else is unreadable.
struct FakeHost {
  std::map<std::string, std::string> files = {
      {"/proc/loadavg", "0.50 0.40 0.30 2/1000 12345\n"},
      {"/proc/sys/kernel/pid_max", "4194304\n"},
      {"/proc/sys/kernel/threads-max", "190000\n"},
      {"/proc/self/cgroup", "0::/user.slice/session-1.scope\n"},
      {"/sys/fs/cgroup/user.slice/session-1.scope/pids.max", "max\n"},
      {"/sys/fs/cgroup/user.slice/pids.max", "5000\n"},
      {"/sys/fs/cgroup/user.slice/pids.current", "1000\n"},
      {"/proc/self/limits",
       "Limit                     Soft Limit           Hard Limit           Units     \n"
       "Max processes             95000                95000                processes \n"
       "Max open files            1048576              1048576              files     \n"},
      {"/proc/sys/fs/file-nr", "2000\t0\t9223372036854775807\n"},
      {"/proc/meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20480000 kB\n"},
      {"/proc/sys/user/max_user_namespaces", "95000\n"},
      {"/proc/sys/user/max_mnt_namespaces", "95000\n"},
      {"/proc/sys/user/max_pid_namespaces", "95000\n"},
      {"/proc/sys/user/max_net_namespaces", "95000\n"},
      {"/proc/sys/user/max_ipc_namespaces", "95000\n"},
      {"/proc/sys/user/max_uts_namespaces", "95000\n"},
      {"/proc/sys/user/max_cgroup_namespaces", "95000\n"},
      {"/proc/sys/fs/inotify/max_user_instances", "128\n"},
      {"/proc/sys/fs/inotify/max_user_watches", "65536\n"},
  };
  TextSource Source() const {
    return [this](const std::string& path) -> std::optional<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
};

const HostLimit* Find(const HostCapacity& c, const std::string& name) {
  for (const HostLimit& l : c.limits) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

TEST(HostLimitsTest, TheCgroupPidsLimitAboveTheServerBindsWhenItIsTheTightest) {
  FakeHost host;
  HostCapacity c = AssessHostCapacity(host.Source(), {2, 6, 1024});
  ASSERT_TRUE(c.cells.has_value());
  EXPECT_EQ(*c.cells, 2000u);  // (5000 - 1000 in use) / 2 tasks per cell
  EXPECT_EQ(c.binding, "pids: cgroup /sys/fs/cgroup/user.slice/pids.max");
  EXPECT_TRUE(c.unreadable.empty()) << c.unreadable.front();
  // The leaf's "max" is no limit: only the parent's line is there.
  EXPECT_EQ(Find(c, "pids: cgroup /sys/fs/cgroup/user.slice/session-1.scope/pids.max"), nullptr);
}

// serve raises its soft limit to the hard one at start: the hard limit is what caps cells,
// and the line says where the soft one stands and how to raise the hard one.
TEST(HostLimitsTest, TheHardFdLimitBindsSinceServeRaisesTheSoftOneToIt) {
  FakeHost host;
  host.files["/proc/self/limits"] =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max open files            1024                 4096                 files     \n";
  HostCapacity c = AssessHostCapacity(host.Source(), {1, 8, 1024});
  ASSERT_TRUE(c.cells.has_value());
  EXPECT_EQ(*c.cells, 512u);  // 4096 / 8, not 1024 / 8
  EXPECT_EQ(c.binding, "fds: RLIMIT_NOFILE (hard)");
  const HostLimit* l = Find(c, "fds: RLIMIT_NOFILE (hard)");
  ASSERT_NE(l, nullptr);
  EXPECT_NE(l->detail.find("soft 1024"), std::string::npos) << l->detail;
  EXPECT_NE(l->detail.find("ulimit -Hn"), std::string::npos) << l->detail;
  EXPECT_NE(
      FormatHostCapacity(c).find("cells this host can hold: 512 (binding: fds: RLIMIT_NOFILE"),
      std::string::npos);
}

TEST(HostLimitsTest, AFdLimitLineWithoutAHardValueIsReportedUnreadable) {
  FakeHost host;
  host.files["/proc/self/limits"] = "Max open files            1024\n";
  HostCapacity c = AssessHostCapacity(host.Source(), {1, 8, 1024});
  EXPECT_EQ(Find(c, "fds: RLIMIT_NOFILE (hard)"), nullptr);
  ASSERT_FALSE(c.unreadable.empty());
  EXPECT_NE(c.unreadable.back().find("Max open files"), std::string::npos);
}

// In a child (the test's own limit stays): soft lowered to 64, then raised to the hard one.
TEST(HostLimitsTest, RaiseFdLimitToHardSetsTheSoftLimitToTheHardOne) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 128) _exit(10);
    const rlim_t hard = rl.rlim_max;
    rl.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(11);
    Result<FdLimit> raised = RaiseFdLimitToHard();
    if (!raised) _exit(12);
    if (raised->soft_before != 64 || raised->soft != hard || raised->hard != hard) _exit(13);
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != hard) _exit(14);
    // Already at the hard limit: nothing to do, the same answer.
    Result<FdLimit> again = RaiseFdLimitToHard();
    _exit(again && again->soft_before == hard && again->soft == hard ? 0 : 15);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(HostLimitsTest, MemoryBindsOnASmallHost) {
  FakeHost host;
  host.files["/proc/meminfo"] = "MemTotal: 1000000 kB\nMemFree: 1 kB\nMemAvailable:   512000 kB\n";
  HostCapacity c = AssessHostCapacity(host.Source(), {1, 6, 1024});
  EXPECT_EQ(*c.cells, 500u);
  EXPECT_EQ(c.binding, "memory: MemAvailable");
}

TEST(HostLimitsTest, ANamespaceLimitOfZeroMeansNoCells) {
  FakeHost host;
  host.files["/proc/sys/user/max_net_namespaces"] = "0\n";
  HostCapacity c = AssessHostCapacity(host.Source());
  EXPECT_EQ(*c.cells, 0u);
  EXPECT_EQ(c.binding, "namespaces: user.max_net_namespaces");
}

TEST(HostLimitsTest, TasksInUseAreTakenFromThePidLimits) {
  FakeHost host;
  host.files["/proc/sys/kernel/threads-max"] = "1500\n";
  HostCapacity c = AssessHostCapacity(host.Source(), {1, 1, 1});
  EXPECT_EQ(*c.cells, 500u);  // 1500 - 1000 tasks now
  EXPECT_EQ(c.binding, "pids: kernel.threads-max");
}

TEST(HostLimitsTest, CgroupV1PidsHierarchyIsRead) {
  FakeHost host;
  host.files["/proc/self/cgroup"] =
      "12:pids:/system.slice/mcpcell.service\n11:cpu,cpuacct:/system.slice\n0::/\n";
  host.files["/sys/fs/cgroup/pids/system.slice/mcpcell.service/pids.max"] = "700\n";
  host.files["/sys/fs/cgroup/pids/system.slice/mcpcell.service/pids.current"] = "100\n";
  HostCapacity c = AssessHostCapacity(host.Source(), {1, 1, 1});
  EXPECT_EQ(*c.cells, 600u);
  EXPECT_EQ(c.binding, "pids: cgroup /sys/fs/cgroup/pids/system.slice/mcpcell.service/pids.max");
}

TEST(HostLimitsTest, InotifyIsReportedButDoesNotCapIdleCells) {
  FakeHost host;
  host.files["/proc/sys/fs/inotify/max_user_instances"] = "1\n";
  HostCapacity c = AssessHostCapacity(host.Source(), {2, 6, 1024});
  EXPECT_EQ(*c.cells, 2000u);
  EXPECT_NE(c.inotify.find("more than 1 cells"), std::string::npos) << c.inotify;
}

TEST(HostLimitsTest, UnreadableAndMalformedFilesAreNamed) {
  FakeHost host;
  host.files.erase("/proc/sys/kernel/pid_max");
  host.files["/proc/sys/user/max_user_namespaces"] = "lots\n";
  host.files["/proc/sys/fs/file-nr"] = "12\n";
  HostCapacity c = AssessHostCapacity(host.Source());
  const std::string text = FormatHostCapacity(c);
  EXPECT_NE(text.find("not read: /proc/sys/kernel/pid_max"), std::string::npos) << text;
  EXPECT_NE(text.find("/proc/sys/user/max_user_namespaces (not a number: \"lots\")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("/proc/sys/fs/file-nr"), std::string::npos) << text;
  EXPECT_EQ(Find(c, "pids: kernel.pid_max"), nullptr);
}

TEST(HostLimitsTest, NothingReadableGivesNoCount) {
  HostCapacity c = AssessHostCapacity([](const std::string&) { return std::nullopt; });
  EXPECT_FALSE(c.cells.has_value());
  EXPECT_NE(FormatHostCapacity(c).find("unknown"), std::string::npos);
}

TEST(HostLimitsTest, TheRealHostGivesACount) {
  HostCapacity c = AssessHostCapacity(RealTextSource());
  ASSERT_TRUE(c.cells.has_value()) << FormatHostCapacity(c);
  EXPECT_FALSE(c.binding.empty());
}

}  // namespace
}  // namespace mcpcell
