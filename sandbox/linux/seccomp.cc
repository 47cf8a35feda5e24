// The default seccomp filter: a deny-list compiled with libseccomp, plus one hand-written
// block for personality(2) (see PersonalityPrefix for why). Reasons live next to each rule
// here and, at more length, in docs/security.md.
#include "sandbox/linux/seccomp.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace mcpcell::sandbox {
namespace {

enum class Condition {
  kAlways,
  kAnyFlag,       // arg has any of `values` set (one rule per flag)
  kIoctlRequest,  // ioctl's request (arg 1, 32-bit) equals one of `values`
  kSocketFamily,  // socket's domain (arg 0) is not AF_UNIX, AF_INET or AF_INET6
  kPersonality,   // personality's arg is not one of the harmless values (hand-written)
};

struct RuleDef {
  const char* syscall;
  Condition condition;
  unsigned arg;
  std::vector<uint64_t> values;
  const char* condition_text;
  int errno_value;
  const char* reason;
};

constexpr uint64_t kCloneNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                             CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                             CLONE_NEWNET};
// Values personality(2) may take: PER_LINUX, PER_LINUX32, UNAME26 with each, and the
// 0xffffffff query. Everything else (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, foreign
// personalities) is refused.
constexpr uint32_t kAllowedPersonalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

std::vector<uint64_t> NamespaceFlags(bool with_time) {
  std::vector<uint64_t> flags(std::begin(kCloneNamespaceFlags), std::end(kCloneNamespaceFlags));
  if (with_time) flags.push_back(CLONE_NEWTIME);
  return flags;
}

const std::vector<RuleDef>& RuleDefs() {
  static const auto* defs = new std::vector<RuleDef>{
      // Kernel code loading: a cell must never change the host kernel.
      {"init_module", Condition::kAlways, 0, {}, "", EPERM, "loads code into the host kernel"},
      {"finit_module", Condition::kAlways, 0, {}, "", EPERM, "loads code into the host kernel"},
      {"delete_module", Condition::kAlways, 0, {}, "", EPERM, "unloads host kernel modules"},
      {"kexec_load", Condition::kAlways, 0, {}, "", EPERM, "replaces the running kernel"},
      {"kexec_file_load", Condition::kAlways, 0, {}, "", EPERM, "replaces the running kernel"},
      // Large kernel attack surfaces that ordinary programs do not need.
      {"bpf",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "eBPF verifier and JIT: large attack surface with a history of privilege escalations"},
      {"perf_event_open",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "performance counters: attack surface and side channels on other workloads"},
      {"userfaultfd",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "lets a process stall kernel page faults at chosen points, widening exploit races"},
      {"io_uring_setup",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "io_uring performs I/O that seccomp cannot see, and has been a rich source of bugs"},
      {"io_uring_enter", Condition::kAlways, 0, {}, "", EPERM, "see io_uring_setup"},
      {"io_uring_register", Condition::kAlways, 0, {}, "", EPERM, "see io_uring_setup"},
      // The kernel keyring is not namespaced per cell.
      {"add_key", Condition::kAlways, 0, {}, "", EPERM, "kernel keyrings are shared, not per cell"},
      {"request_key", Condition::kAlways, 0, {}, "", EPERM, "kernel keyrings are shared"},
      {"keyctl", Condition::kAlways, 0, {}, "", EPERM, "kernel keyrings are shared"},
      // Reading or steering other processes.
      {"ptrace",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "tracing other processes: tampering with siblings, historic sandbox escapes"},
      {"process_vm_readv", Condition::kAlways, 0, {}, "", EPERM, "ptrace-equivalent memory read"},
      {"process_vm_writev", Condition::kAlways, 0, {}, "", EPERM, "ptrace-equivalent memory write"},
      {"pidfd_getfd", Condition::kAlways, 0, {}, "", EPERM, "steals another process's fds"},
      // The filesystem view is fixed by cell init.
      {"mount", Condition::kAlways, 0, {}, "", EPERM, "the mount table is set up by cell init"},
      {"umount2",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "could uncover what cell init mounted over"},
      {"fsopen", Condition::kAlways, 0, {}, "", EPERM, "new mount API: same as mount"},
      {"fsconfig", Condition::kAlways, 0, {}, "", EPERM, "new mount API: same as mount"},
      {"fsmount", Condition::kAlways, 0, {}, "", EPERM, "new mount API: same as mount"},
      {"fspick", Condition::kAlways, 0, {}, "", EPERM, "new mount API: same as mount"},
      {"move_mount", Condition::kAlways, 0, {}, "", EPERM, "new mount API: same as mount"},
      {"open_tree", Condition::kAlways, 0, {}, "", EPERM, "new mount API: clones mount trees"},
      {"mount_setattr",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "could make read-only mounts writable"},
      {"pivot_root", Condition::kAlways, 0, {}, "", EPERM, "the root is set up by cell init"},
      {"open_by_handle_at",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "opens files by handle, bypassing the mount view (the 'shocker' container escape)"},
      // Namespaces: a new user namespace hands out capabilities over fresh namespaces and
      // exposes kernel code otherwise reachable only with CAP_SYS_ADMIN.
      {"setns", Condition::kAlways, 0, {}, "", EPERM, "joining other namespaces"},
      {"unshare", Condition::kAnyFlag, 0, NamespaceFlags(true), "flags & CLONE_NEW*", EPERM,
       "creating namespaces (CLONE_FILES/CLONE_FS alone stay allowed)"},
      {"clone", Condition::kAnyFlag, 0, NamespaceFlags(false), "flags & CLONE_NEW*", EPERM,
       "creating namespaces while forking"},
      {"clone3",
       Condition::kAlways,
       0,
       {},
       "",
       ENOSYS,
       "flags live in memory seccomp cannot read; ENOSYS makes libc fall back to clone"},
      {"personality",
       Condition::kPersonality,
       0,
       {},
       "persona not LINUX/LINUX32/UNAME26/query",
       EPERM,
       "ADDR_NO_RANDOMIZE defeats ASLR, READ_IMPLIES_EXEC makes data executable"},
      // Host-wide state.
      {"reboot", Condition::kAlways, 0, {}, "", EPERM, "host power state"},
      {"swapon", Condition::kAlways, 0, {}, "", EPERM, "host swap configuration"},
      {"swapoff", Condition::kAlways, 0, {}, "", EPERM, "host swap configuration"},
      {"settimeofday", Condition::kAlways, 0, {}, "", EPERM, "the clock is not namespaced"},
      {"clock_settime", Condition::kAlways, 0, {}, "", EPERM, "the clock is not namespaced"},
      {"clock_adjtime", Condition::kAlways, 0, {}, "", EPERM, "the clock is not namespaced"},
      {"adjtimex", Condition::kAlways, 0, {}, "", EPERM, "the clock is not namespaced"},
      {"syslog",
       Condition::kAlways,
       0,
       {},
       "",
       EPERM,
       "the kernel log leaks kernel addresses and host activity"},
      {"acct", Condition::kAlways, 0, {}, "", EPERM, "host-wide process accounting"},
      {"quotactl", Condition::kAlways, 0, {}, "", EPERM, "host filesystem quotas"},
      {"quotactl_fd", Condition::kAlways, 0, {}, "", EPERM, "host filesystem quotas"},
      {"iopl", Condition::kAlways, 0, {}, "", EPERM, "raw I/O port access"},
      {"ioperm", Condition::kAlways, 0, {}, "", EPERM, "raw I/O port access"},
      // Terminal injection: pushing input into a terminal the cell shares.
      {"ioctl",
       Condition::kIoctlRequest,
       1,
       {TIOCSTI, TIOCLINUX},
       "request TIOCSTI or TIOCLINUX",
       EPERM,
       "fakes keyboard input on a shared terminal (TIOCSTI) or console (TIOCLINUX)"},
      // Network: only unix, inet and inet6 sockets; netlink, packet, vsock, bluetooth, ...
      // are attack surface and (packet) a way around the cell's network setup.
      {"socket",
       Condition::kSocketFamily,
       0,
       {},
       "domain not AF_UNIX/AF_INET/AF_INET6",
       EPERM,
       "socket families other than unix, inet, inet6"},
  };
  return *defs;
}

// libseccomp cannot express "allow only these values" for a syscall whose filter default
// is allow (one comparison per argument per rule, and allow rules equal to the default are
// refused), so personality is decided by a short hand-written block placed before the
// libseccomp program: on the native arch, nr == personality and a value outside the list
// returns EPERM; everything else falls through to libseccomp's program unchanged (which
// has no personality rule). Jumps in classic BPF are relative, so prepending is safe.
std::vector<sock_filter> PersonalityPrefix(uint32_t native_audit_arch) {
  constexpr auto kAllowed = std::size(kAllowedPersonalities);
  std::vector<sock_filter> p;
  const uint8_t block_rest = 4 + kAllowed;  // instructions after the arch check
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native_audit_arch, 0, block_rest));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 0, block_rest - 2));
  // The kernel reads the persona as an unsigned int: only the low 32 bits matter
  // (little-endian: they come first).
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  for (size_t i = 0; i < kAllowed; ++i) {
    p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAllowedPersonalities[i],
                         static_cast<uint8_t>(kAllowed - i), 0));
  }
  p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  return p;
}

Status AddRule(scmp_filter_ctx ctx, const RuleDef& def) {
  const int nr = seccomp_syscall_resolve_name(def.syscall);
  if (nr == __NR_SCMP_ERROR) return Ok();  // not on this ABI: nothing to refuse
  const uint32_t action = SCMP_ACT_ERRNO(static_cast<uint16_t>(def.errno_value));
  auto fail = [&](int rc) {
    return Error::Sys(std::string("seccomp_rule_add(") + def.syscall + ")", -rc);
  };
  switch (def.condition) {
    case Condition::kAlways:
      if (int rc = seccomp_rule_add(ctx, action, nr, 0); rc < 0) return fail(rc);
      return Ok();
    case Condition::kAnyFlag:
      for (uint64_t flag : def.values) {
        int rc =
            seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(def.arg, SCMP_CMP_MASKED_EQ, flag, flag));
        if (rc < 0) return fail(rc);
      }
      return Ok();
    case Condition::kIoctlRequest:
      // The kernel truncates the request to 32 bits; compare only those, so setting high
      // bits cannot sneak TIOCSTI past the filter.
      for (uint64_t request : def.values) {
        int rc = seccomp_rule_add(ctx, action, nr, 1,
                                  SCMP_CMP(def.arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, request));
        if (rc < 0) return fail(rc);
      }
      return Ok();
    case Condition::kSocketFamily: {
      // Allowed: AF_UNIX (1), AF_INET (2), AF_INET6 (10). Refuse 0, 3..9 and > 10; the
      // 64-bit "> 10" also refuses any value with high bits set.
      static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10);
      if (int rc = seccomp_rule_add(ctx, action, nr, 1, SCMP_A0(SCMP_CMP_GT, AF_INET6)); rc < 0)
        return fail(rc);
      for (uint64_t family : {0, 3, 4, 5, 6, 7, 8, 9}) {
        if (int rc = seccomp_rule_add(ctx, action, nr, 1, SCMP_A0(SCMP_CMP_EQ, family)); rc < 0)
          return fail(rc);
      }
      return Ok();
    }
    case Condition::kPersonality:
      return Ok();  // PersonalityPrefix
  }
  return Error::Msg(std::string("seccomp rule for ") + def.syscall + ": unknown condition");
}

Result<std::vector<sock_filter>> ExportBpf(scmp_filter_ctx ctx) {
  int fd = memfd_create("mcpcell-seccomp", MFD_CLOEXEC);
  if (fd < 0) return Error::Sys("memfd_create(\"mcpcell-seccomp\")");
  std::vector<sock_filter> out;
  Status status = Ok();
  if (int rc = seccomp_export_bpf(ctx, fd); rc < 0) {
    status = Error::Sys("seccomp_export_bpf", -rc);
  } else {
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % sizeof(sock_filter) != 0 || size > BPF_MAXINSNS * 8) {
      status = Error::Msg("seccomp_export_bpf: unexpected size " + std::to_string(size));
    } else {
      out.resize(size / sizeof(sock_filter));
      if (pread(fd, out.data(), size, 0) != size) status = Error::Sys("pread(seccomp bpf)");
    }
  }
  close(fd);
  if (!status.ok()) return status.error();
  return out;
}

}  // namespace

const std::vector<SeccompRule>& DefaultSeccompRules() {
  static const auto* rules = [] {
    auto* v = new std::vector<SeccompRule>();
    for (const RuleDef& d : RuleDefs()) {
      v->push_back({d.syscall, d.condition_text, d.errno_value, d.reason});
    }
    return v;
  }();
  return *rules;
}

Result<SeccompProgram> CompileDefaultSeccompFilter() {
  // Default allow; listed calls fail with their errno. A syscall made with another ABI's
  // calling convention (i386 int 0x80, x32) kills the whole process: the rules below are
  // written for native syscall numbers and would not match foreign ones.
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Error::Msg("seccomp_init failed (out of memory)");
  Status status = Ok();
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0) {
    status = Error::Sys("seccomp_attr_set(ACT_BADARCH, KILL_PROCESS)", -rc);
  }
#if SCMP_VER_MAJOR > 2 || (SCMP_VER_MAJOR == 2 && SCMP_VER_MINOR >= 5)
  // A binary tree over syscall numbers instead of libseccomp's default linear if-chain: a
  // syscall that has a rule (ioctl, socket, clone, ...) is found in a few comparisons, not
  // after walking every rule. Same decisions, checked by the BPF interpreter in the tests.
  if (status.ok()) {
    if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
      status = Error::Sys("seccomp_attr_set(CTL_OPTIMIZE, 2)", -rc);
    }
  }
#endif
  for (const RuleDef& def : RuleDefs()) {
    if (!status.ok()) break;
    status = AddRule(ctx, def);
  }
  Result<std::vector<sock_filter>> bpf = status.ok() ? ExportBpf(ctx) : status.error();
  seccomp_release(ctx);
  if (!bpf.ok()) return bpf.error().Wrap("compile default seccomp filter");

  const uint32_t arch = seccomp_arch_native();
  SeccompProgram program;
  program.filter = PersonalityPrefix(arch);
  program.filter.insert(program.filter.end(), bpf->begin(), bpf->end());
  if (program.filter.size() > BPF_MAXINSNS) {
    return Error::Msg("compile default seccomp filter: " + std::to_string(program.filter.size()) +
                      " instructions exceed BPF_MAXINSNS");
  }
  return program;
}

Status InstallSeccompFilter(const SeccompProgram& program) {
  if (program.filter.empty()) return Error::Msg("install seccomp filter: empty program");
  // Without no_new_privs the kernel would only accept the filter from a process with
  // CAP_SYS_ADMIN, and a later execve of a setuid file could shed it; both mean the
  // exec path ran its steps out of order.
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
    return Error::Msg("install seccomp filter: no_new_privs is not set (set it first)");
  }
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.filter.size());
  prog.filter = const_cast<sock_filter*>(program.filter.data());
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    return Error::Sys("seccomp(SECCOMP_SET_MODE_FILTER)");
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
