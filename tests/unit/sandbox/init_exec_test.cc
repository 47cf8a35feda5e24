// Cell init's exec path outside a cell: the seccomp filter is installed once on init
// (ApplySeccompToInit) and inherited by every exec, an exec refuses to start a program
// when that filter is not in effect, and the CLONE_VM child reports start failures and
// leaves init's heap alone. Each case runs in a forked child of this test, so the
// test process itself never gets a filter or another identity.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "sandbox/control/protocol.h"
#include "sandbox/init/exec.h"
#include "sandbox/linux/seccomp.h"

namespace mcpcell::sandbox {
namespace {

// Runs `body` in a forked child; the child's exit status is body's result (0 = passed).
// Failures are described on stderr by the child.
int InChild(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  return 1;
}

InitContext ContextWith(const SeccompProgram* program) {
  InitContext ctx;
  ctx.sandbox_uid = 65534;
  ctx.sandbox_gid = 65534;
  ctx.env_defaults = {"PATH=/usr/bin:/bin"};
  ctx.seccomp = program;
  return ctx;
}

// Starts `argv` with StartExec and returns its error message, or "" after it ran and
// exited 0 (anything else is described).
std::string StartAndWait(const InitContext& ctx, std::vector<std::string> argv) {
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int stdio[3] = {null_fd, null_fd, null_fd};
  control::ExecRequest request;
  request.request_id = 1;
  request.argv = std::move(argv);
  request.cwd = "/";
  Result<pid_t> pid = StartExec(request, stdio, ctx);
  ::close(null_fd);
  if (!pid.ok()) return pid.error().message;
  int status = 0;
  ::waitpid(*pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return "the program did not exit 0 (status " + std::to_string(status) + ")";
}

TEST(InitSeccomp, AFilterTheKernelRefusesFailsSetup) {
  EXPECT_EQ(InChild([] {
              SeccompProgram empty;
              const InitContext ctx = ContextWith(&empty);
              Status s = ApplySeccompToInit(ctx);
              if (s.ok()) return Fail("an empty filter was accepted");
              if (s.error().message.find("seccomp") == std::string::npos)
                return Fail("error does not name seccomp: " + s.error().message);
              if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0) return Fail("a filter is installed");
              return 0;
            }),
            0);
}

TEST(InitSeccomp, InstalledOnceOnInitAndInheritedByItsChildren) {
  Result<SeccompProgram> program = CompileDefaultSeccompFilter();
  ASSERT_TRUE(program.ok()) << program.error().message;
  EXPECT_EQ(InChild([&] {
              const InitContext ctx = ContextWith(&*program);
              if (Status s = ApplySeccompToInit(ctx); !s.ok()) return Fail(s.error().message);
              if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return Fail("no_new_privs unset");
              // A forked child (what every exec is) is under the same filter.
              return InChild([] {
                if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER)
                  return Fail("child not in filter mode");
                errno = 0;
                if (::acct(nullptr) == 0 || errno != EPERM)  // a denied call, harmless here
                  return Fail(std::string("acct: ") + std::strerror(errno));
                return 0;
              });
            }),
            0);
}

TEST(InitSeccomp, NoFilterWhenTheSpecDisablesIt) {
  EXPECT_EQ(InChild([] {
              const InitContext ctx = ContextWith(nullptr);
              if (Status s = ApplySeccompToInit(ctx); !s.ok()) return Fail(s.error().message);
              if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0) return Fail("a filter is installed");
              return 0;
            }),
            0);
}

// The exec path below needs root: it changes to another uid and sets groups.
TEST(InitExec, RefusesToStartAProgramWithoutTheCellsFilter) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setgroups/setresuid to another user)";
  Result<SeccompProgram> program = CompileDefaultSeccompFilter();
  ASSERT_TRUE(program.ok()) << program.error().message;
  // A filter is expected but this process (standing in for init) never installed it.
  std::string error = StartAndWait(ContextWith(&*program), {"/bin/true"});
  EXPECT_NE(error.find("seccomp: the cell's filter is not in effect"), std::string::npos) << error;
  // Installed on "init", the same exec runs (in a child, so this test stays unfiltered).
  EXPECT_EQ(InChild([&] {
              const InitContext ctx = ContextWith(&*program);
              if (Status s = ApplySeccompToInit(ctx); !s.ok()) return Fail(s.error().message);
              std::string e = StartAndWait(ctx, {"/bin/true"});
              return e.empty() ? 0 : Fail(e);
            }),
            0);
}

TEST(InitExec, AMissingProgramIsAnErrorNamingIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setgroups/setresuid to another user)";
  std::string error = StartAndWait(ContextWith(nullptr), {"no-such-program-xyz"});
  EXPECT_NE(error.find("not found in PATH"), std::string::npos) << error;
  error = StartAndWait(ContextWith(nullptr), {"/no/such/program"});
  EXPECT_NE(error.find("execve(\"/no/such/program\")"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}

TEST(InitExec, ABadWorkingDirectoryIsAnErrorNamingIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setgroups/setresuid to another user)";
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int stdio[3] = {null_fd, null_fd, null_fd};
  control::ExecRequest request;
  request.request_id = 1;
  request.argv = {"/bin/true"};
  request.cwd = "/no/such/dir";
  Result<pid_t> pid = StartExec(request, stdio, ContextWith(nullptr));
  ::close(null_fd);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.error().message.find("chdir(\"/no/such/dir\"): ENOENT"), std::string::npos)
      << pid.error().message;
  EXPECT_EQ(pid.error().err, ENOENT);
}

TEST(InitExec, TheProgramGetsTheStdioItWasGiven) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setgroups/setresuid to another user)";
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int stdio[3] = {null_fd, out[1], null_fd};
  control::ExecRequest request;
  request.request_id = 1;
  request.argv = {"sh", "-c", "echo hello from $(id -u)"};  // found in PATH
  request.cwd = "/";
  Result<pid_t> pid = StartExec(request, stdio, ContextWith(nullptr));
  ::close(out[1]);
  ::close(null_fd);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  char buffer[64] = {};
  ssize_t n = ::read(out[0], buffer, sizeof buffer - 1);
  ::close(out[0]);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "hello from 65534\n");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The child shares init's memory until execve: anything it allocated and still held there
// would stay allocated in init for good, once per exec.
TEST(InitExec, TheChildLeavesInitsHeapAsItFoundIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setgroups/setresuid to another user)";
  const InitContext ctx = ContextWith(nullptr);
  ASSERT_EQ(StartAndWait(ctx, {"true"}), "");  // warm up: lazy statics, the child stack
  ASSERT_EQ(StartAndWait(ctx, {"/no/such/program"}).empty(), false);
  const size_t before = ::mallinfo2().uordblks;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(StartAndWait(ctx, {"true"}), "");                  // PATH search, long names
    ASSERT_EQ(StartAndWait(ctx, {"/usr/bin/env", "true"}), "");  // a path
  }
  const size_t after = ::mallinfo2().uordblks;
  EXPECT_LT(after, before + 1024) << "init's heap grew by " << after - before << " bytes";
}

}  // namespace
}  // namespace mcpcell::sandbox
