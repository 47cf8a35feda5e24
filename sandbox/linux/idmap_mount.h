// Idmapped, read-only, detached mounts of snapshot layers (CellSpec::layers), and their
// attachment inside a cell.
//
// A layer directory stores files with canonical ownership (on disk, the id a file has
// inside a cell). The server (host root) clones the directory into a detached mount
// (open_tree), makes it read-only, nosuid, nodev and idmapped through the cell's user
// namespace (mount_setattr MOUNT_ATTR_IDMAP): an on-disk uid k then reads as the cell's
// host uid base + k, which is uid k inside the cell. No file is copied or chowned, and the
// directory is never written (the mount is read-only and only overlayfs lowers use it).
// The mount fd goes to cell init in the launch hand-over; init attaches it in its own mount
// namespace (move_mount) and names it in an overlay's lowerdir.
//
// Kernel: idmapped mounts of ext4, xfs and btrfs since 5.12, of tmpfs since 6.3; overlayfs
// over idmapped lowers since 5.19. Needs CAP_SYS_ADMIN in the initial user namespace (a
// root server). OpenIdmappedLayer runs on the server (any thread); AttachMount in cell init.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::sandbox {

// An fd of the user namespace of process `pid` (/proc/<pid>/ns/user), O_CLOEXEC.
Result<UniqueFd> OpenUserNamespace(pid_t pid);

// A detached, read-only, nosuid, nodev mount of `dir` (recursive) whose ids are mapped
// through `userns_fd`. The error names the call and the directory.
Result<UniqueFd> OpenIdmappedLayer(const std::string& dir, int userns_fd);

// Attaches the detached mount `mount_fd` at `target` (an existing directory) in the
// caller's mount namespace.
Status AttachMount(int mount_fd, const std::string& target);

}  // namespace mcpcell::sandbox
