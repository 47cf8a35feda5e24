// Capability dropping, checked on real processes: a forked child does what the exec path
// does and then execs a program, whose capability sets are read from its /proc status.
// The exec matters: uid 0 would normally regain every capability at execve, which the
// locked SECBIT_NOROOT prevents.
#include "sandbox/linux/caps.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace mcpcell::sandbox {
namespace {

bool WriteProcFile(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// A new user namespace where we are root with full capabilities, as in a cell's child.
bool EnterUserNamespaceAsRoot() {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER) != 0) return false;
  return WriteProcFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") &&
         WriteProcFile("/proc/self/setgroups", "deny") &&
         WriteProcFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
}

struct ChildResult {
  int status = 0;
  std::string output;  // stdout of the child (the exec'd program's, or an error message)
};

// Runs `prepare` in a forked child; if it returns "", the child execs `grep ^Cap
// /proc/self/status`; otherwise the child prints the message and exits 3. no_new_privs is
// left off on purpose: it would also stop uid 0 from regaining capabilities at execve, and
// these tests check that the capability drop holds on its own (a separate layer).
template <typename Fn>
ChildResult RunThenExecGrep(Fn prepare) {
  int out[2];
  if (pipe(out) != 0) return {-1, "pipe failed"};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    const std::string err = prepare();
    if (!err.empty()) {
      if (write(1, err.data(), err.size()) < 0) _exit(4);
      _exit(3);
    }
    execl("/bin/grep", "grep", "^Cap", "/proc/self/status", static_cast<char*>(nullptr));
    _exit(6);
  }
  close(out[1]);
  ChildResult r;
  char buf[1024];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) r.output.append(buf, n);
  close(out[0]);
  waitpid(pid, &r.status, 0);
  return r;
}

void ExpectAllCapsZero(const ChildResult& r) {
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
      << "status " << r.status << ": " << r.output;
  int lines = 0;
  for (const char* key : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
    const size_t pos = r.output.find(key);
    ASSERT_NE(pos, std::string::npos) << key << " missing in\n" << r.output;
    EXPECT_EQ(r.output.substr(pos + std::strlen(key) + 1, 16), "0000000000000000")
        << key << " not empty in\n"
        << r.output;
    ++lines;
  }
  EXPECT_EQ(lines, 5);
}

TEST(Caps, UserNamespaceRootExecsWithNoCapabilities) {
  ChildResult r = RunThenExecGrep([]() -> std::string {
    if (!EnterUserNamespaceAsRoot()) return std::string("userns: ") + strerror(errno);
    Result<CapSets> before = ReadCapSets();
    if (!before.ok() || before->effective == 0) return "expected capabilities in the userns";
    if (Status s = DropBoundingAndAmbientCaps(); !s.ok()) return s.error().message;
    if (Status s = ClearAllCaps(); !s.ok()) return s.error().message;
    return "";
  });
  ExpectAllCapsZero(r);
}

// Without SECBIT_NOROOT the same exec as uid 0 would get capabilities back: this is what
// the previous test would miss if DropBoundingAndAmbientCaps forgot the securebits.
TEST(Caps, WithoutOurDropUidZeroRegainsCapabilities) {
  ChildResult r = RunThenExecGrep([]() -> std::string {
    if (!EnterUserNamespaceAsRoot()) return std::string("userns: ") + strerror(errno);
    if (Status s = ClearAllCaps(); s.ok()) return "ClearAllCaps must fail: bounding set kept";
    return "";
  });
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
  EXPECT_EQ(r.output.find("CapEff:\t0000000000000000"), std::string::npos) << r.output;
}

// Cell init's split: init drops bounding/ambient once, a forked child (which inherits that)
// only clears its permitted set after the uid change, and still execs with nothing.
TEST(Caps, InitDropsOnceAndForkedChildOnlyClearsPermitted) {
  ChildResult r = RunThenExecGrep([]() -> std::string {
    if (!EnterUserNamespaceAsRoot()) return std::string("userns: ") + strerror(errno);
    if (Status s = DropBoundingAndAmbientCaps(); !s.ok()) return s.error().message;
    if (Status s = VerifyBoundingAndAmbientEmpty(); !s.ok()) return s.error().message;
    pid_t child = fork();  // as init's fork for an exec
    if (child < 0) return std::string("fork: ") + strerror(errno);
    if (child > 0) {
      int status = 0;
      waitpid(child, &status, 0);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 5);
    }
    if (Status s = ClearPermittedCaps(); !s.ok()) return s.error().message;
    return "";
  });
  ExpectAllCapsZero(r);
}

// VerifyBoundingAndAmbientEmpty must notice a bounding set that was never dropped.
TEST(Caps, VerifyBoundingFailsWhenNotDropped) {
  ChildResult r = RunThenExecGrep([]() -> std::string {
    if (!EnterUserNamespaceAsRoot()) return std::string("userns: ") + strerror(errno);
    Status s = VerifyBoundingAndAmbientEmpty();
    if (s.ok()) return "VerifyBoundingAndAmbientEmpty must fail with a full bounding set";
    if (s.error().message.find("bnd=") == std::string::npos) return s.error().message;
    return "";
  });
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
}

TEST(Caps, UidChangeThenClearAsRealRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a second uid";
  ChildResult r = RunThenExecGrep([]() -> std::string {
    if (Status s = DropBoundingAndAmbientCaps(); !s.ok()) return s.error().message;
    if (setresgid(65534, 65534, 65534) != 0 || setgroups(0, nullptr) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      return std::string("uid change: ") + strerror(errno);
    }
    if (Status s = ClearAllCaps(); !s.ok()) return s.error().message;
    return "";
  });
  ExpectAllCapsZero(r);
}

TEST(Caps, DropFailsWithoutCapSetpcapAndSaysWhy) {
  pid_t pid = fork();
  if (pid == 0) {
    // An unprivileged identity has no CAP_SETPCAP: dropping from the bounding set fails.
    if (geteuid() == 0 &&
        (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) {
      _exit(2);
    }
    Status s = DropBoundingAndAmbientCaps();
    _exit(!s.ok() && s.error().message.find("cap_drop_bound") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(Caps, ReadCapSetsMatchesProc) {
  Result<CapSets> self = ReadCapSets();
  ASSERT_TRUE(self.ok()) << self.error().message;
  Result<CapSets> by_pid = ReadCapSets(getpid());
  ASSERT_TRUE(by_pid.ok()) << by_pid.error().message;
  EXPECT_EQ(self->bounding, by_pid->bounding);
  EXPECT_NE(self->bounding, 0u);  // a normal test process has a full bounding set
  EXPECT_FALSE(ReadCapSets(0x3ffffff0).ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
