// The in-namespace setup steps of cell init (see setup.h for the order and why).
#include "sandbox/init/setup.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fd_passing.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/devices.h"
#include "sandbox/linux/hostname.h"
#include "sandbox/linux/mounts.h"
#include "sandbox/linux/net.h"
#include "sandbox/linux/overlay.h"

namespace mcpcell::sandbox {
namespace {

uint64_t NowNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Status Step(const char* name, Status status, StepTimer& timer) {
  if (!status) return status.error().Wrap(name);
  timer.Mark(name);
  return Ok();
}

Status EnterCgroupNamespace(ServerHandover& handover) {
  // Nothing of the cell may run before init is in the cell's cgroup; from then on that
  // cgroup is "/" for every process of the cell.
  if (!handover.cgroup_join_fds.empty()) {
    int fds[kMaxCgroupJoinFds];
    size_t count = 0;
    for (UniqueFd& fd : handover.cgroup_join_fds) fds[count++] = fd.Release();
    handover.cgroup_join_fds.clear();
    if (int err = JoinCgroupFromChild(fds, count); err != 0) {
      return Error::Sys("joining the cell's v1 cgroup: write(tasks, \"0\")", err);
    }
  }
  if (::unshare(CLONE_NEWCGROUP) != 0) return Error::Sys("unshare(CLONE_NEWCGROUP)");
  return Ok();
}

// Reads exactly `size` bytes from the sync socket.
Status ReadFully(int fd, void* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, static_cast<char*>(buf) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Sys("read(sync socket)", n < 0 ? errno : EPIPE);
    done += static_cast<size_t>(n);
  }
  return Ok();
}

// A mount under /workspace needs its mount point inside the workspace itself (bound over
// the upper's). Components the cell could have made (a persistent workspace) must not be
// symlinks: before pivot_root they would resolve against the host's root.
Status MakeWorkspaceMountTarget(const CellMount& m, const std::string& root) {
  struct stat st;
  if (::stat(m.host_path.c_str(), &st) != 0) return Error::Sys("stat(\"" + m.host_path + "\")");
  std::string path = root + "/workspace";
  std::string rest = m.cell_path.substr(std::string("/workspace").size());
  size_t start = 1;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string::npos) end = rest.size();
    path += "/" + rest.substr(start, end - start);
    bool last = end == rest.size();
    struct stat cur;
    if (::lstat(path.c_str(), &cur) == 0) {
      if (S_ISLNK(cur.st_mode)) return Error::Msg("mount point " + path + " is a symlink");
    } else if (errno != ENOENT) {
      return Error::Sys("lstat(\"" + path + "\")");
    } else if (!last || S_ISDIR(st.st_mode)) {
      if (::mkdir(path.c_str(), 0755) != 0) return Error::Sys("mkdir(\"" + path + "\")");
    } else if (Status s = MakeEmptyFile(path, 0644); !s) {
      return s;
    }
    start = end + 1;
  }
  return Ok();
}

Status BindCellMounts(const CellSpec& spec, const std::string& scratch, const std::string& root) {
  std::string workspace = spec.workspace_host_dir.empty()
                              ? spec.state_dir + "/cells/" + spec.id + "/workspace"
                              : spec.workspace_host_dir;
  if (HasWorkspaceLayer(spec)) {
    if (Status s = MountWorkspaceOverlay(spec, scratch, root + "/workspace"); !s) return s;
  } else if (spec.workspace_host_dir.empty() && spec.tmpfs.workspace_bytes > 0) {
    // An ephemeral workspace with a disk limit: a sized tmpfs owned by the sandbox user.
    const std::string target = root + "/workspace";
    if (Status s = MountTmpfs(target, spec.tmpfs.workspace_bytes, 0755); !s) return s;
    if (::chown(target.c_str(), spec.sandbox_uid, spec.sandbox_gid) != 0) {
      return Error::Sys("chown(\"" + target + "\", " + std::to_string(spec.sandbox_uid) + ")");
    }
  } else if (Status s = BindMount(workspace, root + "/workspace", /*writable=*/true); !s) {
    return s;
  }
  for (const CellMount& m : spec.mounts) {
    if (m.cell_path.rfind("/workspace/", 0) == 0) {
      if (Status s = MakeWorkspaceMountTarget(m, root); !s) return s;
    }
    // Other targets were made in the upper by MountCellRoot.
    if (Status s = BindMount(m.host_path, root + m.cell_path, m.writable, false, true); !s) {
      return s;
    }
  }
  return Ok();
}

// Receives one order of setup.h (`tag`, a uint32 count, fds attached to the first byte);
// at most `max_fds` fds. Returns the fds; `count` gets the count.
Result<std::vector<UniqueFd>> ReceiveOrder(char tag, size_t max_fds, uint32_t& count,
                                           const char* what) {
  char head[1 + sizeof(uint32_t)];
  Result<ReceivedWithFds> got =
      ReceiveWithFds(kInitSyncFd, std::span<uint8_t>(reinterpret_cast<uint8_t*>(head), sizeof head),
                     max_fds, MSG_WAITALL, what);
  if (!got) return got.error();
  if (got->size != sizeof head || head[0] != tag) {
    return Error::Msg(std::string(what) + ": expected '" + tag + "', got " +
                      std::to_string(got->size) + " bytes" +
                      (got->size > 0 ? std::string(" starting '") + head[0] + "'" : ""));
  }
  std::memcpy(&count, head + 1, sizeof count);
  if (got->fds_truncated) return Error::Msg(std::string(what) + ": too many fds");
  return std::move(got->fds);
}

Status CheckLayerMountCount(const CellSpec& spec, uint32_t count, size_t fds) {
  if (count == spec.layers.size() && fds == count) return Ok();
  return Error::Msg("the server sent " + std::to_string(fds) + " layer mounts (" +
                    std::to_string(count) + " announced) for " +
                    std::to_string(spec.layers.size()) + " layers");
}

// O_PATH fds on the scratch `layers` dir and the workspace's tmpfs at the numbers of
// setup.h. Opened before pivot_root detaches the scratch tmpfs from every path; an fd
// keeps a detached mount reachable.
Status KeepWritableLayersReachable(const CellSpec& spec, const std::string& scratch) {
  std::vector<std::pair<std::string, int>> keep = {{scratch + "/layers", kInitWritableLayersFd}};
  if (HasWorkspaceLayer(spec)) keep.emplace_back(scratch + "/ws", kInitWorkspaceLayerFd);
  for (const auto& [path, number] : keep) {
    UniqueFd fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return Error::Sys("open(\"" + path + "\", O_PATH)");
    if (::fcntl(number, F_GETFD) >= 0) {
      return Error::Msg("fd " + std::to_string(number) + " is already in use in cell init");
    }
    if (::dup3(fd.get(), number, O_CLOEXEC) != number) {
      return Error::Sys("dup3(\"" + path + "\", " + std::to_string(number) + ")");
    }
  }
  return Ok();
}

Status MountRunAndTmp(const CellSpec& spec, const std::string& root) {
  if (Status s = MountTmpfs(root + "/tmp", spec.tmpfs.tmp_bytes, 01777); !s) return s;
  if (Status s = MountTmpfs(root + "/run", spec.tmpfs.run_bytes, 0755); !s) return s;
  // Where the server writes the session's file-mode secrets (docs/secrets.md) through the
  // control channel, as the sandbox user: the user's own, for nobody else in the cell.
  const std::string secrets = root + "/run/secrets";
  if (::mkdir(secrets.c_str(), 0700) != 0) return Error::Sys("mkdir(\"" + secrets + "\")");
  if (::chown(secrets.c_str(), spec.sandbox_uid, spec.sandbox_gid) != 0) {
    return Error::Sys("chown(\"" + secrets + "\", " + std::to_string(spec.sandbox_uid) + ")");
  }
  return Ok();
}

Status Harden() {
  // Not dumpable: /proc/1 becomes owned by a uid the sandbox user is not, so its code
  // cannot read init's memory, environment or fds even in single-mapping mode.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Error::Sys("prctl(PR_SET_DUMPABLE, 0)");
  return Ok();
}

}  // namespace

StepTimer::StepTimer() : last_ns_(NowNs()) {}

void StepTimer::Mark(const char* name) {
  uint64_t now = NowNs();
  steps_.emplace_back(name, (now - last_ns_) / 1000);
  last_ns_ = now;
}

Result<CellSpec> ReadSpecFromFd(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Error::Sys("fstat(spec fd " + std::to_string(fd) + ")");
  if (st.st_size < 0 || static_cast<size_t>(st.st_size) > kMaxCellSpecBytes) {
    ::close(fd);
    return Error::Msg("spec fd: size " + std::to_string(st.st_size) + " out of range");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = n < 0 ? errno : EIO;
      ::close(fd);
      return Error::Sys("pread(spec fd)", saved);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return DecodeCellSpec(bytes);
}

Status MakeCellMountsPrivate(StepTimer& timer) {
  return Step("mount_ns", MakeMountsPrivate(), timer);
}

Result<RootOrder> ReceiveRootOrder(const CellSpec& spec, StepTimer& timer) {
  char head[1 + sizeof(uint32_t)];
  Result<ReceivedWithFds> got =
      ReceiveWithFds(kInitSyncFd, std::span<uint8_t>(reinterpret_cast<uint8_t*>(head), sizeof head),
                     kMaxCellLayers, MSG_WAITALL, "sync socket, root order");
  if (!got) return got.error().Wrap("layers");
  RootOrder order;
  uint32_t count = 0;
  if (got->size == sizeof head) std::memcpy(&count, head + 1, sizeof count);
  if (got->size == sizeof head && head[0] == kParkTag) {
    if (!spec.layers.empty() || count != 0 || !got->fds.empty()) {
      return Error::Msg("layers: a parked cell takes its layers when claimed, not before");
    }
    order.park = true;
  } else if (got->size != sizeof head || head[0] != kLayersTag) {
    return Error::Msg("layers: the server sent no root order (" + std::to_string(got->size) +
                      " bytes)");
  } else if (got->fds_truncated) {
    return Error::Msg("layers: more layer mounts than " + std::to_string(kMaxCellLayers));
  } else if (Status s = CheckLayerMountCount(spec, count, got->fds.size()); !s) {
    return s.error().Wrap("layers");
  } else {
    order.layer_mounts = std::move(got->fds);
  }
  if (!spec.layers.empty() || order.park) timer.Mark(order.park ? "park_order" : "layers_wait");
  return order;
}

Result<CellClaim> ReceiveClaim(const CellSpec& parked) {
  uint32_t count = 0;
  Result<std::vector<UniqueFd>> fds = ReceiveOrder(kClaimTag, 1, count, "sync socket, claim");
  if (fds && (count != 0 || fds->size() != 1)) fds = Error::Msg("claim: no spec memfd");
  Result<std::vector<UniqueFd>> mounts = Error::Msg("claim: not received");
  if (fds) mounts = ReceiveOrder(kLayersTag, kMaxCellLayers, count, "sync socket, claim layers");
  ::close(kInitSyncFd);
  if (!fds) return fds.error();
  if (!mounts) return mounts.error();
  Result<CellSpec> spec = ReadSpecFromFd((*fds)[0].Release());
  if (!spec) return spec.error().Wrap("claim");
  // Only the layers are the claimer's: everything else stays what the cell was made with.
  CellSpec without_layers = *spec;
  without_layers.layers.clear();
  if (EncodeCellSpec(without_layers) != EncodeCellSpec(parked)) {
    return Error::Msg("claim: the spec differs from the parked cell's in more than its layers");
  }
  if (Status s = CheckLayerMountCount(*spec, count, mounts->size()); !s) {
    return s.error().Wrap("claim");
  }
  CellClaim claim;
  claim.spec = std::move(spec).value();
  claim.layer_mounts = std::move(mounts).value();
  return claim;
}

Result<CellRoot> BuildCellRoot(const CellSpec& spec, std::vector<UniqueFd>& layer_mounts,
                               StepTimer& timer) {
  // Every cell mounts its scratch tmpfs on the same host directory, each in its own mount
  // namespace. The host never removes a directory another namespace has mounts on, which
  // would cost an RCU grace period per mount point at destroy.
  const std::string scratch = spec.state_dir + "/mnt";
  const std::string root = scratch + "/newroot";
  const std::string hostname = CellHostname(spec);
  Status rootfs = MountCellRoot(spec, hostname, scratch, root, layer_mounts);
  if (Status s = Step("rootfs", rootfs, timer); !s) return s.error();
  if (Status s = Step("binds", BindCellMounts(spec, scratch, root), timer); !s) return s.error();
  Status reachable = KeepWritableLayersReachable(spec, scratch);
  if (Status s = Step("keep_layers", reachable, timer); !s) return s.error();
  if (Status s = Step("proc", MountProc(root + "/proc"), timer); !s) return s.error();
  const std::string nodes = spec.device_dir.empty() ? "/dev" : spec.device_dir;
  Status dev = MountMinimalDev(root + "/dev", nodes, spec.tmpfs.shm_bytes);
  if (Status s = Step("dev", dev, timer); !s) return s.error();
  if (Status s = Step("tmpfs", MountRunAndTmp(spec, root), timer); !s) return s.error();
  if (Status s = Step("hostname", SetHostname(hostname), timer); !s) return s.error();
  if (Status s = Step("pivot_root", PivotRoot(root), timer); !s) return s.error();
  if (::chdir("/workspace") != 0) return Error::Sys("chdir(\"/workspace\")").Wrap("pivot_root");
  CellRoot result;
  result.root_fd = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!result.root_fd) return Error::Sys("open(\"/\", O_PATH)");
  return result;
}

Status JoinCellNetwork(LoopbackNamespaceChild& net, StepTimer& timer) {
  // setns takes the child's pidfd, so where init stands in the mount tree changes nothing.
  return Step("net", JoinLoopbackNamespace(net), timer);
}

Result<ServerHandover> ReceiveHandover(StepTimer& timer, bool keep_sync_open) {
  ServerHandover handover;
  char head[1 + sizeof(uint32_t)];
  Result<ReceivedWithFds> got =
      ReceiveWithFds(kInitSyncFd, std::span<uint8_t>(reinterpret_cast<uint8_t*>(head), sizeof head),
                     kMaxCgroupJoinFds, MSG_WAITALL, "sync socket");
  if (got) handover.cgroup_join_fds = std::move(got->fds);
  timer.Mark("cgroup_wait");  // how long init waited for the server, if at all
  Status result = Ok();
  uint32_t count = 0;
  if (!got) {
    result = got.error();
  } else if (got->size == 0) {
    result = Error::Msg("the server closed the sync socket without a hand-over");
  } else if (got->size != sizeof head || head[0] != kHandoverTag) {
    result = Error::Msg("malformed hand-over from the server (" + std::to_string(got->size) +
                        " bytes; a server and cell init of different builds?)");
  } else if (got->fds_truncated) {
    result = Error::Msg("hand-over: more cgroup fds than " + std::to_string(kMaxCgroupJoinFds));
  } else if (std::memcpy(&count, head + 1, sizeof count), count > BPF_MAXINSNS) {
    result = Error::Msg("hand-over: " + std::to_string(count) + " seccomp instructions");
  } else if (count > 0) {
    handover.seccomp.filter.resize(count);
    result = ReadFully(kInitSyncFd, handover.seccomp.filter.data(), count * sizeof(sock_filter));
  }
  if (!keep_sync_open) ::close(kInitSyncFd);
  if (!result) return result.error();
  return handover;
}

Status EnterCellCgroup(ServerHandover& handover, StepTimer& timer) {
  if (Status s = Step("cgroupns", EnterCgroupNamespace(handover), timer); !s) return s;
  return Step("harden", Harden(), timer);
}

}  // namespace mcpcell::sandbox
