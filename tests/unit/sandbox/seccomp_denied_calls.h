// Harmless invocations of every syscall the default seccomp filter refuses, shared by the
// seccomp unit test (filter installed in a forked child) and the confinement probe that
// runs inside real cells. "Harmless" matters: if the filter were broken, the call reaches
// the kernel, so every argument is chosen to fail there (bad fd, bad magic, missing path)
// or to affect only the calling child (unshare, personality).
// Each invoke() returns the syscall's result, or -errno.
#pragma once

#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/reboot.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace mcpcell::testing {

struct DeniedCall {
  const char* syscall;  // as in DefaultSeccompRules()
  const char* variant;  // what is being tried, for messages
  long (*invoke)();
  int expected_errno = EPERM;
};

inline long Ret(long r) { return r < 0 ? -errno : r; }

// fork-like raw clone: if the filter let it through, the child leaves at once.
inline long CloneAndExit(unsigned long flags) {
  long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (r == 0) _exit(0);
  return Ret(r);
}

inline const std::vector<DeniedCall>& DeniedCalls() {
  static const auto* calls = new std::vector<DeniedCall>{
      {"init_module", "empty image", [] { return Ret(syscall(SYS_init_module, nullptr, 0, "")); }},
      {"finit_module", "bad fd", [] { return Ret(syscall(SYS_finit_module, -1, "", 0)); }},
      {"delete_module", "missing module",
       [] { return Ret(syscall(SYS_delete_module, "mcpcell_no_such_module", O_NONBLOCK)); }},
      {"kexec_load", "bad flags",
       [] { return Ret(syscall(SYS_kexec_load, 0, 0, nullptr, 0xdead0000ul)); }},
      {"kexec_file_load", "bad fds and flags",
       [] { return Ret(syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, 0xdead0000ul)); }},
      {"bpf", "bad command", [] { return Ret(syscall(SYS_bpf, -1, nullptr, 0)); }},
      {"perf_event_open", "null attr",
       [] { return Ret(syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0)); }},
      {"userfaultfd", "bad flags", [] { return Ret(syscall(SYS_userfaultfd, ~0u)); }},
      {"io_uring_setup", "zero entries",
       [] { return Ret(syscall(SYS_io_uring_setup, 0, nullptr)); }},
      {"io_uring_enter", "bad fd",
       [] { return Ret(syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0)); }},
      {"io_uring_register", "bad fd",
       [] { return Ret(syscall(SYS_io_uring_register, -1, 0, nullptr, 0)); }},
      {"add_key", "null type",
       [] { return Ret(syscall(SYS_add_key, nullptr, nullptr, nullptr, 0, 0)); }},
      {"request_key", "null type",
       [] { return Ret(syscall(SYS_request_key, nullptr, nullptr, nullptr, 0)); }},
      {"keyctl", "bad op", [] { return Ret(syscall(SYS_keyctl, -1, 0, 0, 0, 0)); }},
      {"ptrace", "missing pid",
       [] { return Ret(syscall(SYS_ptrace, 16 /*ATTACH*/, 0x3ffffff0, 0, 0)); }},
      {"process_vm_readv", "missing pid",
       [] { return Ret(syscall(SYS_process_vm_readv, 0x3ffffff0, nullptr, 0, nullptr, 0, 0)); }},
      {"process_vm_writev", "missing pid",
       [] { return Ret(syscall(SYS_process_vm_writev, 0x3ffffff0, nullptr, 0, nullptr, 0, 0)); }},
      {"pidfd_getfd", "bad pidfd", [] { return Ret(syscall(SYS_pidfd_getfd, -1, 0, 0)); }},
      {"mount", "missing target",
       [] { return Ret(syscall(SYS_mount, "none", "/nonexistent-mcpcell", "tmpfs", 0, nullptr)); }},
      {"umount2", "missing target",
       [] { return Ret(syscall(SYS_umount2, "/nonexistent-mcpcell", 0)); }},
      {"fsopen", "unknown fs", [] { return Ret(syscall(SYS_fsopen, "mcpcellnofs", 0)); }},
      {"fsconfig", "bad fd", [] { return Ret(syscall(SYS_fsconfig, -1, 0, nullptr, nullptr, 0)); }},
      {"fsmount", "bad fd", [] { return Ret(syscall(SYS_fsmount, -1, 0, 0)); }},
      {"fspick", "missing path",
       [] { return Ret(syscall(SYS_fspick, AT_FDCWD, "/nonexistent-mcpcell", 0)); }},
      {"move_mount", "bad fds", [] { return Ret(syscall(SYS_move_mount, -1, "", -1, "", 0)); }},
      {"open_tree", "missing path",
       [] { return Ret(syscall(SYS_open_tree, AT_FDCWD, "/nonexistent-mcpcell", 0)); }},
      {"mount_setattr", "bad fd",
       [] { return Ret(syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0)); }},
      {"pivot_root", "missing paths",
       [] { return Ret(syscall(SYS_pivot_root, "/nonexistent-mcpcell", "/nonexistent-mcpcell")); }},
      {"open_by_handle_at", "bad fd",
       [] { return Ret(syscall(SYS_open_by_handle_at, -1, nullptr, 0)); }},
      {"setns", "bad fd", [] { return Ret(syscall(SYS_setns, -1, 0)); }},
      {"unshare", "CLONE_NEWUSER", [] { return Ret(syscall(SYS_unshare, CLONE_NEWUSER)); }},
      {"unshare", "CLONE_NEWNET", [] { return Ret(syscall(SYS_unshare, CLONE_NEWNET)); }},
      {"unshare", "CLONE_NEWTIME", [] { return Ret(syscall(SYS_unshare, CLONE_NEWTIME)); }},
      {"unshare", "CLONE_FS|CLONE_NEWNS",
       [] { return Ret(syscall(SYS_unshare, CLONE_FS | CLONE_NEWNS)); }},
      {"clone", "CLONE_NEWUSER", [] { return CloneAndExit(CLONE_NEWUSER); }},
      {"clone", "CLONE_NEWPID", [] { return CloneAndExit(CLONE_NEWPID); }},
      {"clone", "CLONE_NEWNET|CLONE_NEWNS",
       [] { return CloneAndExit(CLONE_NEWNET | CLONE_NEWNS); }},
      {"clone3", "any",
       [] {
         uint64_t args[11] = {};
         args[4] = SIGCHLD;  // exit_signal
         long r = syscall(SYS_clone3, args, sizeof args);
         if (r == 0) _exit(0);
         return Ret(r);
       },
       ENOSYS},
      {"personality", "ADDR_NO_RANDOMIZE",
       [] { return Ret(syscall(SYS_personality, 0x0040000ul /*PER_LINUX | ADDR_NO_RANDOMIZE*/)); }},
      {"personality", "READ_IMPLIES_EXEC",
       [] { return Ret(syscall(SYS_personality, 0x0400000ul /*PER_LINUX | READ_IMPLIES_EXEC*/)); }},
      {"reboot", "bad magic", [] { return Ret(syscall(SYS_reboot, 0, 0, 0, nullptr)); }},
      {"swapon", "missing file",
       [] { return Ret(syscall(SYS_swapon, "/nonexistent-mcpcell", 0)); }},
      {"swapoff", "missing file", [] { return Ret(syscall(SYS_swapoff, "/nonexistent-mcpcell")); }},
      {"settimeofday", "null (no-op)",
       [] { return Ret(syscall(SYS_settimeofday, nullptr, nullptr)); }},
      {"clock_settime", "CLOCK_MONOTONIC (not settable)",
       [] {
         timespec ts{1, 0};
         return Ret(syscall(SYS_clock_settime, CLOCK_MONOTONIC, &ts));
       }},
      {"clock_adjtime", "bad clock",
       [] {
         timex tx{};
         return Ret(syscall(SYS_clock_adjtime, -1000, &tx));
       }},
      {"adjtimex", "read only",
       [] {
         timex tx{};
         return Ret(syscall(SYS_adjtimex, &tx));
       }},
      {"syslog", "buffer size (read only)",
       [] { return Ret(syscall(SYS_syslog, 10, nullptr, 0)); }},
      {"acct", "missing file", [] { return Ret(syscall(SYS_acct, "/nonexistent-mcpcell/x")); }},
      {"quotactl", "missing device",
       [] { return Ret(syscall(SYS_quotactl, 0, "/nonexistent-mcpcell", 0, nullptr)); }},
      {"quotactl_fd", "bad fd", [] { return Ret(syscall(SYS_quotactl_fd, -1, 0, 0, nullptr)); }},
      {"iopl", "bad level", [] { return Ret(syscall(SYS_iopl, 4)); }},
      {"ioperm", "zero range off", [] { return Ret(syscall(SYS_ioperm, 0x80, 0, 0)); }},
      {"ioctl", "TIOCSTI",
       [] {
         char c = 0;
         return Ret(syscall(SYS_ioctl, -1, TIOCSTI, &c));
       }},
      {"ioctl", "TIOCSTI with high bits",
       [] {
         char c = 0;
         return Ret(syscall(SYS_ioctl, -1, (1ul << 32) | TIOCSTI, &c));
       }},
      {"ioctl", "TIOCLINUX",
       [] {
         char c = 0;
         return Ret(syscall(SYS_ioctl, -1, TIOCLINUX, &c));
       }},
      {"socket", "AF_NETLINK", [] { return Ret(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 0)); }},
      {"socket", "AF_PACKET", [] { return Ret(syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0)); }},
      {"socket", "AF_VSOCK", [] { return Ret(syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0)); }},
      {"socket", "AF_UNSPEC", [] { return Ret(syscall(SYS_socket, AF_UNSPEC, SOCK_STREAM, 0)); }},
      {"socket", "AF_UNIX with high bits",
       [] { return Ret(syscall(SYS_socket, (1ul << 32) | AF_UNIX, SOCK_STREAM, 0)); }},
  };
  return *calls;
}

// Calls that must keep working under the filter: result >= 0, or -errno other than EPERM.
struct AllowedCall {
  const char* what;
  long (*invoke)();
};

inline const std::vector<AllowedCall>& AllowedCalls() {
  static const auto* calls = new std::vector<AllowedCall>{
      {"socket(AF_UNIX)", [] { return Ret(syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0)); }},
      {"socket(AF_INET)", [] { return Ret(syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0)); }},
      {"socket(AF_INET6)", [] { return Ret(syscall(SYS_socket, AF_INET6, SOCK_DGRAM, 0)); }},
      {"unshare(CLONE_FS)", [] { return Ret(syscall(SYS_unshare, CLONE_FS)); }},
      {"personality(query)", [] { return Ret(syscall(SYS_personality, 0xffffffffu)); }},
      {"personality(PER_LINUX)", [] { return Ret(syscall(SYS_personality, PER_LINUX)); }},
      {"ioctl(TCGETS) on a bad fd", [] { return Ret(syscall(SYS_ioctl, -1, TCGETS, nullptr)); }},
      {"clone without namespace flags", [] { return CloneAndExit(0); }},
      {"getpid", [] { return Ret(syscall(SYS_getpid)); }},
  };
  return *calls;
}

}  // namespace mcpcell::testing
