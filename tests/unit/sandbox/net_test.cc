// The cell's network namespace (net.h), both ways it is made: by a child of init while
// init works, or in line. Each case runs in a forked child of the test that first gets a
// user namespace of its own (so it also runs unprivileged); the host's network is never
// touched, and the namespace dies with the forked child.
#include "sandbox/linux/net.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mcpcell::sandbox {
namespace {

ino_t NetNamespaceInode() {
  struct stat st;
  return ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
}

// Exit codes of the forked case; 0 means every check held.
int CheckBothStepsIn(NamespaceChild when) {
  if (::unshare(CLONE_NEWUSER) != 0) return 10;
  const ino_t before = NetNamespaceInode();
  Result<LoopbackNamespaceChild> child = StartLoopbackNamespace(when);
  if (!child.ok()) return 11;
  if ((when == NamespaceChild::kAlways) != (child->pidfd >= 0)) return 12;
  if (NetNamespaceInode() != before) return 13;  // nothing changes before the join
  Status joined = JoinLoopbackNamespace(*child);
  if (!joined.ok()) return 14;
  if (NetNamespaceInode() == before || NetNamespaceInode() == 0) return 15;
  if (child->pidfd != -1 || child->report_fd != -1) return 16;
  // The child was reaped: no child of ours is left, not even a zombie.
  if (::waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) return 17;
  // `lo` is up and is the only interface.
  struct if_nameindex* names = ::if_nameindex();
  if (!names) return 18;
  int count = 0;
  bool lo = false;
  for (struct if_nameindex* i = names; i->if_index != 0; ++i) {
    ++count;
    lo = lo || std::strcmp(i->if_name, "lo") == 0;
  }
  ::if_freenameindex(names);
  if (count != 1 || !lo) return 19;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq req;
  std::memset(&req, 0, sizeof req);
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  if (fd < 0 || ::ioctl(fd, SIOCGIFFLAGS, &req) != 0 || !(req.ifr_flags & IFF_UP)) return 20;
  ::close(fd);
  // A listener on the new loopback works.
  Result<int> listener = ListenOnLoopback(38921);
  if (!listener.ok()) return 21;
  ::close(*listener);
  return 0;
}

int RunForked(NamespaceChild when) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(CheckBothStepsIn(when));
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

TEST(LoopbackNamespace, AChildMakesItAndInitJoinsIt) {
  EXPECT_EQ(RunForked(NamespaceChild::kAlways), 0);
}

TEST(LoopbackNamespace, MadeInLineWhenNoChildIsStarted) {
  EXPECT_EQ(RunForked(NamespaceChild::kNever), 0);
}

TEST(LoopbackNamespace, JoinWithoutUserNamespacePrivilegeNamesTheStep) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may unshare a network namespace anywhere";
  pid_t pid = ::fork();
  if (pid == 0) {
    // Without a user namespace of our own, an unprivileged unshare(CLONE_NEWNET) is EPERM.
    LoopbackNamespaceChild none;
    Status s = JoinLoopbackNamespace(none);
    _exit(!s.ok() && s.error().message.find("unshare(CLONE_NEWNET)") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace mcpcell::sandbox
