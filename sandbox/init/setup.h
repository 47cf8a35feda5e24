// The in-namespace half of cell creation, run by cell init (pid 1 of the cell) right after
// it was exec'd and before it serves the control socket.
//
// The server's child has already entered new user, mount, pid, net, ipc and uts namespaces,
// been put into the cell's cgroup and received its uid/gid maps (sandbox/cell.cc). Init
// then runs SetupCell, an ordered list of small steps, each one timed:
//   mount_ns   make every mount private, so nothing propagates back to the host;
//   rootfs     tmpfs for the per-cell uppers, overlay "/" on the skeleton, overlays on the
//              system dirs (/usr), synthesized /etc/{passwd,group,hosts,hostname};
//   binds      /workspace and the spec's mounts (ro/rw), all nosuid,nodev;
//   proc       a private /proc of the new pid namespace;
//   dev        tmpfs /dev with null zero full random urandom tty, devpts, /dev/shm;
//   tmpfs      /tmp and /run with their size limits;
//   hostname   sethostname in the new uts namespace;
//   net        `lo` up in the new network namespace (the only interface);
//   pivot_root into the new root, old root detached, cwd /workspace;
//   cgroupns   wait for the server's 'c' (cell init is in the cell's cgroup; the server
//              attaches it in parallel with the steps above), then unshare
//              CLONE_NEWCGROUP so that cgroup is "/" for every process of the cell;
//   harden     no longer dumpable (the sandbox user cannot read init's memory or fds).
// Mount steps happen before pivot_root because they need host paths (template, workspace);
// pivot_root comes after every mount so nothing of the host stays reachable.
//
// Built without exceptions; single-threaded; called once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/cell_spec.h"
#include "sandbox/control/unique_fd.h"
#include "sandbox/status.h"

namespace mcpcell::sandbox {

// File descriptors cell init inherits from the server (Cell::Create puts them there).
inline constexpr int kInitSpecFd = 3;     // memfd holding EncodeCellSpec(spec)
inline constexpr int kInitControlFd = 4;  // the cell's end of the control socketpair
// Cell init's end of the server's sync socket: 'c' arrives once the server has put cell init in the
// cell's cgroup (it does that while init builds the filesystem); EOF means it gave up.
inline constexpr int kInitSyncFd = 5;

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

// What SetupCell leaves for the control loop.
struct CellRoot {
  UniqueFd root_fd;  // O_PATH fd of "/" after pivot_root
};

// Runs every step above; the error names the step ("rootfs: mount(\"overlay\", ...): ...").
// The scratch tmpfs is mounted on <state_dir>/mnt (see state_dir.h), the new root inside it.
Result<CellRoot> SetupCell(const CellSpec& spec, StepTimer& timer);

}  // namespace mcpcell::sandbox
