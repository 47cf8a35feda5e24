// Mount primitives used by cell init while it builds the cell's filesystem: each one is a
// single mount(2)/umount2(2)/pivot_root(2) whose error names the call and its arguments.
//
// Every mount a cell gets is nosuid and nodev (device nodes in /dev are binds of the host's
// nodes on a mount without nodev, see devices.h); binds are remounted so the flags, and
// read-only where asked, really apply (a bind ignores flags on its first mount).
//
// Called by cell init only, inside its own mount namespace, single-threaded; no exceptions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace mcpcell::sandbox {

// mount(2) with an error like `mount("overlay", "/x/root", "overlay", 0x6): EPERM (...)`.
Status Mount(const std::string& source, const std::string& target, const char* fstype,
             unsigned long flags, const std::string& data = "");

// Recursively marks every mount private, so nothing the cell mounts propagates to the host
// and nothing the host mounts later appears in the cell.
Status MakeMountsPrivate();

// Bind-mounts `source` (directory or file) at `target` with nosuid,nodev (+noexec when
// asked) and read-only unless `writable`. `recursive` also binds submounts.
Status BindMount(const std::string& source, const std::string& target, bool writable,
                 bool noexec = false, bool recursive = false);

// tmpfs at `target` with a size limit (bytes), mode, and nosuid,nodev plus `extra_flags`.
Status MountTmpfs(const std::string& target, uint64_t size_bytes, mode_t mode,
                  unsigned long extra_flags = 0);

// A private procfs of the caller's pid namespace, nosuid,nodev,noexec.
Status MountProc(const std::string& target);

// pivot_root(new_root, new_root) with the old root then lazily detached (MNT_DETACH), so
// nothing of the host's tree stays reachable; cwd becomes "/".
Status PivotRoot(const std::string& new_root);

// mkdir -p with `mode`; an existing directory is fine.
Status MakeDirs(const std::string& path, mode_t mode);
// Creates an empty regular file if missing (a bind-mount target for a file).
Status MakeEmptyFile(const std::string& path, mode_t mode);
// Writes `content` to `path` (created or truncated) with `mode`.
Status WriteWholeFile(const std::string& path, const std::string& content, mode_t mode);

}  // namespace mcpcell::sandbox
