// The cell's minimal /dev: null, zero, full, random, urandom and tty, a private devpts
// instance (its own ptys, invisible to the host's and other cells'), /dev/shm as a
// size-limited tmpfs private to the cell, and the fd/stdin/stdout/stderr symlinks. Nothing
// else: no block devices, no /dev/mem, no kmsg.
//
// Device nodes cannot be created in a user namespace (mknod needs CAP_MKNOD in the initial
// namespace, and a filesystem mounted inside one is nodev), so cell init binds the six
// nodes from a host directory. Where the server may mknod (root in the initial user
// namespace, on a filesystem that allows device nodes), MakeCellDeviceNodes makes nodes for
// each cell in its own cell dir, so locks on them (flock, fcntl) and their inodes are the
// cell's alone. Elsewhere (desktop mode, a nodev state dir) the
// cell binds the host's /dev nodes, which every cell and the host then share, and the cell
// reports that in its warnings. The binds are the only mounts of a cell without nodev; the
// /dev tmpfs is remounted read-only once populated.
//
// MakeCellDeviceNodes runs in the server (any thread); MountMinimalDev in cell init before
// pivot_root (single-threaded). No exceptions.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace mcpcell::sandbox {

// The device nodes a cell gets, by name under /dev.
inline constexpr const char* kCellDeviceNodes[] = {"null",   "zero",    "full",
                                                   "random", "urandom", "tty"};

// Makes `dir` (mode 0711) holding a fresh node per kCellDeviceNodes entry with the type,
// major:minor, owner and mode of the host's /dev/<name>, and checks that they open (a
// filesystem mounted nodev would make them unopenable). On error nothing is left behind
// and the message says why ("... nodev ...", "mknod(...): EPERM ..."); the caller then
// falls back to the host's nodes.
Status MakeCellDeviceNodes(const std::string& dir);
// Removes what MakeCellDeviceNodes made (a cell's dir goes whole with RemoveCellDir).
Status RemoveCellDeviceNodes(const std::string& dir);

// Why this process cannot give cells their own device nodes ("" when it can try): not root
// in the initial user namespace, or without CAP_MKNOD.
std::string DeviceNodesUnavailableReason();

// Builds the cell's /dev at `dev_dir`, binding the nodes from `nodes_dir` (a directory
// MakeCellDeviceNodes made, or "/dev" for the host's own; each must be a character device).
Status MountMinimalDev(const std::string& dev_dir, const std::string& nodes_dir,
                       uint64_t shm_bytes);

}  // namespace mcpcell::sandbox
