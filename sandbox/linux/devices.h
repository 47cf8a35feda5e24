// The cell's minimal /dev: null, zero, full, random, urandom and tty bound from the host,
// a private devpts instance (its own ptys, invisible to the host's and other cells'),
// /dev/shm as a size-limited tmpfs private to the cell, and the fd/stdin/stdout/stderr
// symlinks. Nothing else: no block devices, no /dev/mem, no kmsg.
//
// Device nodes cannot be created in a user namespace (mknod needs CAP_MKNOD in the initial
// namespace), so the six nodes are bind mounts of the host's; those binds are the only
// mounts of a cell without nodev. The /dev tmpfs is remounted read-only once populated.
//
// Called by cell init before pivot_root; single-threaded; no exceptions.
#pragma once

#include <cstdint>
#include <string>

#include "sandbox/status.h"

namespace mcpcell::sandbox {

Status MountMinimalDev(const std::string& dev_dir, uint64_t shm_bytes);

}  // namespace mcpcell::sandbox
