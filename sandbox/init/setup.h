// The in-namespace half of cell creation, run by cell init (pid 1 of the cell) right after
// it was exec'd and before it serves the control socket.
//
// The server's child (a CLONE_VM child sharing the server's memory, linux/clone_vm.h) has
// entered new user, mount, pid, ipc and uts namespaces and exec'd init before any uid/gid
// map exists: init's uid is unmapped, and its capabilities came through execve in the
// ambient set (linux/user.h). So init's first act is to wait on kInitSyncFd for the go byte
// (kGoRange or kGoSingle, sent once the server has written the maps; EOF: the server gave
// up, init exits), and with a range to become root of its namespace (BecomeNamespaceRoot);
// "id_maps_wait" is how long that took. Only then does it start the child that makes the
// cell's network namespace in parallel (net.h), and run an ordered list of small steps,
// each one timed (main.cc calls the functions below in this order):
//   mount_ns   make every mount private, so nothing propagates back to the host;
//   rootfs     tmpfs for the per-cell uppers, the snapshot layers the server sent attached,
//              overlay "/" on them and the skeleton, overlays on the system dirs (/usr),
//              synthesized /etc/{passwd,group,hosts,hostname};
//   binds      /workspace (an overlay over its layers, if any) and the spec's mounts
//              (ro/rw), all nosuid,nodev; then the writable layers kept reachable;
//   proc       a private /proc of the new pid namespace;
//   dev        tmpfs /dev with null zero full random urandom tty, devpts, /dev/shm;
//   tmpfs      /tmp and /run with their size limits;
//   hostname   sethostname in the new uts namespace;
//   pivot_root into the new root, old root detached, cwd /workspace;
//   net        join the network namespace the child made, `lo` up (the only interface),
//              and reap the child: it made the namespace while the steps above ran.
// Then ReceiveHandover waits for what the server made in parallel with the steps above (the
// cell's cgroup, the seccomp program; "cgroup_wait" is how long init waited), and
// EnterCellCgroup (a parked cell takes the hand-over before it parks, and builds its root
// from rootfs on when it is claimed: see the root order below):
//   cgroupns   with v1, init moves itself into the cgroup through the `tasks` fds of the
//              hand-over (with v2 it was born there); then unshare CLONE_NEWCGROUP so that
//              cgroup is "/" for every process of the cell;
//   harden     no longer dumpable (the sandbox user cannot read init's memory or fds).
// Mount steps happen before pivot_root because they need host paths (template, workspace);
// pivot_root comes after every mount so nothing of the host stays reachable. No process of
// the cell but init (and, until the net step, its namespace child running init's own code)
// exists before EnterCellCgroup returns.
//
// Built without exceptions; single-threaded; called once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell_spec.h"
#include "sandbox/linux/net.h"
#include "sandbox/linux/seccomp.h"

namespace mcpcell::sandbox {

// File descriptors cell init inherits from the server (Cell::Create puts them there).
inline constexpr int kInitSpecFd = 3;     // memfd holding EncodeCellSpec(spec)
inline constexpr int kInitControlFd = 4;  // the cell's end of the control socketpair
// Cell init's end of the server's sync socket. First comes the go byte (above), then the
// root order (below), then the hand-over. The hand-over arrives on it once the server
// has made the cell's cgroup (while init builds the filesystem): 'c', a uint32 (host order)
// count of seccomp instructions, that many sock_filter (0 when the spec disables seccomp),
// and attached to the first byte (SCM_RIGHTS) up to kMaxCgroupJoinFds fds of v1 `tasks`
// files for init to join. EOF means the server gave up.
inline constexpr int kInitSyncFd = 5;
inline constexpr size_t kMaxCgroupJoinFds = 8;
inline constexpr char kHandoverTag = 'c';
// Before the hand-over, as soon as it wrote the id maps, the server sends the root order on
// the same socket (init reads it after the mount_ns step):
//   'L', a uint32 count, and that many detached mount fds (idmap_mount.h) attached to the
//        first byte, in the order of spec.layers (0 without layers): build the root now.
//        The mounts are idmapped through the cell's user namespace, hence after the maps.
//   'P', a uint32 0: park (a warm pool's cell, which takes its layers when claimed). Init
//        joins its network namespace, takes the hand-over (the socket stays open), sends
//        Ready with no egress listener and waits for the claim:
//   'C', a uint32 0, and attached a sealed memfd of the claimed spec (the parked spec plus
//        its layers; nothing else may differ), then an 'L' order for those layers. Init
//        then builds the root, enters the cgroup and sends the final Ready, as unparked.
// Nothing of the cell runs while it is parked: init is its only process.
inline constexpr char kLayersTag = 'L';
inline constexpr char kParkTag = 'P';
inline constexpr char kClaimTag = 'C';
// Where cell init keeps O_PATH fds (CLOEXEC; init is not dumpable, so no process of the
// cell can reach them) for the server to reach the cell's writable state through
// /proc/<init pid>/fd/<n>: the scratch `layers` dir (root/upper, sys<i>/upper) and, with a
// workspace layer, the workspace's tmpfs (upper). See Cell::WritableLayers.
inline constexpr int kInitWritableLayersFd = 64;
inline constexpr int kInitWorkspaceLayerFd = 65;

// Records how long each step took, in order (sent to the server in Ready).
class StepTimer {
 public:
  StepTimer();
  // Ends the current step under `name` and starts the next one.
  void Mark(const char* name);
  std::vector<std::pair<std::string, uint64_t>>& steps() { return steps_; }

 private:
  uint64_t last_ns_;
  std::vector<std::pair<std::string, uint64_t>> steps_;
};

// Reads and decodes the spec from the memfd at `fd` (closes it).
Result<CellSpec> ReadSpecFromFd(int fd);

// What BuildCellRoot leaves for the control loop.
struct CellRoot {
  UniqueFd root_fd;  // O_PATH fd of "/" after pivot_root
};

// The mount_ns step: every mount private, so nothing propagates back to the host.
Status MakeCellMountsPrivate(StepTimer& timer);

// What the root order (above) asks for.
struct RootOrder {
  bool park = false;
  std::vector<UniqueFd> layer_mounts;  // 'L': one per spec.layers
};
Result<RootOrder> ReceiveRootOrder(const CellSpec& spec, StepTimer& timer);

// A parked cell's claim: the spec to build (the parked one with layers) and their mounts.
// Closes kInitSyncFd.
struct CellClaim {
  CellSpec spec;
  std::vector<UniqueFd> layer_mounts;
};
Result<CellClaim> ReceiveClaim(const CellSpec& parked);

// The steps from rootfs to pivot_root over `layer_mounts` (consumed); the error names the
// step ("rootfs: mount(\"overlay\", ...): ..."). The scratch tmpfs is mounted on
// <state_dir>/mnt (see state_dir.h), the new root inside it.
Result<CellRoot> BuildCellRoot(const CellSpec& spec, std::vector<UniqueFd>& layer_mounts,
                               StepTimer& timer);

// The net step: join the namespace the child made, `lo` up, reap the child.
Status JoinCellNetwork(LoopbackNamespaceChild& net, StepTimer& timer);

// What the server hands over (above).
struct ServerHandover {
  std::vector<UniqueFd> cgroup_join_fds;  // v1; empty with v2 or without a cgroup
  SeccompProgram seccomp;                 // compiled by the server; empty: seccomp disabled
};

// Waits for the hand-over on kInitSyncFd (closes it unless `keep_sync_open`: a parked cell
// waits there for its claim). Checks the framing and sizes; the server is trusted, but a
// truncated or oversized message is an error, not a filter.
Result<ServerHandover> ReceiveHandover(StepTimer& timer, bool keep_sync_open = false);

// cgroupns and harden (above): call after BuildCellRoot, before anything of the cell runs.
// Consumes the hand-over's cgroup fds.
Status EnterCellCgroup(ServerHandover& handover, StepTimer& timer);

}  // namespace mcpcell::sandbox
