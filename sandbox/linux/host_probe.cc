// Host probes for `mcpcell doctor`. Each probe tries the real operation in a short-lived
// child where that is possible, so the answer reflects this kernel, its sysctls and its
// LSMs rather than a version table.
#include "sandbox/linux/host_probe.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sandbox/linux/caps.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/devices.h"
#include "sandbox/linux/seccomp.h"

namespace mcpcell::sandbox {
namespace {

std::string ReadSmallFile(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return "";
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) --n;
  return std::string(buf, n);
}

// In a forked child, reports "<step>: <errno>" through `fd` and exits 1.
[[noreturn]] void ChildFail(int fd, const char* step) {
  const int e = errno;
  char buf[128];
  size_t n = 0;
  for (const char* p = step; *p && n < 100; ++p) buf[n++] = *p;
  buf[n++] = ':';
  buf[n++] = ' ';
  char digits[12];
  int d = 0;
  for (int v = e; d == 0 || v > 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  while (d > 0) buf[n++] = digits[--d];
  if (write(fd, buf, n) < 0) _exit(2);
  _exit(1);
}

bool ChildWriteFile(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t len = static_cast<ssize_t>(strlen(text));
  const bool ok = write(fd, text, len) == len;
  close(fd);
  return ok;
}

// Runs `body` in a forked child; returns "" on success or the child's "<step>: <errno>"
// rendered with the errno name, and then (when asked) the step and errno in `failure`.
template <typename Body>
std::string RunInChild(Body body, ProbeStepFailure* failure = nullptr) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return std::string("pipe2: ") + strerror(errno);
  pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return std::string("fork: ") + strerror(errno);
  }
  if (pid == 0) {
    close(pipefd[0]);
    body(pipefd[1]);
    _exit(0);
  }
  close(pipefd[1]);
  char buf[160];
  ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (n <= 0) return "child failed with status " + std::to_string(status);
  std::string msg(buf, n);
  const size_t colon = msg.rfind(": ");
  if (colon != std::string::npos) {
    const int e = std::atoi(msg.c_str() + colon + 2);
    if (failure != nullptr) *failure = {msg.substr(0, colon), e};
    const char* name = strerrorname_np(e);
    msg = msg.substr(0, colon + 2) + (name ? name : "E?") + " (" + strerror(e) + ")";
  }
  return msg;
}

// In a child: a new user + mount namespace with ourselves mapped to root.
void EnterUserAndMountNamespace(int fd) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
    ChildFail(fd, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
  char map[64];
  snprintf(map, sizeof map, "0 %u 1", uid);
  if (!ChildWriteFile("/proc/self/uid_map", map)) ChildFail(fd, "write uid_map");
  if (!ChildWriteFile("/proc/self/setgroups", "deny")) ChildFail(fd, "write setgroups");
  snprintf(map, sizeof map, "0 %u 1", gid);
  if (!ChildWriteFile("/proc/self/gid_map", map)) ChildFail(fd, "write gid_map");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(fd, "mount(/, MS_REC|MS_PRIVATE)");
  }
}

}  // namespace

const char* ProbeVerdictName(ProbeVerdict verdict) {
  switch (verdict) {
    case ProbeVerdict::kOk:
      return "ok";
    case ProbeVerdict::kDegraded:
      return "degraded";
    case ProbeVerdict::kMissing:
      return "missing";
  }
  return "?";
}

ProbeResult ProbePrivilege() {
  ProbeResult r{"privilege", ProbeVerdict::kOk, "", ""};
  const uid_t euid = geteuid();
  r.detail = "euid " + std::to_string(euid);
  if (euid == 0) {
    r.consequence = "server mode: each cell gets its own host uid/gid range";
  } else {
    r.verdict = ProbeVerdict::kDegraded;
    r.consequence =
        "desktop mode: every cell maps to this one user on the host, so cells are not "
        "different users to each other; cgroup limits need a delegated cgroup";
  }
  return r;
}

ProbeResult ProbeUserNamespaces() {
  ProbeResult r{"user namespaces", ProbeVerdict::kOk, "", ""};
  const std::string max = ReadSmallFile("/proc/sys/user/max_user_namespaces");
  const std::string debian = ReadSmallFile("/proc/sys/kernel/unprivileged_userns_clone");
  const std::string apparmor =
      ReadSmallFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  r.detail = "max_user_namespaces=" + (max.empty() ? "?" : max);
  if (!debian.empty()) r.detail += ", unprivileged_userns_clone=" + debian;
  if (!apparmor.empty()) r.detail += ", apparmor_restrict_unprivileged_userns=" + apparmor;
  const std::string err = RunInChild([](int fd) {
    if (unshare(CLONE_NEWUSER) != 0) ChildFail(fd, "unshare(CLONE_NEWUSER)");
  });
  if (!err.empty()) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail += "; " + err;
    r.consequence = "cells cannot be created (set user.max_user_namespaces > 0";
    r.consequence += debian == "0" ? ", kernel.unprivileged_userns_clone=1)" : ")";
    return r;
  }
  if (apparmor == "1" && geteuid() != 0) {
    r.verdict = ProbeVerdict::kDegraded;
    r.consequence =
        "Ubuntu's AppArmor lets unprivileged processes create user namespaces only without "
        "capabilities inside; give mcpcell an AppArmor profile with `userns,` or run as root";
    return r;
  }
  r.consequence = "cells get their own user namespace";
  return r;
}

ProbeResult ProbeOverlayInUserNamespace() {
  ProbeResult r{"overlayfs in a user namespace", ProbeVerdict::kOk, "", ""};
  char dir[] = "/tmp/mcpcell-probe-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail = std::string("mkdtemp(/tmp): ") + strerror(errno);
    r.consequence = "could not test";
    return r;
  }
  // Paths are built before fork: the child only makes syscalls.
  const std::string base = dir;
  const std::string subs[] = {base + "/l", base + "/u", base + "/w", base + "/m"};
  const std::string opts = "lowerdir=" + subs[0] + ",upperdir=" + subs[1] + ",workdir=" + subs[2];
  const std::string file = subs[3] + "/probe";
  const auto body = [&](int fd) {
    EnterUserAndMountNamespace(fd);
    // Everything below lives on a tmpfs in our private mount namespace: nothing is left
    // on the host when the child exits.
    if (mount("tmpfs", base.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0) {
      ChildFail(fd, "mount(tmpfs)");
    }
    for (const std::string& sub : subs) {
      if (mkdir(sub.c_str(), 0755) != 0) ChildFail(fd, "mkdir");
    }
    if (mount("overlay", subs[3].c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      ChildFail(fd, "mount(\"overlay\")");
    }
    int f = open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (f < 0) ChildFail(fd, "create a file on the overlay");
    close(f);
  };
  ProbeStepFailure failure;
  const std::string err = RunInChild(body, &failure);
  rmdir(dir);
  Result<CapSets> caps = ReadCapSets();
  return OverlayProbeVerdict(err.empty() ? nullptr : &failure, err, geteuid(),
                             caps ? caps->effective : 0);
}

ProbeResult OverlayProbeVerdict(const ProbeStepFailure* failure, const std::string& failure_text,
                                uid_t euid, uint64_t effective_caps) {
  ProbeResult r{"overlayfs in a user namespace", ProbeVerdict::kOk, "", ""};
  if (failure == nullptr) {
    r.detail = "mounted and wrote through an overlay in a new user + mount namespace";
    r.consequence = "cell roots are a read-only template plus a per-cell upper layer";
    return r;
  }
  r.verdict = ProbeVerdict::kMissing;
  r.detail = failure_text;
  // The probe maps its own uid into the namespace (EnterUserAndMountNamespace): as root,
  // uid 0.
  const std::string advice = MissingCapabilityAdvice(*failure, euid, effective_caps);
  r.consequence = advice.empty()
                      ? "cells cannot get an overlay root (kernel >= 5.11 mounts overlayfs in "
                        "user namespaces)"
                      : advice;
  return r;
}

std::string MissingCapabilityAdvice(const ProbeStepFailure& failure, uid_t mapped_uid,
                                    uint64_t effective_caps) {
  const bool has_setfcap = (effective_caps >> CAP_SETFCAP) & 1;
  // Linux 5.12 (commit db2e718a4798): a uid_map that maps uid 0 of the parent namespace is
  // refused with EPERM unless its writer (or the process that made the namespace) holds
  // CAP_SETFCAP there, so that file capabilities valid on the host cannot be forged from
  // inside. podman, docker and containerd leave SETFCAP out of their default sets.
  if (failure.step != "write uid_map" || failure.err != EPERM || mapped_uid != 0 || has_setfcap)
    return "";
  return "this process lacks CAP_SETFCAP, which Linux >= 5.12 requires to write a uid_map "
         "mapping uid 0 (this probe maps the server's own uid, root, into a new user "
         "namespace); add it: podman/docker run --cap-add SETFCAP, Kubernetes "
         "securityContext.capabilities.add: [\"SETFCAP\"] (deploy/kubernetes/statefulset.yaml), "
         "systemd CapabilityBoundingSet=... CAP_SETFCAP in a drop-in. Until then doctor cannot "
         "test overlayfs in a user namespace here";
}

ProbeResult ProbeCgroups() {
  ProbeResult r{"cgroups", ProbeVerdict::kOk, "", ""};
  const CgroupHost host = DetectCgroupHost();
  r.detail = std::string("mode ") + CgroupModeName(host.mode) + ": " + host.detail;
  if (host.mode != CgroupMode::kNone && host.can_create) {
    r.consequence =
        "memory (swap off), pids and cpu limits are enforced per cell; serve runs in "
        "<own>/mcpcell-server, weighted above its cells for CPU";
  } else {
    r.verdict = ProbeVerdict::kDegraded;
    r.consequence =
        "cells run without memory/pids/cpu limits and report \"limits not enforced\", and "
        "serve cannot weight itself above busy cells for CPU; run as root or in a delegated "
        "cgroup (systemd: Delegate=yes) to enforce them";
  }
  return r;
}

ProbeResult ProbeSeccomp() {
  ProbeResult r{"seccomp", ProbeVerdict::kOk, "", ""};
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail = std::string("prctl(PR_GET_SECCOMP): ") + strerror(errno);
    r.consequence = "the kernel has no seccomp; cells cannot be created";
    return r;
  }
  const std::string actions = ReadSmallFile("/proc/sys/kernel/seccomp/actions_avail");
  r.detail = "actions: " + (actions.empty() ? std::string("?") : actions);
  Result<SeccompProgram> program = CompileDefaultSeccompFilter();
  if (!program.ok()) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail += "; " + program.error().message;
    r.consequence = "the default filter cannot be built; cells cannot be created";
    return r;
  }
  // Install in a child and check one rule: TIOCSTI on a bad fd is EBADF unfiltered and EPERM
  // filtered, and has no effect either way.
  const SeccompProgram& p = *program;
  const std::string err = RunInChild([&p](int fd) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(fd, "prctl(PR_SET_NO_NEW_PRIVS)");
    if (!InstallSeccompFilter(p).ok()) ChildFail(fd, "seccomp(SET_MODE_FILTER)");
    char c = 0;
    errno = 0;
    if (ioctl(-1, TIOCSTI, &c) == 0 || errno != EPERM) ChildFail(fd, "filtered ioctl(TIOCSTI)");
  });
  if (!err.empty()) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail += "; " + err;
    r.consequence = "the default filter does not work here; cells cannot be created";
    return r;
  }
  r.detail += "; default filter (" + std::to_string(p.filter.size()) +
              " BPF instructions) installed and checked in a child";
  r.consequence = "the default seccomp filter is installed in every cell process";
  return r;
}

ProbeResult ProbeOpenat2() {
  ProbeResult r{"openat2", ProbeVerdict::kOk, "", ""};
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  // /proc/self/exe is a magic link: with RESOLVE_NO_MAGICLINKS it must fail with ELOOP.
  long fd = syscall(SYS_openat2, AT_FDCWD, "/proc/self/exe", &how, sizeof how);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    r.verdict = ProbeVerdict::kMissing;
    r.detail = "openat2 followed a magic link despite RESOLVE_NO_MAGICLINKS";
  } else if (errno == ENOSYS) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail = "openat2: ENOSYS (kernel < 5.6)";
  } else if (errno != ELOOP) {
    r.verdict = ProbeVerdict::kMissing;
    r.detail = std::string("openat2(/proc/self/exe, RESOLVE_NO_MAGICLINKS): ") + strerror(errno);
  }
  if (r.verdict != ProbeVerdict::kOk) {
    r.consequence = "file tools cannot be confined safely and are refused";
    return r;
  }
  r.detail = "RESOLVE_NO_MAGICLINKS refuses /proc/self/exe (ELOOP)";
  r.consequence = "file tools resolve paths inside the cell and refuse magic links";
  return r;
}

ProbeResult ProbeCloneIntoCgroup() {
  ProbeResult r{"clone3", ProbeVerdict::kOk, "", ""};
  // clone3 with size 0 is rejected with EINVAL by kernels that have it (5.3+);
  // CLONE_INTO_CGROUP came in 5.7.
  errno = 0;
  long rc = syscall(SYS_clone3, nullptr, 0);
  if (rc == -1 && errno == ENOSYS) {
    r.verdict = ProbeVerdict::kDegraded;
    r.detail = "clone3: ENOSYS";
    r.consequence = "cells start with clone; the cell's pid 1 joins its cgroup just after";
    return r;
  }
  r.detail = "clone3 available";
  r.consequence = DetectCgroupHost().mode == CgroupMode::kV2
                      ? "cells start directly inside their cgroup (CLONE_INTO_CGROUP)"
                      : "cgroup v1: the cell's pid 1 joins its cgroups before it runs anything";
  return r;
}

ProbeResult ProbeDeviceNodes(const std::string& dir) {
  ProbeResult r{"device nodes", ProbeVerdict::kOk, "", ""};
  std::string reason = DeviceNodesUnavailableReason();
  if (reason.empty()) {
    std::string scratch = dir + "/.mcpcell-devprobe-XXXXXX";
    if (mkdtemp(scratch.data()) == nullptr) {
      reason = "mkdtemp(\"" + scratch + "\"): " + strerror(errno);
    } else {
      Status made = MakeCellDeviceNodes(scratch + "/dev");
      if (made) made = RemoveCellDeviceNodes(scratch + "/dev");
      rmdir(scratch.c_str());
      if (made) {
        r.detail = "mknod works in " + dir;
        r.consequence =
            "each cell gets its own /dev/null, zero, full, random, urandom and tty (locks on "
            "them stay in the cell)";
        return r;
      }
      reason = made.error().message;
    }
  }
  r.verdict = ProbeVerdict::kDegraded;
  r.detail = reason;
  r.consequence =
      "cells bind the host's /dev/null, zero, full, random, urandom and tty: those inodes are "
      "shared with the host and every cell, so flock/fcntl locks on them cross cells (a covert "
      "channel; a cell can block a host program that locks /dev/null); each cell says so in "
      "its warnings";
  return r;
}

namespace {
// `state_dir`, or the one a server started now would use by default (state_dir.h), or its
// nearest existing ancestor: the filesystem the cells' device nodes would live on.
std::string StateDirOrAncestor(const std::string& state_dir) {
  std::string dir;
  if (!state_dir.empty()) {
    dir = state_dir;
  } else if (const char* env = std::getenv("MCPCELL_STATE_DIR"); env && *env == '/') {
    dir = env;
  } else if (geteuid() == 0) {
    dir = "/run/mcpcell";
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg == '/') {
    dir = std::string(xdg) + "/mcpcell";
  } else {
    dir = "/tmp/mcpcell-" + std::to_string(geteuid());
  }
  struct stat st;
  while (dir.size() > 1 && (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos) return ".";  // a relative name: the working directory
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
  return dir;
}
}  // namespace

HostReport ProbeHost(const std::string& state_dir) {
  HostReport report;
  report.root = geteuid() == 0;
  const ProbeResult userns = ProbeUserNamespaces();
  const ProbeResult overlay = ProbeOverlayInUserNamespace();
  const ProbeResult seccomp = ProbeSeccomp();
  // Cells need a user namespace (possibly restricted), an overlay root and the filter;
  // without cgroups or as an ordinary user they run degraded, and say so.
  report.cells_possible = userns.verdict != ProbeVerdict::kMissing &&
                          overlay.verdict == ProbeVerdict::kOk &&
                          seccomp.verdict == ProbeVerdict::kOk;
  report.probes = {ProbePrivilege(),
                   userns,
                   overlay,
                   ProbeCgroups(),
                   seccomp,
                   ProbeOpenat2(),
                   ProbeCloneIntoCgroup(),
                   ProbeDeviceNodes(StateDirOrAncestor(state_dir))};
  return report;
}

std::string FormatHostReport(const HostReport& report) {
  std::string out;
  for (const ProbeResult& p : report.probes) {
    out += "[";
    out += ProbeVerdictName(p.verdict);
    out += "] " + p.name + ": " + p.detail + "\n      -> " + p.consequence + "\n";
  }
  out += report.cells_possible ? "cells: possible on this host\n"
                               : "cells: NOT possible on this host (see above)\n";
  return out;
}

}  // namespace mcpcell::sandbox
