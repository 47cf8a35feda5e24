// `lo` up in the cell's network namespace (see net.h).
#include "sandbox/linux/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace mcpcell::sandbox {
namespace {

enum NamespaceStep : int { kStepUnshare = 1, kStepSocket, kStepIoctl };

const char* NamespaceStepName(int step) {
  switch (step) {
    case kStepUnshare:
      return "unshare(CLONE_NEWNET)";
    case kStepSocket:
      return "socket(AF_INET, SOCK_DGRAM)";
    case kStepIoctl:
      return "ioctl(\"lo\", SIOCGIFFLAGS/SIOCSIFFLAGS, IFF_UP)";
  }
  return "unknown step";
}

// `lo` up with raw calls only (the child reports a step and errno, not a Status).
int LoopbackUpStep() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kStepSocket;
  struct ifreq req;
  std::memset(&req, 0, sizeof req);
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  int step = 0;
  if (::ioctl(fd, SIOCGIFFLAGS, &req) != 0) {
    step = kStepIoctl;
  } else {
    req.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (::ioctl(fd, SIOCSIFFLAGS, &req) != 0) step = kStepIoctl;
  }
  const int err = errno;
  ::close(fd);
  errno = err;
  return step;
}

[[noreturn]] void NamespaceChildMain(int report_fd) {
  // Nothing of init's (control socket, spec, sync socket) stays open in the child.
  if (report_fd > 0) syscall(SYS_close_range, 0, report_fd - 1, 0);
  syscall(SYS_close_range, report_fd + 1, ~0U, 0);
  int report[2] = {0, 0};
  if (::unshare(CLONE_NEWNET) != 0) {
    report[0] = kStepUnshare;
  } else {
    report[0] = LoopbackUpStep();
  }
  report[1] = report[0] != 0 ? errno : 0;
  if (::write(report_fd, report, sizeof report) != sizeof report) _exit(1);
  // The namespace lives as long as a process is in it: wait here until init, now in it
  // too, kills us (or init dies and the pid namespace with it).
  for (;;) ::pause();
}

// True when no more tasks are runnable than this process has CPUs: field 4 of
// /proc/loadavg is "<runnable>/<total>", counted system-wide at the moment of reading.
bool CpuFreeForAChild() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  const int cpus = CPU_COUNT(&set);
  int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[128];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  double load1, load5, load15;
  int running = 0, total = 0;
  if (std::sscanf(buf, "%lf %lf %lf %d/%d", &load1, &load5, &load15, &running, &total) != 5) {
    return false;
  }
  return cpus > 1 && running <= cpus;
}

}  // namespace

Result<int> ListenOnLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error::Sys("socket(AF_INET, SOCK_STREAM)");
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    Error e = Error::Sys("bind(" + where + ")");
    ::close(fd);
    return e;
  }
  if (::listen(fd, 128) != 0) {
    Error e = Error::Sys("listen(" + where + ")");
    ::close(fd);
    return e;
  }
  return fd;
}

Result<LoopbackNamespaceChild> StartLoopbackNamespace(NamespaceChild when) {
  if (when == NamespaceChild::kNever ||
      (when == NamespaceChild::kIfCpuFree && !CpuFreeForAChild())) {
    return LoopbackNamespaceChild{};
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Error::Sys("pipe2(network namespace report)");
  int pidfd = -1;
  struct clone_args ca;
  std::memset(&ca, 0, sizeof ca);
  ca.flags = CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) NamespaceChildMain(pipe_fds[1]);
  const int err = errno;
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return Error::Sys("clone3(CLONE_PIDFD) for the network namespace", err);
  }
  LoopbackNamespaceChild child;
  child.pidfd = pidfd;
  child.report_fd = pipe_fds[0];
  return child;
}

Status JoinLoopbackNamespace(LoopbackNamespaceChild& child) {
  if (child.pidfd < 0) {
    if (::unshare(CLONE_NEWNET) != 0) return Error::Sys("unshare(CLONE_NEWNET)");
    if (int step = LoopbackUpStep(); step != 0) return Error::Sys(NamespaceStepName(step));
    return Ok();
  }
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(child.report_fd, report, sizeof report);
  } while (n < 0 && errno == EINTR);
  Status result = Ok();
  if (n != static_cast<ssize_t>(sizeof report)) {
    result = n < 0 ? Error::Sys("read(network namespace report)")
                   : Error::Msg("the network namespace child died before reporting");
  } else if (report[0] != 0) {
    result = Error::Sys(std::string("network namespace child: ") + NamespaceStepName(report[0]),
                        report[1]);
  } else if (::setns(child.pidfd, CLONE_NEWNET) != 0) {
    result = Error::Sys("setns(network namespace child's pidfd, CLONE_NEWNET)");
  }
  ::close(child.report_fd);
  child.report_fd = -1;
  if (syscall(SYS_pidfd_send_signal, child.pidfd, SIGKILL, nullptr, 0) != 0 && errno != ESRCH &&
      result) {
    result = Error::Sys("pidfd_send_signal(network namespace child, SIGKILL)");
  }
  siginfo_t info;
  int r;
  do {
    r = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child.pidfd), &info, WEXITED);
  } while (r != 0 && errno == EINTR);
  if (r != 0 && result) result = Error::Sys("waitid(network namespace child)");
  ::close(child.pidfd);
  child.pidfd = -1;
  return result;
}

}  // namespace mcpcell::sandbox
