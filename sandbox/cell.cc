// Cell creation and destruction on the server side (see cell.h and docs/architecture.md).
#include "sandbox/cell.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>

#include "base/fd_passing.h"
#include "sandbox/cell_channel.h"
#include "sandbox/control/protocol.h"
#include "sandbox/init/setup.h"
#include "sandbox/linux/devices.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/linux/seccomp.h"
#include "sandbox/linux/self_exe.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t MicrosSince(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// Times the server's steps into SetupTimings.
class ServerSteps {
 public:
  explicit ServerSteps(SetupTimings& t) : timings_(t), last_(Clock::now()) {}
  void Mark(const char* name) {
    timings_.steps_us.emplace_back(name, MicrosSince(last_));
    last_ = Clock::now();
  }

 private:
  SetupTimings& timings_;
  Clock::time_point last_;
};

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

Result<UniqueFd> SpecMemfd(const CellSpec& spec) {
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

struct Cell::Impl {
  static Status MakeDirs(Cell& c, const CellCreateOptions& options);
  static Status ClaimIds(Cell& c);
  static Status PrepareWorkspace(Cell& c);
  static bool CgroupBeforeClone(const CellCreateOptions& options);
  static Status CreateCgroupFor(Cell& c, bool skip);
  static std::string MakeDeviceNodes(Cell& c);
  static Status WriteMapsFor(Cell& c);
  struct Launch;
  static Status PrepareLaunch(Cell& c, const CellCreateOptions& options, Launch& l);
  static Status CloneChild(Cell& c, const CellCreateOptions& options, const Launch& l);
  static Status HandOver(Cell& c, Launch& l, ServerSteps& steps);
  static Status WaitExec(Launch& l);
  static Status StartInit(Cell& c, const CellCreateOptions& options, ServerSteps& steps,
                          UniqueFd& control);
  static Status WaitReady(Cell& c, const CellCreateOptions& options, int control_fd);
};

Result<std::string> FindCellInit() {
  Result<std::string> path = SiblingExecutable("mcpcell-init");
  if (!path) return path.error().Wrap("find cell init");
  if (::access(path->c_str(), X_OK) != 0) {
    return Error::Sys("cell init not found next to the server: access(\"" + *path + "\", X_OK)");
  }
  return path;
}

Status Cell::Impl::MakeDirs(Cell& c, const CellCreateOptions&) {
  if (Status s = EnsureStateDir(c.spec_.state_dir); !s) return s;
  std::string dir = c.spec_.state_dir + "/cells/" + c.spec_.id;
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return Error::Msg("cell dir " + dir + " exists: id already in use");
    return Error::Sys("mkdir(\"" + dir + "\")");
  }
  c.dir_ = dir;  // from here on, Destroy removes it
  return WriteOwnerRecord(dir);
}

Result<std::unique_ptr<Cell>> Cell::Create(const CellSpec& spec, const CellCreateOptions& options) {
  const Clock::time_point start = Clock::now();
  std::unique_ptr<Cell> c(new Cell());
  c->spec_ = spec;
  ServerSteps steps(c->timings_);
  auto fail = [&](const Error& e, const char* step) -> Result<std::unique_ptr<Cell>> {
    Error wrapped = e.Wrap(std::string("create cell ") + spec.id + ": " + step);
    (void)c->Destroy();
    return wrapped;
  };
  if (Status s = ValidateCellSpec(spec); !s) return s.error().Wrap("cell spec");
  if (c->spec_.rootfs.skeleton_dir.empty()) {
    Result<std::string> skeleton = PrepareHostTemplate(spec.state_dir);
    if (!skeleton) return skeleton.error().Wrap("create cell " + spec.id + ": template");
    c->spec_.rootfs.skeleton_dir = *skeleton;
  }
  steps.Mark("template");
  if (Status s = Impl::MakeDirs(*c, options); !s) return fail(s.error(), "cell dir");
  if (Status s = Impl::ClaimIds(*c); !s) return fail(s.error(), "id range");
  if (Status s = Impl::PrepareWorkspace(*c); !s) return fail(s.error(), "workspace");
  steps.Mark("cell_dir");
  const std::string dev_warning = Impl::MakeDeviceNodes(*c);
  steps.Mark("dev_nodes");
  // v2: the child is cloned straight into its cgroup, which must exist first. Otherwise
  // StartInit creates it while cell init execs and builds its filesystem.
  if (Impl::CgroupBeforeClone(options)) {
    if (Status s = Impl::CreateCgroupFor(*c, options.skip_cgroup); !s)
      return fail(s.error(), "cgroup");
    steps.Mark("cgroup");
  }
  UniqueFd control;
  if (Status s = Impl::StartInit(*c, options, steps, control); !s) return fail(s.error(), "start");
  const Clock::time_point ready_start = Clock::now();
  if (Status s = Impl::WaitReady(*c, options, control.get()); !s) return fail(s.error(), "setup");
  c->timings_.steps_us.emplace_back("ready", MicrosSince(ready_start));
  CellChannel::Options channel_options;
  Cgroup* cgroup = c->cgroup_.get();
  if (cgroup) {
    channel_options.oom_kill_count = [cgroup]() -> Result<uint64_t> {
      return cgroup->OomKillCount();
    };
  }
  c->channel_ = std::make_unique<CellChannel>(std::move(control), std::move(channel_options));
  if (!spec.seccomp) c->warnings_.push_back("seccomp disabled by the spec");
  if (c->id_map_.single) {
    c->warnings_.push_back(
        "single uid mapping (server not root): the sandbox user owns the cell's root "
        "filesystem (its writes stay in the cell) and the cell is the server's user on the host");
  }
  if (!dev_warning.empty()) c->warnings_.push_back(dev_warning);
  c->timings_.total_us = MicrosSince(start);
  return c;
}

Status Cell::Impl::ClaimIds(Cell& c) {
  if (!CellsRunAsOtherUids()) {
    // Desktop mode: we own exactly one uid and gid, and they become the sandbox user's.
    c.id_map_ = CellIdMap{true, ::geteuid(), ::getegid(), 1, -1};
    return Ok();
  }
  Result<int> slot = ClaimIdRangeSlot(c.spec_.state_dir + "/idranges", c.spec_.id);
  if (!slot) return slot.error();
  uint32_t base = kIdRangeBase + static_cast<uint32_t>(*slot) * kIdRangeSize;
  c.id_map_ = CellIdMap{false, base, base, kIdRangeSize, *slot};
  return Ok();
}

namespace {
// A persistent workspace outlives its cells, but a root server gives each cell its own
// host id range, so files an earlier cell made belong to ids the new cell does not have.
// Re-own them for this cell's sandbox user: only entries whose owner lies in mcpcell's
// range space (never the operator's own files), without following symlinks (lchown on
// an FTW_PHYS walk), and without crossing into other filesystems (FTW_MOUNT). The cell
// is not running yet, so nothing inside can race the walk.
uid_t adopt_uid;
gid_t adopt_gid;
int AdoptEntry(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_NS || type == FTW_DNR) return 0;
  bool in_ranges = st->st_uid >= kIdRangeBase || st->st_gid >= kIdRangeBase;
  if (!in_ranges || (st->st_uid == adopt_uid && st->st_gid == adopt_gid)) return 0;
  uid_t uid = st->st_uid >= kIdRangeBase ? adopt_uid : st->st_uid;
  gid_t gid = st->st_gid >= kIdRangeBase ? adopt_gid : st->st_gid;
  return ::lchown(path, uid, gid) == 0 ? 0 : -1;
}
std::mutex adopt_mu;  // nftw's callback has no context pointer
}  // namespace

Status AdoptPersistentWorkspace(const std::string& dir, uid_t uid, gid_t gid) {
  std::lock_guard lock(adopt_mu);
  adopt_uid = uid;
  adopt_gid = gid;
  if (::nftw(dir.c_str(), AdoptEntry, 64, FTW_PHYS | FTW_MOUNT) != 0) {
    return Error::Sys("re-own persistent workspace \"" + dir + "\" for uid " + std::to_string(uid));
  }
  return Ok();
}

Status Cell::Impl::PrepareWorkspace(Cell& c) {
  if (!c.spec_.workspace_host_dir.empty()) {
    struct stat st;
    if (::stat(c.spec_.workspace_host_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Error::Sys("workspace_host_dir \"" + c.spec_.workspace_host_dir + "\"",
                        errno ? errno : ENOTDIR);
    }
    if (c.id_map_.single) return Ok();
    return AdoptPersistentWorkspace(c.spec_.workspace_host_dir,
                                    c.id_map_.host_uid_base + c.spec_.sandbox_uid,
                                    c.id_map_.host_gid_base + c.spec_.sandbox_gid);
  }
  // An ephemeral workspace with a size limit is a tmpfs of the cell's own (init's binds
  // step): nothing of it on the host, so nothing to make or remove here.
  if (c.spec_.tmpfs.workspace_bytes > 0) return Ok();
  std::string ws = c.dir_ + "/workspace";
  if (::mkdir(ws.c_str(), 0755) != 0) return Error::Sys("mkdir(\"" + ws + "\")");
  if (c.id_map_.single) return Ok();  // already ours, and ours is the sandbox user's
  uid_t uid = c.id_map_.host_uid_base + c.spec_.sandbox_uid;
  gid_t gid = c.id_map_.host_gid_base + c.spec_.sandbox_gid;
  if (::chown(ws.c_str(), uid, gid) != 0) {
    return Error::Sys("chown(\"" + ws + "\", " + std::to_string(uid) + ", " + std::to_string(gid) +
                      ")");
  }
  return Ok();
}

namespace {
const CgroupHost& Host() {
  static std::once_flag once;
  static CgroupHost host;
  std::call_once(once, [] { host = DetectCgroupHost(); });
  return host;
}
}  // namespace

bool Cell::Impl::CgroupBeforeClone(const CellCreateOptions& options) {
  return !options.skip_cgroup && Host().can_create && Host().mode == CgroupMode::kV2;
}

Status Cell::Impl::CreateCgroupFor(Cell& c, bool skip) {
  if (skip) {
    c.cgroup_missing_reason_ = "cgroup disabled by the caller";
  } else {
    const CgroupHost& host = Host();
    if (host.can_create) {
      Result<std::unique_ptr<Cgroup>> cg = CreateCellCgroup(c.spec_.id, c.spec_.limits);
      if (!cg) return cg.error();
      c.cgroup_ = std::move(cg).value();
      return Ok();
    }
    c.cgroup_missing_reason_ = host.detail;
  }
  c.warnings_.push_back("limits not enforced: " + c.cgroup_missing_reason_);
  return Ok();
}

// The cell's own /dev nodes where the server may make them; otherwise cell init binds the
// host's, and the returned warning says what that shares (never a broken /dev, never
// silently).
std::string Cell::Impl::MakeDeviceNodes(Cell& c) {
  c.spec_.device_dir.clear();
  std::string reason = DeviceNodesUnavailableReason();
  if (reason.empty()) {
    const std::string dir = c.dir_ + "/dev";
    Status made = MakeCellDeviceNodes(dir);
    if (made) {
      c.spec_.device_dir = dir;
      return "";
    }
    reason = made.error().message;
  }
  return "device nodes shared with the host: /dev/null, zero, full, random, urandom and tty "
         "are the host's own inodes (" +
         reason + "), so flock/fcntl locks on them are seen by other cells and host programs";
}

Status Cell::Impl::WriteMapsFor(Cell& c) {
  const CellIdMap& m = c.id_map_;
  if (m.single) {
    return WriteIdMaps(c.init_pid_, {c.spec_.sandbox_uid, m.host_uid_base, 1},
                       {c.spec_.sandbox_gid, m.host_gid_base, 1}, /*deny_setgroups=*/true);
  }
  return WriteIdMaps(c.init_pid_, {0, m.host_uid_base, m.count}, {0, m.host_gid_base, m.count},
                     /*deny_setgroups=*/false);
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
  Result<UniqueFd> spec_fd = SpecMemfd(c.spec_);
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
  l.sync_server.Reset();
  return Ok();
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

Status Cell::Impl::WaitReady(Cell& c, const CellCreateOptions& options, int control_fd) {
  struct pollfd pfd = {control_fd, POLLIN, 0};
  int timeout_ms = static_cast<int>(options.ready_timeout.count());
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
  const bool want_listener = c.spec_.egress_proxy_port != 0;
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

int Cell::TakeEgressListener() {
  const int fd = egress_listener_;
  egress_listener_ = -1;
  return fd;
}

Cell::~Cell() { (void)Destroy(); }

CellChannel& Cell::channel() { return *channel_; }

Result<CgroupUsage> Cell::Usage() const {
  if (!cgroup_) return Error::Msg("limits not enforced: " + cgroup_missing_reason_);
  return cgroup_->Usage();
}

bool Cell::alive() const {
  if (pidfd_ < 0) return false;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info,
               WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid == 0;
}

Status Cell::Destroy() {
  if (destroyed_) return Ok();
  destroyed_ = true;
  const Clock::time_point start = Clock::now();
  ServerSteps steps(destroy_timings_);
  Status first;
  auto keep = [&first](Status s, const char* what) {
    if (!s && first) first = s.error().Wrap(what);
  };
  // 1. SIGKILL pid 1: the kernel then kills every process of the pid namespace, and the
  //    mount and network namespaces go with the last of them.
  if (pidfd_ >= 0) {
    if (syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0) != 0 && errno != ESRCH) {
      keep(Error::Sys("pidfd_send_signal(cell init, SIGKILL)"), "kill");
    }
  }
  steps.Mark("kill");
  if (egress_listener_ >= 0) {
    ::close(egress_listener_);
    egress_listener_ = -1;
  }
  // 2. Close the channel: pending calls on other threads fail with a clear error. The object
  //    itself lives until ~Cell, so a call racing Destroy never touches freed memory.
  if (channel_) channel_->Close();
  steps.Mark("close_channel");
  // 3. Reap init. Its exit completes only after every process of its namespace is gone.
  if (pidfd_ >= 0) {
    siginfo_t info;
    int r;
    do {
      r = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED);
    } while (r < 0 && errno == EINTR);
    if (r != 0 && errno != ECHILD) keep(Error::Sys("waitid(cell init)"), "reap");
    ::close(pidfd_);
    pidfd_ = -1;
  }
  init_pid_ = -1;
  steps.Mark("reap");
  // 4. The cgroup, now empty.
  if (cgroup_) keep(cgroup_->Destroy(), "cgroup");
  steps.Mark("cgroup");
  // 5. The cell dir (workspace unless the spec named one, records, device nodes), and the
  //    id range claim.
  if (!dir_.empty()) keep(RemoveCellDir(dir_), "cell dir");
  if (id_map_.slot >= 0) {
    keep(ReleaseIdRangeSlot(spec_.state_dir + "/idranges", id_map_.slot), "id range");
    id_map_.slot = -1;
  }
  steps.Mark("cell_dir");
  destroy_timings_.total_us = MicrosSince(start);
  if (!first) return first.error().Wrap("destroy cell " + spec_.id);
  return Ok();
}

Result<std::vector<std::string>> ReapOrphans(const std::string& state_dir) {
  std::vector<std::string> ids;
  const std::string cells = state_dir + "/cells";
  DIR* d = ::opendir(cells.c_str());
  if (!d) {
    if (errno == ENOENT) return ids;
    return Error::Sys("opendir(\"" + cells + "\")");
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string id = e->d_name;
    if (id == "." || id == "..") continue;
    // Cells of another server that is still running share this state dir; not orphans.
    if (OwnedByAnotherLiveServer(cells + "/" + id)) continue;
    ids.push_back(id);
  }
  ::closedir(d);
  for (const std::string& id : ids) {
    // Kill a still-running cell init (and so its whole pid namespace), but only if the pid
    // still names the same process: start times differ when the pid was reused.
    Result<InitRecord> rec = ReadInitRecord(cells + "/" + id);
    if (rec && ProcStartTime(rec->pid) == rec->start_time) {
      int pidfd = static_cast<int>(syscall(SYS_pidfd_open, rec->pid, 0));
      if (pidfd >= 0) {
        if (ProcStartTime(rec->pid) == rec->start_time) {
          syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
          struct pollfd p = {pidfd, POLLIN, 0};
          ::poll(&p, 1, 5000);  // readable once it has exited
        }
        ::close(pidfd);
      }
    }
  }
  std::vector<std::string> orphans = ids;
  Status cg = ReapStaleCgroups([&orphans](const std::string& id) {
    return std::find(orphans.begin(), orphans.end(), id) == orphans.end();
  });
  if (!cg) return cg.error().Wrap("reap orphan cgroups");
  for (const std::string& id : ids) {
    if (Status s = RemoveCellDir(cells + "/" + id); !s) return s.error().Wrap("reap cell " + id);
  }
  // Release the id range claims of cells that no longer exist (the orphans just reaped, or
  // a crash between claim and cell dir or between removing the dir and the claim). A claim
  // names its cell; claims of cells still in cells/ belong to another live server sharing
  // this state dir and must stay, or a new cell here would get the same host uids as its
  // live cell. An empty claim younger than a minute is a claim being written right now
  // (claim files of earlier versions; a symlink claim is never empty).
  const std::string ranges = state_dir + "/idranges";
  if (DIR* r = ::opendir(ranges.c_str())) {
    while (struct dirent* e = ::readdir(r)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string claim = ReadIdRangeClaim(::dirfd(r), name.c_str());
      std::string owner = claim.substr(0, claim.find_first_of(" \t\n"));
      struct stat st;
      bool fresh = ::fstatat(::dirfd(r), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                   ::time(nullptr) - st.st_mtime < 60;
      if (owner.empty() ? fresh
                        : owner.find('/') == std::string::npos && owner != "." && owner != ".." &&
                              ::access((cells + "/" + owner).c_str(), F_OK) == 0) {
        continue;
      }
      if (::unlinkat(::dirfd(r), name.c_str(), 0) != 0 && errno != ENOENT) {
        Error err = Error::Sys("unlink(\"" + ranges + "/" + name + "\")");
        ::closedir(r);
        return err;
      }
    }
    ::closedir(r);
  }
  return ids;
}

}  // namespace mcpcell::sandbox
