// Cell creation on the server side (see cell.h and docs/architecture.md): Create, the
// steps in order, and the host-side preparation steps (cell dir, id range, workspace,
// cgroup, device nodes). Starting cell init is cell_launch.cc, Destroy cell_destroy.cc.
#include "sandbox/cell.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

#include "sandbox/cell_channel.h"
#include "sandbox/cell_internal.h"
#include "sandbox/cell_reactor.h"
#include "sandbox/init/setup.h"
#include "sandbox/linux/devices.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {

using cell_internal::Clock;
using cell_internal::MicrosSince;
using cell_internal::ServerSteps;

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
  return Impl::Make(spec, options, /*park=*/false);
}

Result<std::unique_ptr<Cell>> Cell::CreateParked(const CellSpec& spec,
                                                 const CellCreateOptions& options) {
  if (!spec.layers.empty()) {
    return Error::Msg("create cell " + spec.id + ": a parked cell takes its layers when unparked");
  }
  return Impl::Make(spec, options, /*park=*/true);
}

Result<std::unique_ptr<Cell>> Cell::Impl::Make(const CellSpec& spec,
                                               const CellCreateOptions& options, bool park) {
  const Clock::time_point start = Clock::now();
  std::unique_ptr<Cell> c(new Cell());
  c->spec_ = spec;
  c->parked_ = park;
  c->ready_timeout_ = options.ready_timeout;
  c->reactor_ = options.reactor;
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
  if (Status s = Impl::WaitReady(*c, options.ready_timeout, control.get()); !s) {
    return fail(s.error(), "setup");
  }
  c->timings_.steps_us.emplace_back(park ? "parked" : "ready", MicrosSince(ready_start));
  if (park) {
    c->parked_control_ = std::move(control);
  } else {
    Impl::OpenChannel(*c, std::move(control));
  }
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

void Cell::Impl::OpenChannel(Cell& c, UniqueFd control) {
  CellChannel::Options channel_options;
  // The control socket is waited on by the cells' reactor (or the process's default one):
  // no thread of its own per cell.
  if (c.reactor_ != nullptr) channel_options.io = &c.reactor_->context();
  channel_options.name = "cell " + c.spec_.id;
  Cgroup* cgroup = c.cgroup_.get();
  if (cgroup) {
    channel_options.oom_kill_count = [cgroup]() -> Result<uint64_t> {
      return cgroup->OomKillCount();
    };
  }
  c.channel_ = std::make_unique<CellChannel>(std::move(control), std::move(channel_options));
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
  // An ephemeral workspace with a size limit, or over snapshot layers, is a tmpfs of the
  // cell's own (init's binds step): nothing of it on the host, so nothing to make or remove.
  if (c.spec_.tmpfs.workspace_bytes > 0 || HasWorkspaceLayer(c.spec_)) return Ok();
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
  if (Status s =
          cell_internal::InjectedLaunchFailure(cell_internal::LaunchStep::kCgroup, "create cgroup");
      !s) {
    return s;
  }
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

int Cell::TakeEgressListener() {
  const int fd = egress_listener_;
  egress_listener_ = -1;
  return fd;
}

CellChannel& Cell::channel() { return *channel_; }

Result<CgroupUsage> Cell::Usage() const {
  if (!cgroup_) return Error::Msg("limits not enforced: " + cgroup_missing_reason_);
  return cgroup_->Usage();
}

// Pause and resume (cell.h). The cgroup holds every process of the cell, init included,
// so a frozen cell answers nothing until thawed.
Status Cell::Freeze() {
  if (destroyed_) return Error::Msg("cell " + id() + " is destroyed");
  if (!cgroup_) {
    return Error::Msg("cell " + id() + " cannot be paused: it has no cgroup (" +
                      cgroup_missing_reason_ + ")");
  }
  if (Status s = cgroup_->Freeze(); !s) return s.error().Wrap("pause cell " + id());
  frozen_ = true;
  return Ok();
}

Status Cell::Thaw() {
  if (!frozen_) return Ok();
  if (destroyed_) return Error::Msg("cell " + id() + " is destroyed");
  if (Status s = cgroup_->Thaw(); !s) return s.error().Wrap("resume cell " + id());
  frozen_ = false;
  return Ok();
}

}  // namespace mcpcell::sandbox

namespace mcpcell::sandbox {

namespace {

// A copy of cell init's fd `number` in this process, and the path that goes through it.
Result<std::string> TakeInitFd(int pidfd, int number, std::vector<UniqueFd>& held) {
  const long fd = ::syscall(SYS_pidfd_getfd, pidfd, number, 0);
  if (fd < 0) return Error::Sys("pidfd_getfd(cell init, " + std::to_string(number) + ")");
  held.emplace_back(static_cast<int>(fd));
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

Result<CellWritableLayers> Cell::WritableLayers() const {
  if (destroyed_ || !alive()) return Error::Msg("cell " + spec_.id + " is not running");
  CellWritableLayers out;
  Result<std::string> layers = TakeInitFd(pidfd_, kInitWritableLayersFd, out.held);
  if (!layers) return layers.error().Wrap("cell " + spec_.id);
  out.root_upper = *layers + "/root/upper";
  for (size_t i = 0; i < spec_.rootfs.system_dirs.size(); ++i) {
    out.system_uppers.emplace_back(spec_.rootfs.system_dirs[i],
                                   *layers + "/sys" + std::to_string(i) + "/upper");
  }
  if (HasWorkspaceLayer(spec_)) {
    Result<std::string> ws = TakeInitFd(pidfd_, kInitWorkspaceLayerFd, out.held);
    if (!ws) return ws.error().Wrap("cell " + spec_.id);
    out.workspace = *ws + "/upper";
    out.workspace_is_upper = true;
  } else if (!spec_.workspace_host_dir.empty()) {
    out.workspace = spec_.workspace_host_dir;
  } else if (spec_.tmpfs.workspace_bytes > 0) {
    out.workspace = "/proc/" + std::to_string(init_pid_) + "/root/workspace";
  } else {
    out.workspace = dir_ + "/workspace";
  }
  out.single_mapping = id_map_.single;
  out.uid_base = id_map_.single ? 0 : id_map_.host_uid_base;
  out.gid_base = id_map_.single ? 0 : id_map_.host_gid_base;
  return out;
}

}  // namespace mcpcell::sandbox
