// Starting cell init (see cell.h and docs/architecture.md): the launch's fds, the clone
// into new namespaces, the child's few raw syscalls before execve, the id maps, the
// hand-over (cgroup join fds and the seccomp program) and the wait for Ready.
//
// The launch copies nothing of the server: the child is cloned with CLONE_VM | CLONE_VFORK
// (sandbox/linux/clone_vm.h), runs on a small stack in this thread's frame, resets signal
// handlers, keeps its capabilities in the ambient set, places its fds and execs cell init,
// all before the clone returns. A fork-style clone copied the page tables and memory map of
// the large multi-threaded server instead, most of a new cell's server CPU. The id maps
// are written after the execve, so cell init waits for the go byte before anything else
// and becomes root of its namespace itself (user.h). A pre-forked launcher process would
// also avoid the copy, but it would be the parent of every init (the server waits on its
// cells' pidfds), need a protocol of its own to carry the fds, and be one more process to
// supervise; this is one syscall in place of another.
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "base/fd_passing.h"
#include "sandbox/cell.h"
#include "sandbox/cell_internal.h"
#include "sandbox/control/protocol.h"
#include "sandbox/init/setup.h"
#include "sandbox/linux/clone_vm.h"
#include "sandbox/linux/idmap_mount.h"
#include "sandbox/linux/seccomp.h"
#include "sandbox/linux/self_exe.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {

using cell_internal::LaunchStep;
using cell_internal::ServerSteps;

namespace {

// Everything the cloned child needs, prepared by the parent. The child runs in the
// server's memory (CLONE_VM, clone_vm.h) on a stack of its own while the calling thread
// sleeps (CLONE_VFORK): it only makes raw syscalls on these, allocates nothing, takes no
// lock and calls no libc function a sanitizer intercepts.
struct ChildArgs {
  const char* init_path;
  int sync_fd;   // cell init's kInitSyncFd: the go byte once the parent wrote the maps,
                 // the root order, the hand-over (setup.h)
  int error_fd;  // write end, CLOEXEC: {step, errno} if the child fails before execve
  int dev_null;
  int stderr_fd;
  int spec_fd;
  int control_fd;
  const sigset_t* server_mask;  // the calling thread's mask, which cell init inherits
  int fail_step;                // a test's injected failure (cell_internal.h), or 0
  int fail_errno;
};

enum ChildStep { kStepSignals = 1, kStepCredentials, kStepFds, kStepExec };
const char* ChildStepName(int step) {
  switch (step) {
    case kStepSignals:
      return "resetting signal handlers";
    case kStepCredentials:
      return "keeping capabilities for cell init";
    case kStepFds:
      return "arranging inherited fds";
    case kStepExec:
      return "execve(cell init)";
  }
  return "unknown step";
}

static_assert(static_cast<int>(LaunchStep::kChildSignals) - kStepSignals ==
                  static_cast<int>(LaunchStep::kChildExec) - kStepExec,
              "child steps and their LaunchStep values are in the same order");
constexpr int ChildStepOf(LaunchStep s) {
  return static_cast<int>(s) - static_cast<int>(LaunchStep::kChildSignals) + kStepSignals;
}

// The CLONE_VM child's functions are not instrumented. Under ASan an instrumented frame
// poisons the shadow of its redzones on entry and unpoisons it on return, but the child
// never returns (it execs or exits), so its frames' poison would stay in the shadow the
// server shares, over `stack` in CloneChild's frame; and a call before a noreturn one
// (execve, exit) gets __asan_handle_no_return, which unpoisons the calling thread's stack
// by bounds that are not this small stack's. UBSan's handlers may allocate and lock. So:
// raw syscalls (libc's syscall(), which no sanitizer intercepts) and no instrumentation;
// the launch tests run under ASan with detect_leaks=1 and report nothing.
#define MCPCELL_CHILD __attribute__((no_sanitize("address", "undefined")))

[[noreturn]] MCPCELL_CHILD void ChildFail(int error_fd, int step, int err) {
  int report[2] = {step, err};
  (void)syscall(SYS_write, error_fd, report, sizeof report);
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

// Moves `from` to exactly `to` (dup2 on the same number would keep CLOEXEC).
MCPCELL_CHILD long PlaceFd(int from, int to) {
  if (from == to) return syscall(SYS_fcntl, to, F_SETFD, 0);
  return syscall(SYS_dup3, from, to, 0) < 0 ? -1 : 0;
}

// The kernel's struct sigaction (asm-generic: handler, flags, restorer, mask).
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

// A handler the server installed must not run in the child: it would run the server's
// code on shared memory. Ignored signals stay ignored (as a fork kept them); execve resets
// the rest anyway. Then the server thread's own mask comes back for cell init.
MCPCELL_CHILD long ResetSignals(const sigset_t* mask) {
  for (int sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    KernelSigaction old;
    if (syscall(SYS_rt_sigaction, sig, nullptr, &old, sizeof old.mask) != 0) continue;
    if (old.handler == reinterpret_cast<void*>(SIG_DFL) ||
        old.handler == reinterpret_cast<void*>(SIG_IGN)) {
      continue;
    }
    KernelSigaction dfl{reinterpret_cast<void*>(SIG_DFL), 0, nullptr, 0};
    if (syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask) != 0) return -1;
  }
  return syscall(SYS_rt_sigprocmask, SIG_SETMASK, mask, nullptr, sizeof(uint64_t));
}

MCPCELL_CHILD int ChildMain(void* arg) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(arg);
  if (a.fail_step == kStepSignals) ChildFail(a.error_fd, kStepSignals, a.fail_errno);
  if (ResetSignals(a.server_mask) != 0) ChildFail(a.error_fd, kStepSignals, errno);
  const int r = a.fail_step == kStepCredentials ? -a.fail_errno : KeepCapabilitiesAcrossExec();
  if (r < 0) ChildFail(a.error_fd, kStepCredentials, -r);
  // Lift every source above the target range first, so no dup3 overwrites another source.
  const int src[6] = {a.dev_null, a.dev_null, a.stderr_fd, a.spec_fd, a.control_fd, a.sync_fd};
  int high[6];
  const long err_high = syscall(SYS_fcntl, a.error_fd, F_DUPFD_CLOEXEC, 64);
  if (err_high < 0) ChildFail(a.error_fd, kStepFds, errno);
  const int error_fd = static_cast<int>(err_high);
  if (a.fail_step == kStepFds) ChildFail(error_fd, kStepFds, a.fail_errno);
  static_assert(kInitSpecFd == 3 && kInitControlFd == 4 && kInitSyncFd == 5);
  for (int i = 0; i < 6; ++i) {
    const long fd = syscall(SYS_fcntl, src[i], F_DUPFD_CLOEXEC, 64);
    if (fd < 0) ChildFail(error_fd, kStepFds, errno);
    high[i] = static_cast<int>(fd);
  }
  for (int i = 0; i < 6; ++i) {
    if (PlaceFd(high[i], i) != 0) ChildFail(error_fd, kStepFds, errno);
  }
  if (syscall(SYS_dup3, error_fd, 6, O_CLOEXEC) < 0) ChildFail(error_fd, kStepFds, errno);
  // Nothing of the server's other fds reaches the cell.
  if (syscall(SYS_close_range, 7, ~0U, 0) != 0) ChildFail(6, kStepFds, errno);
  if (a.fail_step == kStepExec) ChildFail(6, kStepExec, a.fail_errno);
  char* const argv[] = {const_cast<char*>("mcpcell-init"), nullptr};
  char* const envp[] = {nullptr};
  syscall(SYS_execve, a.init_path, argv, envp);
  ChildFail(6, kStepExec, errno);
}

}  // namespace

Result<UniqueFd> Cell::Impl::SpecMemfd(const CellSpec& spec) {
  int fd = ::memfd_create("mcpcell-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Error::Sys("memfd_create(\"mcpcell-spec\")");
  UniqueFd owned(fd);
  std::string bytes = EncodeCellSpec(spec);
  if (::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return Error::Sys("pwrite(spec memfd)");
  }
  // Sealed: nothing can change the spec between here and cell init reading it.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return Error::Sys("fcntl(spec memfd, F_ADD_SEALS)");
  }
  return owned;
}

namespace {

// Sends the hand-over of setup.h on the sync socket: the tag, the seccomp program, and the
// cgroup join fds (SCM_RIGHTS, attached to the first byte).
Status SendHandover(int sock, const std::vector<UniqueFd>& fds, const SeccompProgram* seccomp) {
  if (fds.size() > kMaxCgroupJoinFds) {
    return Error::Msg(std::to_string(fds.size()) + " cgroup join fds, more than cell init takes");
  }
  const uint32_t count = seccomp ? static_cast<uint32_t>(seccomp->filter.size()) : 0;
  std::string bytes(1, kHandoverTag);
  bytes.append(reinterpret_cast<const char*>(&count), sizeof count);
  if (count > 0) {
    bytes.append(reinterpret_cast<const char*>(seccomp->filter.data()),
                 count * sizeof(sock_filter));
  }
  int raw[kMaxCgroupJoinFds];
  for (size_t i = 0; i < fds.size(); ++i) raw[i] = fds[i].get();
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  Result<size_t> sent =
      SendWithFds(sock, std::span<const uint8_t>(data, bytes.size()),
                  std::span<const int>(raw, fds.size()), "sync socket, hand-over");
  if (!sent) return sent.error();
  size_t done = *sent;
  ssize_t n = 0;
  while (n >= 0 && done < bytes.size()) {  // a large program may go in several parts
    n = ::send(sock, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) n = 0;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (n < 0) return Error::Sys("send(sync socket, hand-over)");
  return Ok();
}

// The default seccomp program, compiled once per process on first use (thread-safe): every
// cell of a server installs the same one.
Result<const SeccompProgram*> DefaultSeccompProgram(bool& compiled_now) {
  static std::once_flag once;
  static Result<SeccompProgram> program = Error::Msg("not compiled");
  compiled_now = false;
  std::call_once(once, [&compiled_now] {
    program = CompileDefaultSeccompFilter();
    compiled_now = true;
  });
  if (!program) return program.error();
  return &*program;
}

}  // namespace

namespace cell_internal {
namespace {
std::atomic<int> armed_step{0};
std::atomic<int> armed_errno{0};
}  // namespace

void FailNextLaunchAt(LaunchStep step, int err) {
  armed_errno.store(err);
  armed_step.store(static_cast<int>(step));
}

Status InjectedLaunchFailure(LaunchStep step, const char* what) {
  if (armed_step.load(std::memory_order_relaxed) != static_cast<int>(step)) return Ok();
  int expected = static_cast<int>(step);
  if (!armed_step.compare_exchange_strong(expected, 0)) return Ok();
  return Error::Sys(std::string(what) + " (injected)", armed_errno.load());
}

LaunchStep TakeChildLaunchFailure(int& err) {
  const int step = armed_step.load(std::memory_order_relaxed);
  if (step < static_cast<int>(LaunchStep::kChildSignals) ||
      step > static_cast<int>(LaunchStep::kChildExec)) {
    return LaunchStep::kNone;
  }
  int expected = step;
  if (!armed_step.compare_exchange_strong(expected, 0)) return LaunchStep::kNone;
  err = armed_errno.load();
  return static_cast<LaunchStep>(step);
}
}  // namespace cell_internal

Result<std::string> FindCellInit() {
  Result<std::string> path = SiblingExecutable("mcpcell-init");
  if (!path) return path.error().Wrap("find cell init");
  if (::access(path->c_str(), X_OK) != 0) {
    return Error::Sys("cell init not found next to the server: access(\"" + *path + "\", X_OK)");
  }
  return path;
}

// Everything StartInit opens for one launch of cell init; closed when it goes out of scope
// (the child has its own copies by then).
struct Cell::Impl::Launch {
  std::string init_path;
  UniqueFd spec, control_server, control_child, sync_child, sync_server, err_rd, err_wr, dev_null;
};

Status Cell::Impl::PrepareLaunch(Cell& c, const CellCreateOptions& options, Launch& l) {
  l.init_path = options.init_path;
  if (l.init_path.empty()) {
    Result<std::string> found = FindCellInit();
    if (!found) return found.error();
    l.init_path = *found;
  }
  Result<UniqueFd> spec_fd = Impl::SpecMemfd(c.spec_);
  if (!spec_fd) return spec_fd.error();
  l.spec = std::move(spec_fd).value();
  auto pair = control::CreateControlSocketPair();
  if (!pair) return pair.error();
  l.control_server = std::move(pair->first);
  l.control_child = std::move(pair->second);
  int sync[2], errp[2];
  // A socketpair rather than a pipe: send(MSG_NOSIGNAL) to a child that already died is
  // EPIPE, not a SIGPIPE that would kill the server.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) != 0) {
    return Error::Sys("socketpair(sync)");
  }
  l.sync_child.Reset(sync[0]);
  l.sync_server.Reset(sync[1]);
  if (::pipe2(errp, O_CLOEXEC) != 0) return Error::Sys("pipe2(error)");
  l.err_rd.Reset(errp[0]);
  l.err_wr.Reset(errp[1]);
  l.dev_null.Reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!l.dev_null) return Error::Sys("open(\"/dev/null\")");
  return cell_internal::InjectedLaunchFailure(LaunchStep::kPrepare, "prepare launch");
}

Status Cell::Impl::CloneChild(Cell& c, const CellCreateOptions& options, const Launch& l) {
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kClone, "clone3"); !s) return s;
  // Every signal blocked around the clone (the raw syscall: glibc's would keep its own two
  // open), so nothing runs a handler in the child before it reset them (ChildMain).
  sigset_t all, server_mask;
  ::sigfillset(&all);
  ::sigemptyset(&server_mask);
  if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &server_mask, sizeof(uint64_t)) != 0) {
    return Error::Sys("rt_sigprocmask(SIG_SETMASK, all)");
  }
  int fail_errno = 0;
  const LaunchStep fail = cell_internal::TakeChildLaunchFailure(fail_errno);
  ChildArgs args{l.init_path.c_str(),
                 l.sync_child.get(),
                 l.err_wr.get(),
                 l.dev_null.get(),
                 options.init_stderr_fd >= 0 ? options.init_stderr_fd : 2,
                 l.spec.get(),
                 l.control_child.get(),
                 &server_mask,
                 fail == LaunchStep::kNone ? 0 : ChildStepOf(fail),
                 fail_errno};
  // clone3 with CLONE_VM | CLONE_VFORK (clone_vm.h): the child shares this process's
  // memory instead of a copy of its page tables, runs ChildMain on `stack` (this frame's,
  // unused by this thread, which sleeps until the child has exec'd or exited) and execs
  // cell init at once; the id maps are written after (cell init waits for them).
  // CLONE_NEWCGROUP is left to cell init, which unshares it once inside the cell's cgroup.
  alignas(16) char stack[16 * 1024];
  int pidfd = -1;
  struct clone_args ca;
  std::memset(&ca, 0, sizeof ca);
  // CLONE_NEWNET neither: the most expensive namespace to make, it is made by a child of
  // cell init in parallel with init's filesystem setup (sandbox/linux/net.h).
  ca.flags = CLONE_VM | CLONE_VFORK | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
             CLONE_NEWUTS | CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  if (c.cgroup_ && c.cgroup_->DirFd() >= 0) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = static_cast<uint64_t>(c.cgroup_->DirFd());
  }
  const long pid = CloneVm(ca, stack, sizeof stack, ChildMain, &args);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &server_mask, nullptr, sizeof(uint64_t));
  if (pid < 0) {
    const int e = static_cast<int>(-pid);
    Error err = Error::Sys("clone3(CLONE_VM|VFORK|NEWUSER|NEWNS|NEWPID|NEWIPC|NEWUTS)", e);
    if (e == EPERM || e == ENOSPC || e == EACCES) {
      // The usual causes: user namespaces disabled or restricted (Ubuntu's AppArmor
      // restriction, kernel.unprivileged_userns_clone=0, user.max_user_namespaces).
      err.message += "; user namespaces are disabled or restricted here, see `mcpcell doctor`";
    }
    return err;
  }
  c.pidfd_ = pidfd;
  c.init_pid_ = static_cast<pid_t>(pid);
  return Ok();
}

// The hand-over (setup.h) tells cell init that it is in the cell's cgroup or how to get
// there, and gives it the seccomp program. Init waits for it before it creates its cgroup
// namespace, before anything can run in the cell, so no process of the cell escapes the
// cgroup. v2: init was cloned into it. v1: the hand-over carries the controllers' `tasks`
// fds and init moves itself (JoinCgroupFromChild, cgroup.h: no global lock, no RCU grace
// period); if they cannot be opened, the server attaches it (slower). No cgroup: nothing to
// join (warnings() says so). The program is compiled here, while init builds its filesystem,
// once per process.
Status Cell::Impl::HandOver(Cell& c, Launch& l, ServerSteps& steps) {
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kHandOver, "hand-over"); !s) {
    return s;
  }
  std::vector<UniqueFd> join;
  if (c.cgroup_ && c.cgroup_->DirFd() < 0) {
    Result<std::vector<int>> fds = c.cgroup_->OpenJoinFds();
    if (fds) {
      for (int fd : *fds) join.emplace_back(fd);
    } else {
      if (Status s = c.cgroup_->AddProcess(c.init_pid_); !s) return s.error().Wrap("cgroup");
      steps.Mark("cgroup_attach");
    }
  }
  const SeccompProgram* seccomp = nullptr;
  if (c.spec_.seccomp) {
    bool compiled_now = false;
    Result<const SeccompProgram*> program = DefaultSeccompProgram(compiled_now);
    if (!program) return program.error().Wrap("seccomp");
    seccomp = *program;
    if (compiled_now) steps.Mark("seccomp_compile");
  }
  Status sent = SendHandover(l.sync_server.get(), join, seccomp);
  // EPIPE means init already died; its exec error or SetupFailed says why.
  if (!sent && sent.error().err != EPIPE) return sent;
  // A parked cell's init waits on the socket for its claim (Cell::Unpark).
  if (c.parked_) c.claim_fd_ = std::move(l.sync_server);
  l.sync_server.Reset();
  return Ok();
}

// The idmapped, read-only, detached mounts of `layers` for cell `c` (idmap_mount.h). They
// map ids through the cell's user namespace, so they are made once the id maps are written.
Result<std::vector<UniqueFd>> Cell::Impl::OpenLayerMounts(Cell& c,
                                                          const std::vector<CellLayer>& layers) {
  std::vector<UniqueFd> mounts;
  if (layers.empty()) return mounts;
  if (c.id_map_.single) {
    return Error::Msg("snapshot layers need a server running as root (idmapped mounts)");
  }
  Result<UniqueFd> userns = OpenUserNamespace(c.init_pid_);
  if (!userns) return userns.error();
  for (size_t i = 0; i < layers.size(); ++i) {
    Result<UniqueFd> mount = OpenIdmappedLayer(layers[i].host_dir, userns->get());
    if (!mount) return mount.error().Wrap("layers[" + std::to_string(i) + "]");
    mounts.push_back(std::move(mount).value());
  }
  return mounts;
}

// Sends an order of setup.h on the sync socket: `tag`, the count of `mounts`, and `first`
// (when >= 0) then `mounts` attached.
Status Cell::Impl::SendOrder(int sock, char tag, int first, const std::vector<UniqueFd>& mounts) {
  std::vector<int> raw;
  if (first >= 0) raw.push_back(first);
  for (const UniqueFd& m : mounts) raw.push_back(m.get());
  const uint32_t count = static_cast<uint32_t>(mounts.size());
  char head[1 + sizeof count] = {tag};
  std::memcpy(head + 1, &count, sizeof count);
  const std::string what = std::string("sync socket, order '") + tag + "'";
  Result<size_t> sent =
      SendWithFds(sock, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(head), sizeof head),
                  std::span<const int>(raw), what.c_str());
  // EPIPE means init already died; its exec error or SetupFailed says why.
  if (!sent && sent.error().err != EPIPE) return sent.error();
  if (sent && *sent != sizeof head) return Error::Msg(what + ": short send");
  return Ok();
}

// The root order (setup.h): park, or build now over the spec's layers.
Status Cell::Impl::SendRootOrder(Cell& c, Launch& l) {
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kRootOrder, "root order"); !s) {
    return s;
  }
  if (c.parked_) return SendOrder(l.sync_server.get(), kParkTag, -1, {});
  Result<std::vector<UniqueFd>> mounts = OpenLayerMounts(c, c.spec_.layers);
  if (!mounts) return mounts.error();
  return SendOrder(l.sync_server.get(), kLayersTag, -1, *mounts);
}

// Whether cell init's execve succeeded (EOF on the CLOEXEC error pipe) or the step of the
// child that failed and why. Called once the clone returned: with CLONE_VFORK the child has
// exec'd or exited by then, so this read does not wait.
Status Cell::Impl::WaitExec(Launch& l) {
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(l.err_rd.get(), report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof report) {
    return Error::Sys(
        std::string("cell init child: ") + ChildStepName(report[0]) + " (" + l.init_path + ")",
        report[1]);
  }
  return Ok();
}

// Clone (the child execs cell init before the clone returns), id maps, then the go byte
// (cell init waits for it before anything else). The cgroup (unless v2 made it before the
// clone) and the seccomp program are made after it, while init builds its filesystem on the
// other core, and handed over.
Status Cell::Impl::StartInit(Cell& c, const CellCreateOptions& options, ServerSteps& steps,
                             UniqueFd& control) {
  Launch launch;
  if (Status s = PrepareLaunch(c, options, launch); !s) return s;
  if (Status s = CloneChild(c, options, launch); !s) return s;
  steps.Mark("clone");
  // Our copies of the child's fds go now: only the child may hold its control end, so EOF
  // means death, and EOF on the error pipe means a successful execve.
  launch.control_child.Reset();
  launch.sync_child.Reset();
  launch.err_wr.Reset();
  if (Status s = WaitExec(launch); !s) return s;
  steps.Mark("exec_init");
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kInitRecord, "init record"); !s) {
    return s;
  }
  if (Status s = WriteInitRecord(c.dir_, c.init_pid_); !s) return s;
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kIdMaps, "id maps"); !s) {
    return s;
  }
  if (Status s = Impl::WriteMapsFor(c); !s) return s;
  steps.Mark("id_maps");
  const char go = c.id_map_.single ? kGoSingle : kGoRange;
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kGo, "send(sync socket, go)");
      !s) {
    return s;
  }
  if (::send(launch.sync_server.get(), &go, 1, MSG_NOSIGNAL) != 1) {
    return Error::Sys(std::string("send(sync socket, '") + go + "')");
  }
  if (Status s = SendRootOrder(c, launch); !s) return s.error().Wrap("layers");
  if (!c.spec_.layers.empty()) steps.Mark("layers");
  if (!CgroupBeforeClone(options)) {
    if (Status s = CreateCgroupFor(c, options.skip_cgroup); !s) return s.error().Wrap("cgroup");
    steps.Mark("cgroup");
  }
  if (Status s = HandOver(c, launch, steps); !s) return s;
  control = std::move(launch.control_server);
  return Ok();
}

Status Cell::Impl::WaitReady(Cell& c, std::chrono::milliseconds timeout, int control_fd) {
  if (Status s = cell_internal::InjectedLaunchFailure(LaunchStep::kReady, "wait for Ready"); !s) {
    return s;
  }
  struct pollfd pfd = {control_fd, POLLIN, 0};
  int timeout_ms = static_cast<int>(timeout.count());
  int r;
  do {
    r = ::poll(&pfd, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Error::Sys("poll(control socket)");
  if (r == 0) {
    return Error::Msg("cell init sent nothing within " + std::to_string(timeout_ms) + " ms");
  }
  Result<control::Received> got = control::ReceiveMessage(control_fd);
  if (!got) return got.error().Wrap("cell init died before Ready");
  if (auto* failed = std::get_if<control::SetupFailed>(&got->message)) {
    return Error::Msg("cell init: " + failed->message);
  }
  auto* ready = std::get_if<control::Ready>(&got->message);
  if (!ready) {
    return Error::Msg(std::string("cell init sent ") + control::MessageName(got->message) +
                      " instead of Ready");
  }
  for (auto& step : ready->step_timings_us) c.timings_.steps_us.push_back(std::move(step));
  // A parked cell's first Ready has none: init listens once it is claimed.
  const bool want_listener = c.spec_.egress_proxy_port != 0 && !c.parked_;
  if (ready->egress_listener != (want_listener ? 1 : 0)) {
    return Error::Msg(want_listener ? "cell init sent no egress proxy listener"
                                    : "cell init sent an egress proxy listener nobody asked for");
  }
  if (want_listener) {
    // Untrusted: it must be what the spec asked for, a listening IPv4 TCP socket.
    const int fd = got->fds.at(0).get();
    int domain = 0, type = 0, listening = 0;
    socklen_t len = sizeof(int);
    const bool ok =
        ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
        (len = sizeof(int), ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len)) == 0 &&
        (len = sizeof(int), ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) == 0;
    if (!ok || domain != AF_INET || type != SOCK_STREAM || listening != 1) {
      return Error::Msg("cell init's egress proxy listener is not a listening TCP socket");
    }
    c.egress_listener_ = got->fds.at(0).Release();
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
