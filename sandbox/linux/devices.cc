// The cell's minimal /dev (see devices.h).
#include "sandbox/linux/devices.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "sandbox/linux/mounts.h"

namespace mcpcell::sandbox {
namespace {

constexpr uint64_t kDevTmpfsBytes = 64 * 1024;
constexpr int kCapMknod = 27;                              // linux/capability.h CAP_MKNOD
constexpr ino_t kInitialUserNamespaceInode = 0xEFFFFFFDU;  // PROC_USER_INIT_INO

std::string DeviceName(const struct stat& st) {
  return std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
}

// The host's /dev/<name>, which a cell's node copies (type, major:minor, owner, mode).
Status StatHostNode(const char* name, struct stat& st) {
  const std::string host = std::string("/dev/") + name;
  if (::stat(host.c_str(), &st) != 0) return Error::Sys("stat(\"" + host + "\")");
  if (!S_ISCHR(st.st_mode)) return Error::Msg(host + " is not a character device");
  return Ok();
}

mode_t NodeMode(const struct stat& host) {
  return host.st_mode & 07777 & ~static_cast<mode_t>(S_ISUID | S_ISGID | S_ISVTX);
}

// One node: a copy of the host's /dev/<name> (character device, owner, mode).
Status MakeNode(const std::string& dir, const char* name) {
  const std::string path = dir + "/" + name;
  struct stat st;
  if (Status s = StatHostNode(name, st); !s) return s;
  const mode_t mode = NodeMode(st);
  if (::mknod(path.c_str(), S_IFCHR | 0600, st.st_rdev) != 0) {
    return Error::Sys("mknod(\"" + path + "\", S_IFCHR, " + DeviceName(st) + ")");
  }
  // Owner first: chown would clear set-id bits, and the mode is set whole afterwards (no
  // umask in it).
  if (::lchown(path.c_str(), st.st_uid, st.st_gid) != 0) {
    return Error::Sys("chown(\"" + path + "\", " + std::to_string(st.st_uid) + ", " +
                      std::to_string(st.st_gid) + ")");
  }
  if (::chmod(path.c_str(), mode) != 0) return Error::Sys("chmod(\"" + path + "\")");
  return Ok();
}

// A node that cannot be opened is worse than a shared one: /dev/null must work.
Status CheckNodesOpen(const std::string& dir) {
  const std::string path = dir + "/null";
  int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return Ok();
  }
  const int err = errno;
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NODEV) != 0) {
    return Error::Msg(dir + " is on a filesystem mounted nodev, where device nodes do not open");
  }
  return Error::Sys("open(\"" + path + "\")", err);
}

Status BindDeviceNode(const std::string& source, const std::string& target) {
  struct stat st;
  if (::lstat(source.c_str(), &st) != 0) return Error::Sys("lstat(\"" + source + "\")");
  if (!S_ISCHR(st.st_mode)) return Error::Msg(source + " is not a character device");
  if (Status s = MakeEmptyFile(target, 0666); !s) return s;
  if (Status s = Mount(source, target, nullptr, MS_BIND); !s) return s;
  // nosuid,noexec but not nodev: these are the only nodes of the cell and must open. The
  // source mount's locked flags (atime, read-only) must be kept or the remount is EPERM.
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC;
  struct statvfs vfs;
  if (::statvfs(target.c_str(), &vfs) == 0) {
    if (vfs.f_flag & ST_RDONLY) flags |= MS_RDONLY;
    if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  }
  return Mount("", target, nullptr, flags);
}

Status Symlink(const char* target, const std::string& link) {
  if (::symlink(target, link.c_str()) != 0 && errno != EEXIST) {
    return Error::Sys("symlink(\"" + std::string(target) + "\", \"" + link + "\")");
  }
  return Ok();
}

bool HasEffectiveCapability(int cap) {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return false;
  char line[256];
  unsigned long long eff = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "CapEff: %llx", &eff) == 1) {
      found = true;
      break;
    }
  }
  std::fclose(f);
  return found && (eff >> cap) & 1;
}

}  // namespace

std::string DeviceNodesUnavailableReason() {
  if (::geteuid() != 0) {
    return "the server is not root (mknod needs CAP_MKNOD in the initial user namespace)";
  }
  struct stat ns;
  if (::stat("/proc/self/ns/user", &ns) == 0 && ns.st_ino != kInitialUserNamespaceInode) {
    return "the server runs in a user namespace, where mknod is not allowed";
  }
  if (!HasEffectiveCapability(kCapMknod)) return "the server lacks CAP_MKNOD";
  return "";
}

Status MakeCellDeviceNodes(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0711) != 0) return Error::Sys("mkdir(\"" + dir + "\")");
  Status made = Ok();
  for (const char* node : kCellDeviceNodes) {
    made = MakeNode(dir, node);
    if (!made) break;
  }
  if (made) made = CheckNodesOpen(dir);
  if (!made) (void)RemoveCellDeviceNodes(dir);
  return made;
}

Status RemoveCellDeviceNodes(const std::string& dir) {
  for (const char* node : kCellDeviceNodes) {
    const std::string path = dir + "/" + node;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Error::Sys("unlink(\"" + path + "\")");
    }
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return Error::Sys("rmdir(\"" + dir + "\")");
  return Ok();
}

Status MountMinimalDev(const std::string& dev_dir, const std::string& nodes_dir,
                       uint64_t shm_bytes) {
  if (Status s = MountTmpfs(dev_dir, kDevTmpfsBytes, 0755, MS_NOEXEC); !s) return s;
  for (const char* node : kCellDeviceNodes) {
    Status s = BindDeviceNode(nodes_dir + "/" + node, dev_dir + "/" + node);
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
