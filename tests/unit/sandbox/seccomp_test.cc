// The default seccomp filter, checked two ways: (1) the compiled BPF is run by a small
// classic-BPF interpreter on synthetic seccomp_data, so every rule, argument condition and
// ABI decision is checked exactly; (2) the filter is installed in forked children of this
// test and the real syscalls are made, so the kernel's verdict is checked too.
#include "sandbox/linux/seccomp.h"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/unit/sandbox/seccomp_denied_calls.h"

namespace mcpcell::sandbox {
namespace {

using testing::AllowedCalls;
using testing::DeniedCalls;

constexpr uint32_t kRetErrnoEperm = SECCOMP_RET_ERRNO | EPERM;
constexpr uint32_t kRetErrnoEnosys = SECCOMP_RET_ERRNO | ENOSYS;

// Classic BPF as the kernel's seccomp runs it: A, X, 16 words of scratch memory, loads
// only from seccomp_data. Unknown opcodes fail the test rather than guessing.
uint32_t RunBpf(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  const auto* bytes = reinterpret_cast<const uint8_t*>(&data);
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& i = prog[pc];
    const uint32_t src = BPF_SRC(i.code) == BPF_X ? x : i.k;
    switch (BPF_CLASS(i.code)) {
      case BPF_LD:
        if (BPF_MODE(i.code) == BPF_ABS && BPF_SIZE(i.code) == BPF_W && i.k + 4 <= sizeof data) {
          std::memcpy(&a, bytes + i.k, 4);
        } else if (BPF_MODE(i.code) == BPF_IMM) {
          a = i.k;
        } else if (BPF_MODE(i.code) == BPF_MEM) {
          a = mem[i.k % BPF_MEMWORDS];
        } else {
          ADD_FAILURE() << "unsupported load 0x" << std::hex << i.code;
          return 0;
        }
        break;
      case BPF_LDX:
        x = BPF_MODE(i.code) == BPF_MEM ? mem[i.k % BPF_MEMWORDS] : i.k;
        break;
      case BPF_ST:
        mem[i.k % BPF_MEMWORDS] = a;
        break;
      case BPF_STX:
        mem[i.k % BPF_MEMWORDS] = x;
        break;
      case BPF_ALU:
        switch (BPF_OP(i.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_LSH:
            a <<= src;
            break;
          case BPF_RSH:
            a >>= src;
            break;
          case BPF_NEG:
            a = -a;
            break;
          default:
            ADD_FAILURE() << "unsupported alu op";
            return 0;
        }
        break;
      case BPF_JMP: {
        bool taken = false;
        switch (BPF_OP(i.code)) {
          case BPF_JA:
            pc += i.k;
            continue;
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            ADD_FAILURE() << "unsupported jump";
            return 0;
        }
        pc += taken ? i.jt : i.jf;
        break;
      }
      case BPF_RET:
        return BPF_RVAL(i.code) == BPF_A ? a : i.k;
      case BPF_MISC:
        if (BPF_MISCOP(i.code) == BPF_TAX)
          x = a;
        else
          a = x;
        break;
      default:
        ADD_FAILURE() << "unsupported class";
        return 0;
    }
  }
  ADD_FAILURE() << "program fell off the end";
  return 0;
}

const SeccompProgram& Program() {
  static const SeccompProgram* p = [] {
    Result<SeccompProgram> r = CompileDefaultSeccompFilter();
    if (!r.ok()) {
      ADD_FAILURE() << r.error().message;
      return new SeccompProgram{};
    }
    return new SeccompProgram(std::move(r).value());
  }();
  return *p;
}

uint32_t Verdict(const char* name, std::vector<uint64_t> args = {}, uint32_t arch = 0) {
  seccomp_data d{};
  d.nr = seccomp_syscall_resolve_name(name);
  d.arch = arch != 0 ? arch : seccomp_arch_native();
  for (size_t i = 0; i < args.size() && i < 6; ++i) d.args[i] = args[i];
  return RunBpf(Program().filter, d);
}

TEST(SeccompBpf, EveryUnconditionalRuleRefusesWithItsErrno) {
  ASSERT_FALSE(Program().filter.empty());
  for (const SeccompRule& r : DefaultSeccompRules()) {
    if (!r.condition.empty()) continue;
    if (seccomp_syscall_resolve_name(r.syscall.c_str()) == __NR_SCMP_ERROR) continue;
    EXPECT_EQ(Verdict(r.syscall.c_str()), SECCOMP_RET_ERRNO | r.errno_value) << r.syscall;
  }
  EXPECT_EQ(Verdict("clone3"), kRetErrnoEnosys);
}

TEST(SeccompBpf, OrdinarySyscallsAreAllowed) {
  for (const char* name : {"read", "write", "openat", "execve", "mmap", "futex", "wait4", "connect",
                           "getdents64", "exit_group", "rt_sigreturn"}) {
    EXPECT_EQ(Verdict(name), SECCOMP_RET_ALLOW) << name;
  }
}

TEST(SeccompBpf, NamespaceFlagsDecideCloneAndUnshare) {
  EXPECT_EQ(Verdict("clone", {SIGCHLD}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Verdict("clone", {CLONE_VM | CLONE_THREAD | CLONE_SIGHAND | CLONE_SETTLS}),
            SECCOMP_RET_ALLOW);
  for (uint64_t f : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                     CLONE_NEWPID, CLONE_NEWNET}) {
    EXPECT_EQ(Verdict("clone", {f | SIGCHLD}), kRetErrnoEperm) << std::hex << f;
    EXPECT_EQ(Verdict("unshare", {f | CLONE_FS}), kRetErrnoEperm) << std::hex << f;
  }
  EXPECT_EQ(Verdict("unshare", {CLONE_NEWTIME}), kRetErrnoEperm);
  EXPECT_EQ(Verdict("unshare", {CLONE_FS | CLONE_FILES}), SECCOMP_RET_ALLOW);
}

TEST(SeccompBpf, SocketFamilies) {
  for (uint64_t ok : {AF_UNIX, AF_INET, AF_INET6}) {
    EXPECT_EQ(Verdict("socket", {ok, SOCK_STREAM}), SECCOMP_RET_ALLOW) << ok;
  }
  for (uint64_t bad : {0, 3, 4, 5, 9, 11, 16, 17, 40, 45, 255}) {
    EXPECT_EQ(Verdict("socket", {bad, SOCK_STREAM}), kRetErrnoEperm) << bad;
  }
  // The kernel truncates the domain to int: high bits must not smuggle a family through.
  EXPECT_EQ(Verdict("socket", {(1ull << 32) | AF_NETLINK}), kRetErrnoEperm);
  EXPECT_EQ(Verdict("socket", {(1ull << 32) | AF_INET}), kRetErrnoEperm);
}

TEST(SeccompBpf, TerminalIoctls) {
  EXPECT_EQ(Verdict("ioctl", {0, TIOCSTI}), kRetErrnoEperm);
  EXPECT_EQ(Verdict("ioctl", {0, TIOCLINUX}), kRetErrnoEperm);
  EXPECT_EQ(Verdict("ioctl", {0, (0xffffffffull << 32) | TIOCSTI}), kRetErrnoEperm);
  EXPECT_EQ(Verdict("ioctl", {0, TCGETS}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Verdict("ioctl", {0, FIONREAD}), SECCOMP_RET_ALLOW);
}

TEST(SeccompBpf, Personality) {
  for (uint64_t ok : {0x0ull, 0x8ull, 0x20000ull, 0x20008ull, 0xffffffffull}) {
    EXPECT_EQ(Verdict("personality", {ok}), SECCOMP_RET_ALLOW) << std::hex << ok;
  }
  for (uint64_t bad : {0x0040000ull /*ADDR_NO_RANDOMIZE*/, 0x0400000ull /*READ_IMPLIES_EXEC*/,
                       0x1ull, 0x0200000ull, 0xfffffffeull}) {
    EXPECT_EQ(Verdict("personality", {bad}), kRetErrnoEperm) << std::hex << bad;
  }
}

#if defined(__x86_64__)
TEST(SeccompBpf, OtherAbisAreKilled) {
  const uint32_t kill = SECCOMP_RET_KILL_PROCESS;
  EXPECT_EQ(Verdict("getpid", {}, AUDIT_ARCH_I386), kill);
  EXPECT_EQ(Verdict("getpid", {}, AUDIT_ARCH_AARCH64), kill);
  seccomp_data x32{};
  x32.arch = AUDIT_ARCH_X86_64;
  x32.nr = 0x40000000 | 39;  // __X32_SYSCALL_BIT | getpid
  EXPECT_EQ(RunBpf(Program().filter, x32), kill);
}
#endif

TEST(SeccompRules, EveryRuleHasAReasonAndALiveProbe) {
  std::set<std::string> probed;
  for (const auto& c : DeniedCalls()) probed.insert(c.syscall);
  for (const SeccompRule& r : DefaultSeccompRules()) {
    EXPECT_FALSE(r.reason.empty()) << r.syscall;
    EXPECT_TRUE(probed.count(r.syscall))
        << "no harmless invocation for " << r.syscall << " in seccomp_denied_calls.h";
  }
}

TEST(SeccompRules, SecurityDocExplainsEveryRule) {
  std::ifstream in(std::string(MCPCELL_SOURCE_DIR) + "/docs/security.md");
  ASSERT_TRUE(in.good()) << "docs/security.md missing";
  std::stringstream doc;
  doc << in.rdbuf();
  for (const SeccompRule& r : DefaultSeccompRules()) {
    EXPECT_NE(doc.str().find("`" + r.syscall + "`"), std::string::npos)
        << r.syscall << " is not explained in docs/security.md";
  }
}

// Runs fn in a forked child with no_new_privs and the filter; returns its wait status.
template <typename Fn>
int InChildWithFilter(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(100);
    if (!InstallSeccompFilter(Program()).ok()) _exit(101);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(SeccompLive, EveryDeniedCallFailsWithItsErrno) {
  const auto& calls = DeniedCalls();
  for (size_t i = 0; i < calls.size(); ++i) {
    int status = InChildWithFilter([&] {
      const long r = calls[i].invoke();
      return r == -calls[i].expected_errno ? 0 : 1;
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << calls[i].syscall << " (" << calls[i].variant << "): status " << status;
  }
}

// The live test above only proves something if the kernel itself would not have answered
// EPERM: as root (CI), every harmless invocation gets another answer without the filter.
TEST(SeccompLive, WithoutTheFilterTheKernelAnswersOtherwise) {
  if (geteuid() != 0) GTEST_SKIP() << "unprivileged: the kernel itself refuses some with EPERM";
  for (const auto& call : DeniedCalls()) {
    pid_t pid = fork();
    if (pid == 0) _exit(call.invoke() == -EPERM ? 1 : 0);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << call.syscall << " (" << call.variant << ") is EPERM even without the filter";
  }
}

TEST(SeccompLive, AllowedCallsStillWork) {
  for (const auto& call : AllowedCalls()) {
    int status = InChildWithFilter([&] { return call.invoke() == -EPERM ? 1 : 0; });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << call.what;
  }
  // fork and threads go through clone (clone3 gets ENOSYS and glibc falls back).
  int status = InChildWithFilter([] {
    std::thread t([] {});
    t.join();
    pid_t p = fork();
    if (p == 0) _exit(7);
    int s = 0;
    waitpid(p, &s, 0);
    return WIFEXITED(s) && WEXITSTATUS(s) == 7 ? 0 : 1;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

#if defined(__x86_64__)
TEST(SeccompLive, I386AbiKillsTheProcess) {
  int status = InChildWithFilter([] {
    long ret = 20;  // i386 getpid through int 0x80
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
}

TEST(SeccompLive, X32AbiKillsTheProcess) {
  int status = InChildWithFilter([] {
    syscall(0x40000000 | SYS_getpid);
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
}
#endif

TEST(SeccompLive, InstallRefusesWithoutNoNewPrivs) {
  pid_t pid = fork();
  if (pid == 0) {
    Status s = InstallSeccompFilter(Program());
    _exit(!s.ok() && s.error().message.find("no_new_privs") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(InstallSeccompFilter(SeccompProgram{}).ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
