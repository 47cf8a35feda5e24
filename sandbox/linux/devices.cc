// The cell's minimal /dev (see devices.h).
#include "sandbox/linux/devices.h"

#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/linux/mounts.h"

namespace mcpcell::sandbox {
namespace {

constexpr const char* kDeviceNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
constexpr uint64_t kDevTmpfsBytes = 64 * 1024;

Status BindDeviceNode(const std::string& host_node, const std::string& target) {
  if (Status s = MakeEmptyFile(target, 0666); !s) return s;
  if (Status s = Mount(host_node, target, nullptr, MS_BIND); !s) return s;
  // nosuid,noexec but not nodev: these are the only nodes of the cell and must open.
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC;
  struct statvfs st;
  if (::statvfs(target.c_str(), &st) == 0) {
    if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  }
  return Mount("", target, nullptr, flags);
}

Status Symlink(const char* target, const std::string& link) {
  if (::symlink(target, link.c_str()) != 0 && errno != EEXIST) {
    return Error::Sys("symlink(\"" + std::string(target) + "\", \"" + link + "\")");
  }
  return Ok();
}

}  // namespace

Status MountMinimalDev(const std::string& dev_dir, uint64_t shm_bytes) {
  if (Status s = MountTmpfs(dev_dir, kDevTmpfsBytes, 0755, MS_NOEXEC); !s) return s;
  for (const char* node : kDeviceNodes) {
    Status s = BindDeviceNode(std::string("/dev/") + node, dev_dir + "/" + node);
    if (!s) return s;
  }
  // A new devpts instance: ptys opened in the cell are numbered and visible only here.
  if (Status s = MakeDirs(dev_dir + "/pts", 0755); !s) return s;
  if (Status s = Mount("devpts", dev_dir + "/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                       "newinstance,ptmxmode=0666,mode=0620");
      !s) {
    return s;
  }
  if (Status s = Symlink("pts/ptmx", dev_dir + "/ptmx"); !s) return s;
  if (Status s = MakeDirs(dev_dir + "/shm", 0755); !s) return s;
  if (Status s = MountTmpfs(dev_dir + "/shm", shm_bytes, 01777, MS_NOEXEC); !s) return s;
  if (Status s = Symlink("/proc/self/fd", dev_dir + "/fd"); !s) return s;
  if (Status s = Symlink("/proc/self/fd/0", dev_dir + "/stdin"); !s) return s;
  if (Status s = Symlink("/proc/self/fd/1", dev_dir + "/stdout"); !s) return s;
  if (Status s = Symlink("/proc/self/fd/2", dev_dir + "/stderr"); !s) return s;
  // Populated: nobody in the cell creates device-like files here any more.
  return Mount("", dev_dir, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

}  // namespace mcpcell::sandbox
