// Mount primitives for cell init (see mounts.h).
#include "sandbox/linux/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace mcpcell::sandbox {
namespace {

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string Hex(unsigned long v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%lx", v);
  return buf;
}

// Flags of the mount at `path` that a remount inside a user namespace must keep (the
// kernel locks them when the mount came from a more privileged namespace).
unsigned long LockedFlags(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  unsigned long flags = 0;
  if (st.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

}  // namespace

Status Mount(const std::string& source, const std::string& target, const char* fstype,
             unsigned long flags, const std::string& data) {
  if (::mount(source.empty() ? nullptr : source.c_str(), target.c_str(), fstype, flags,
              data.empty() ? nullptr : data.c_str()) != 0) {
    std::string what = "mount(" + Quote(source) + ", " + Quote(target) + ", " +
                       (fstype ? Quote(fstype) : std::string("NULL")) + ", " + Hex(flags);
    if (!data.empty()) what += ", " + Quote(data);
    return Error::Sys(what + ")");
  }
  return Ok();
}

Status MakeMountsPrivate() { return Mount("", "/", nullptr, MS_REC | MS_PRIVATE); }

Status BindMount(const std::string& source, const std::string& target, bool writable, bool noexec,
                 bool recursive) {
  unsigned long bind = MS_BIND | (recursive ? MS_REC : 0);
  if (Status s = Mount(source, target, nullptr, bind); !s) return s;
  // The first bind ignores the other flags; the remount applies them. Locked flags of the
  // source mount (e.g. ro from the host) are kept because we only ever add restrictions.
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | LockedFlags(target);
  if (!writable) flags |= MS_RDONLY;
  if (noexec) flags |= MS_NOEXEC;
  return Mount("", target, nullptr, flags);
}

Status MountTmpfs(const std::string& target, uint64_t size_bytes, mode_t mode,
                  unsigned long extra_flags) {
  char data[64];
  std::snprintf(data, sizeof data, "size=%llu,mode=%o", static_cast<unsigned long long>(size_bytes),
                static_cast<unsigned>(mode));
  return Mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | extra_flags, data);
}

Status MountProc(const std::string& target) {
  return Mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

Status PivotRoot(const std::string& new_root) {
  if (::chdir(new_root.c_str()) != 0) return Error::Sys("chdir(" + Quote(new_root) + ")");
  // pivot_root(".", ".") stacks the old root on top of the new one at "/", so no put_old
  // directory is needed inside the cell; the umount below then removes it.
  if (syscall(SYS_pivot_root, ".", ".") != 0) {
    return Error::Sys("pivot_root(" + Quote(new_root) + ", " + Quote(new_root) + ")");
  }
  if (::umount2(".", MNT_DETACH) != 0) return Error::Sys("umount2(old root, MNT_DETACH)");
  if (::chdir("/") != 0) return Error::Sys("chdir(\"/\")");
  return Ok();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  // The leaf first: its parents nearly always exist already (cell setup makes ~15 dirs
  // under a few deep parents), so one mkdir instead of one per path component.
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return Ok();
  if (errno != ENOENT) return Error::Sys("mkdir(" + Quote(path) + ")");
  const size_t slash = path.find_last_not_of('/') == std::string::npos
                           ? std::string::npos
                           : path.rfind('/', path.find_last_not_of('/'));
  if (slash == std::string::npos || slash == 0) return Error::Sys("mkdir(" + Quote(path) + ")");
  if (Status s = MakeDirs(path.substr(0, slash), mode); !s) return s;
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Error::Sys("mkdir(" + Quote(path) + ")");
  }
  return Ok();
}

Status MakeEmptyFile(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Error::Sys("open(" + Quote(path) + ", O_CREAT)");
  ::close(fd);
  return Ok();
}

Status WriteWholeFile(const std::string& path, const std::string& content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Error::Sys("open(" + Quote(path) + ", O_CREAT|O_TRUNC)");
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = n < 0 ? errno : EIO;
      ::close(fd);
      return Error::Sys("write(" + Quote(path) + ")", saved);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return Error::Sys("close(" + Quote(path) + ")");
  return Ok();
}

}  // namespace mcpcell::sandbox
