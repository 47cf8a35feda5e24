// Idmapped layer mounts (see idmap_mount.h).
#include "sandbox/linux/idmap_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace mcpcell::sandbox {
namespace {

// The new mount API through syscall(2): glibc's wrappers and <linux/mount.h> vary between
// the releases we build on; the numbers and the structure are stable kernel ABI.
struct MountAttrV0 {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};
constexpr unsigned kOpenTreeClone = 1;            // OPEN_TREE_CLONE
constexpr unsigned kOpenTreeCloexec = O_CLOEXEC;  // OPEN_TREE_CLOEXEC
constexpr unsigned kAtRecursive = 0x8000;         // AT_RECURSIVE
constexpr unsigned kMoveMountFEmptyPath = 0x4;    // MOVE_MOUNT_F_EMPTY_PATH
constexpr uint64_t kAttrRdonly = 0x1, kAttrNosuid = 0x2, kAttrNodev = 0x4, kAttrIdmap = 0x100000;

}  // namespace

Result<UniqueFd> OpenUserNamespace(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  return fd;
}

Result<UniqueFd> OpenIdmappedLayer(const std::string& dir, int userns_fd) {
  const long tree = ::syscall(SYS_open_tree, AT_FDCWD, dir.c_str(),
                              kOpenTreeClone | kOpenTreeCloexec | kAtRecursive);
  if (tree < 0) {
    return Error::Sys("open_tree(\"" + dir + "\", OPEN_TREE_CLONE|AT_RECURSIVE)");
  }
  UniqueFd mount(static_cast<int>(tree));
  MountAttrV0 attr{};
  attr.attr_set = kAttrIdmap | kAttrRdonly | kAttrNosuid | kAttrNodev;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (::syscall(SYS_mount_setattr, mount.get(), "", AT_EMPTY_PATH | kAtRecursive, &attr,
                sizeof attr) != 0) {
    Error err = Error::Sys("mount_setattr(\"" + dir + "\", MOUNT_ATTR_IDMAP|MOUNT_ATTR_RDONLY)");
    if (err.err == EINVAL) {
      err.message += "; the layer's filesystem may not support idmapped mounts on this kernel";
    }
    return err;
  }
  return mount;
}

Status AttachMount(int mount_fd, const std::string& target) {
  if (::syscall(SYS_move_mount, mount_fd, "", AT_FDCWD, target.c_str(), kMoveMountFEmptyPath) !=
      0) {
    return Error::Sys("move_mount(layer fd " + std::to_string(mount_fd) + ", \"" + target + "\")");
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
