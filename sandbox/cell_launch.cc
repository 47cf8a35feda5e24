// Starting cell init (see cell.h and docs/architecture.md): the launch's fds, the clone
// into new namespaces, the child's few raw syscalls before execve, the id maps, the
// hand-over (cgroup join fds and the seccomp program) and the wait for Ready.
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/fd_passing.h"
#include "sandbox/cell.h"
#include "sandbox/cell_internal.h"
#include "sandbox/control/protocol.h"
#include "sandbox/init/setup.h"
#include "sandbox/linux/idmap_mount.h"
#include "sandbox/linux/seccomp.h"
#include "sandbox/linux/self_exe.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {

using cell_internal::ServerSteps;

namespace {

// Everything the cloned child needs, prepared by the parent: after clone the child only
// makes raw syscalls on these (no allocation: it is a copy of a multi-threaded process).
struct ChildArgs {
  const char* init_path;
  int sync_fd;   // read end: 'g' once the parent wrote the maps; later 'c' (the cell's
                 // cgroup, HandOverCgroup), read by cell init as kInitSyncFd
  int error_fd;  // write end, CLOEXEC: "errno step" if the child fails before execve
  int dev_null;
  int stderr_fd;
  int spec_fd;
  int control_fd;
  bool single_mapping;
};

[[noreturn]] void ChildFail(const ChildArgs& a, int step, int err) {
  int report[2] = {step, err};
  ssize_t ignored = ::write(a.error_fd, report, sizeof report);
  (void)ignored;
  _exit(127);
}

enum ChildStep { kStepSync = 1, kStepCredentials, kStepFds, kStepExec };
const char* ChildStepName(int step) {
  switch (step) {
    case kStepSync:
      return "waiting for the id maps";
    case kStepCredentials:
      return "keeping capabilities for cell init";
    case kStepFds:
      return "arranging inherited fds";
    case kStepExec:
      return "execve(cell init)";
  }
  return "unknown step";
}

// Moves `from` to exactly `to` (dup2 on the same number would keep CLOEXEC).
int PlaceFd(int from, int to) {
  if (from == to) return ::fcntl(to, F_SETFD, 0);
  return ::dup2(from, to) < 0 ? -1 : 0;
}

[[noreturn]] void ChildMain(const ChildArgs& a) {
  char go = 0;
  ssize_t n;
  do {
    n = ::read(a.sync_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(126);  // the parent gave up; it reports why
  int r = PrepareInitCredentials(a.single_mapping);
  if (r < 0) ChildFail(a, kStepCredentials, -r);
  // Lift every source above the target range first, so no dup2 overwrites another source.
  int src[6] = {a.dev_null, a.dev_null, a.stderr_fd, a.spec_fd, a.control_fd, a.sync_fd};
  int high[6];
  int err_high = ::fcntl(a.error_fd, F_DUPFD_CLOEXEC, 64);
  if (err_high < 0) _exit(125);
  ChildArgs b = a;
  b.error_fd = err_high;
  static_assert(kInitSpecFd == 3 && kInitControlFd == 4 && kInitSyncFd == 5);
  for (int i = 0; i < 6; ++i) {
    high[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 64);
    if (high[i] < 0) ChildFail(b, kStepFds, errno);
  }
  for (int i = 0; i < 6; ++i) {
    if (PlaceFd(high[i], i) != 0) ChildFail(b, kStepFds, errno);
  }
  if (::dup3(err_high, 6, O_CLOEXEC) < 0) ChildFail(b, kStepFds, errno);
  b.error_fd = 6;
  // Nothing of the server's other fds reaches the cell.
  if (syscall(SYS_close_range, 7, ~0U, 0) != 0) ChildFail(b, kStepFds, errno);
  char* const argv[] = {const_cast<char*>("mcpcell-init"), nullptr};
  char* const envp[] = {nullptr};
  ::execve(a.init_path, argv, envp);
  ChildFail(b, kStepExec, errno);
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
  return Ok();
}

Status Cell::Impl::CloneChild(Cell& c, const CellCreateOptions& options, const Launch& l) {
  ChildArgs args{l.init_path.c_str(),
                 l.sync_child.get(),
                 l.err_wr.get(),
                 l.dev_null.get(),
                 options.init_stderr_fd >= 0 ? options.init_stderr_fd : 2,
                 l.spec.get(),
                 l.control_child.get(),
                 c.id_map_.single};
  // clone3 with fork semantics: the child gets a copy of this (multi-threaded) process and
  // only makes raw syscalls before execve. CLONE_NEWCGROUP is left to cell init, which
  // unshares it once the child is inside the cell's cgroup.
  int pidfd = -1;
  struct clone_args ca;
  std::memset(&ca, 0, sizeof ca);
  // CLONE_NEWNET neither: the most expensive namespace to make, it is made by a child of
  // cell init in parallel with init's filesystem setup (sandbox/linux/net.h).
  ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  if (c.cgroup_ && c.cgroup_->DirFd() >= 0) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = static_cast<uint64_t>(c.cgroup_->DirFd());
  }
  long pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) ChildMain(args);
  if (pid < 0) {
    int e = errno;
    Error err = Error::Sys("clone3(CLONE_NEWUSER|NEWNS|NEWPID|NEWIPC|NEWUTS)", e);
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
  if (c.parked_) return SendOrder(l.sync_server.get(), kParkTag, -1, {});
  Result<std::vector<UniqueFd>> mounts = OpenLayerMounts(c, c.spec_.layers);
  if (!mounts) return mounts.error();
  return SendOrder(l.sync_server.get(), kLayersTag, -1, *mounts);
}

// Returns once cell init's execve succeeded (EOF on the CLOEXEC error pipe), or the step of
// the child that failed and why.
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

// Clone, id maps, then 'g' (exec cell init now). The cgroup (unless v2 made it before the
// clone) and the seccomp program are made after 'g', while init execs and builds its
// filesystem on the other core, and handed over.
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
  if (Status s = WriteInitRecord(c.dir_, c.init_pid_); !s) return s;
  if (Status s = Impl::WriteMapsFor(c); !s) return s;
  steps.Mark("id_maps");
  if (::send(launch.sync_server.get(), "g", 1, MSG_NOSIGNAL) != 1) {
    return Error::Sys("send(sync socket, 'g')");
  }
  if (Status s = SendRootOrder(c, launch); !s) return s.error().Wrap("layers");
  if (!c.spec_.layers.empty()) steps.Mark("layers");
  if (!CgroupBeforeClone(options)) {
    if (Status s = CreateCgroupFor(c, options.skip_cgroup); !s) return s.error().Wrap("cgroup");
    steps.Mark("cgroup");
  }
  if (Status s = HandOver(c, launch, steps); !s) return s;
  if (Status s = WaitExec(launch); !s) return s;
  steps.Mark("exec_init");
  control = std::move(launch.control_server);
  return Ok();
}

Status Cell::Impl::WaitReady(Cell& c, std::chrono::milliseconds timeout, int control_fd) {
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
