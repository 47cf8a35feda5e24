// CloneVm (sandbox/linux/clone_vm.h), the clone under cell init's launch: the child runs
// the function on the given stack in the caller's memory (its writes are the caller's),
// the caller sleeps until the child is gone, the function's result is the exit status,
// and a failed clone3 is -errno. No privileges needed.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/linux/clone_vm.h"

namespace mcpcell::sandbox {
namespace {

struct Shared {
  int seen_by_child = 0;
  int written_by_child = 0;
  char* stack_low = nullptr;
  char* stack_high = nullptr;
  bool on_given_stack = false;
};

__attribute__((no_sanitize("address"))) int Child(void* arg) {
  auto* s = static_cast<Shared*>(arg);
  char local = 0;
  s->on_given_stack = &local > s->stack_low && &local < s->stack_high;
  s->written_by_child = s->seen_by_child + 1;  // the caller's memory, not a copy
  return 7;
}

struct clone_args VforkArgs() {
  struct clone_args ca;
  std::memset(&ca, 0, sizeof ca);
  ca.flags = CLONE_VM | CLONE_VFORK;
  ca.exit_signal = SIGCHLD;
  return ca;
}

TEST(LaunchCloneVm, TheChildRunsOnTheGivenStackInTheCallersMemoryAndExitsWithItsResult) {
  alignas(16) static char stack[16 * 1024];
  Shared shared;
  shared.seen_by_child = 41;
  shared.stack_low = stack;
  shared.stack_high = stack + sizeof stack;
  struct clone_args ca = VforkArgs();
  const long pid = CloneVm(ca, stack, sizeof stack, Child, &shared);
  ASSERT_GT(pid, 0) << std::strerror(static_cast<int>(-pid));
  // CLONE_VFORK: the child is done with our memory before CloneVm returns.
  if (CloneVmSharesMemory()) {
    EXPECT_EQ(shared.written_by_child, 42);
    EXPECT_TRUE(shared.on_given_stack);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(static_cast<pid_t>(pid), &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST(LaunchCloneVm, AFailedCloneIsMinusErrnoAndRunsNothing) {
  alignas(16) static char stack[16 * 1024];
  Shared shared;
  struct clone_args ca = VforkArgs();
  ca.flags |= CLONE_THREAD;  // without CLONE_SIGHAND: EINVAL
  const long r = CloneVm(ca, stack, sizeof stack, Child, &shared);
  EXPECT_EQ(r, -EINVAL);
  EXPECT_EQ(shared.written_by_child, 0);
}

}  // namespace
}  // namespace mcpcell::sandbox
