// User namespace id maps and per-cell host id ranges (see user.h).
#include "sandbox/linux/user.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace mcpcell::sandbox {
namespace {

Status WriteProcFile(pid_t pid, const char* name, const std::string& content) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys("open(\"" + path + "\")");
  ssize_t n = ::write(fd, content.data(), content.size());
  int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(content.size())) {
    return Error::Sys("write(\"" + path + "\", \"" + content.substr(0, content.size() - 1) + "\")",
                      n < 0 ? saved : EIO);
  }
  return Ok();
}

std::string MapLine(const IdMapLine& l) {
  return std::to_string(l.inside) + " " + std::to_string(l.outside) + " " +
         std::to_string(l.count) + "\n";
}

std::string SlotPath(const std::string& dir, int slot) { return dir + "/" + std::to_string(slot); }

}  // namespace

Status WriteIdMaps(pid_t pid, const IdMapLine& uid, const IdMapLine& gid, bool deny_setgroups) {
  // Order matters: setgroups must be denied before an unprivileged gid_map write.
  if (deny_setgroups) {
    if (Status s = WriteProcFile(pid, "setgroups", "deny\n"); !s) return s;
  }
  if (Status s = WriteProcFile(pid, "uid_map", MapLine(uid)); !s) return s;
  return WriteProcFile(pid, "gid_map", MapLine(gid));
}

Result<int> ClaimIdRangeSlot(const std::string& dir, const std::string& owner) {
  // The owner is the claim's symlink target: a short one lives in the inode, never a
  // path (the reaper compares it to the names in cells/).
  if (owner.empty() || owner.size() > kMaxIdRangeOwner || owner.find('/') != std::string::npos ||
      owner.find('\0') != std::string::npos) {
    return Error::Msg("id range claim: owner \"" + owner + "\" is not a cell id of 1-" +
                      std::to_string(kMaxIdRangeOwner) + " characters without '/'");
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error::Sys("mkdir(\"" + dir + "\")");
  }
  for (int slot = 0; slot < kMaxIdRangeSlots; ++slot) {
    std::string path = SlotPath(dir, slot);
    // symlink(2) fails with EEXIST on a taken slot (atomic between concurrent Create calls
    // and servers) and creates the claim with its owner in one step: no empty claim is
    // ever visible, and no data block is allocated (or discarded when released).
    if (::symlink(owner.c_str(), path.c_str()) == 0) return slot;
    if (errno != EEXIST) return Error::Sys("symlink(\"" + owner + "\", \"" + path + "\")");
  }
  return Error::Msg("no free uid/gid range: all " + std::to_string(kMaxIdRangeSlots) +
                    " slots in " + dir + " are claimed");
}

Status ReleaseIdRangeSlot(const std::string& dir, int slot) {
  if (slot < 0) return Ok();
  std::string path = SlotPath(dir, slot);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Error::Sys("unlink(\"" + path + "\")");
  return Ok();
}

std::string ReadIdRangeClaim(int dir_fd, const char* name) {
  char buf[kMaxIdRangeOwner + 1];
  ssize_t n = ::readlinkat(dir_fd, name, buf, sizeof buf);
  if (n < 0 && errno == EINVAL) {
    // Not a symlink: a claim file of an earlier version, the owner as its content.
    int fd = ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return "";
    n = ::read(fd, buf, sizeof buf);
    ::close(fd);
  }
  if (n <= 0 || n > static_cast<ssize_t>(kMaxIdRangeOwner)) return "";
  return std::string(buf, static_cast<size_t>(n));
}

int FindIdRangeSlot(const std::string& dir, const std::string& owner) {
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return -1;
  int found = -1;
  for (int slot = 0; slot < kMaxIdRangeSlots && found < 0; ++slot) {
    if (ReadIdRangeClaim(dir_fd, std::to_string(slot).c_str()) == owner) found = slot;
  }
  ::close(dir_fd);
  return found;
}

// Not instrumented: it runs in the launch's CLONE_VM child (see MCPCELL_CHILD in
// cell_launch.cc for why).
__attribute__((no_sanitize("address", "undefined"))) int KeepCapabilitiesAcrossExec() {
  // Ambient needs each cap in permitted and inheritable; the child has the full set of its
  // new namespace in permitted. syscall(), not the libc wrappers a sanitizer intercepts;
  // the errno it sets is the server thread's, which sleeps until the child is gone.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return -errno;
  for (auto& d : data) d.inheritable = d.permitted;
  if (syscall(SYS_capset, &header, data) != 0) return -errno;
  for (long cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0L, 0L) != 0 &&
        errno != EINVAL) {
      return -errno;
    }
  }
  return 0;
}

Status BecomeNamespaceRoot() {
  // Root inside: init keeps the full capability set of uid 0 in its own namespace.
  if (syscall(SYS_setgroups, 0, nullptr) != 0) return Error::Sys("setgroups(0, {})");
  if (syscall(SYS_setresgid, 0, 0, 0) != 0) return Error::Sys("setresgid(0, 0, 0)");
  if (syscall(SYS_setresuid, 0, 0, 0) != 0) return Error::Sys("setresuid(0, 0, 0)");
  return Ok();
}

}  // namespace mcpcell::sandbox
