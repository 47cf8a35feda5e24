// The server's state dir layout (see state_dir.h).
#include "sandbox/state_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace mcpcell::sandbox {
namespace {

constexpr const char* kOwnerRecord = "owner";
constexpr const char* kInitRecord = "init";

// Every record is this many bytes, the text padded with spaces and ended by a newline, and
// is written over in place: a rewrite never changes the file's size.
constexpr size_t kRecordBytes = 64;

// Writes `text` (shorter than kRecordBytes) as the record `name` in `dir_fd`, created if
// missing; "" blanks it. Returns the error of the step that failed.
Status WriteRecordAt(int dir_fd, const char* name, const std::string& text) {
  if (text.size() >= kRecordBytes) {
    return Error::Msg(std::string("record ") + name + ": \"" + text + "\" too long");
  }
  char record[kRecordBytes];
  std::memset(record, ' ', sizeof record);
  std::memcpy(record, text.data(), text.size());
  record[kRecordBytes - 1] = '\n';
  int fd = ::openat(dir_fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Error::Sys(std::string("open(record \"") + name + "\")");
  Status result;
  struct stat st;
  if (::pwrite(fd, record, sizeof record, 0) != static_cast<ssize_t>(sizeof record)) {
    result = Error::Sys(std::string("write(record \"") + name + "\")");
  } else if (::fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(kRecordBytes) &&
             ::ftruncate(fd, kRecordBytes) != 0) {
    // Longer than a record: not written by this version; cut so no old text follows.
    result = Error::Sys(std::string("ftruncate(record \"") + name + "\")");
  }
  ::close(fd);
  return result;
}

Status WriteRecord(const std::string& cell_dir, const char* name, const std::string& text) {
  int dir_fd = ::open(cell_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Error::Sys("open(\"" + cell_dir + "\")");
  Status s = WriteRecordAt(dir_fd, name, text);
  ::close(dir_fd);
  if (!s) return s.error().Wrap(cell_dir);
  return Ok();
}

Status MakeTraversable(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST)
    return Error::Sys("mkdir(\"" + dir + "\")");
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Error::Sys("lstat(\"" + dir + "\")");
  if (!S_ISDIR(st.st_mode)) return Error::Msg(dir + ": not a directory (or a symlink)");
  // The state dir holds the template every cell runs and every cell's files: a directory
  // another user owns or may write (say a /tmp/mcpcell-<uid> made by someone else first)
  // would let them read sessions and plant code in later cells.
  if (st.st_uid != ::geteuid()) {
    return Error::Msg(dir + ": owned by uid " + std::to_string(st.st_uid) +
                      ", not by this server (uid " + std::to_string(::geteuid()) +
                      "); refusing to use it");
  }
  if ((st.st_mode & 0022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return Error::Msg(dir + ": writable by group or others (mode " + mode +
                      "); refusing to use it");
  }
  if ((st.st_mode & 0001) == 0 && ::chmod(dir.c_str(), (st.st_mode & 07777) | 0011) != 0) {
    return Error::Sys("chmod(\"" + dir + "\", o+x)");
  }
  return Ok();
}

// Removes `name` in `dir_fd`; for directories, first opens it (fixing its mode if needed).
Status RemoveAt(int dir_fd, const std::string& name, const std::string& path) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return Ok();
  if (errno != EISDIR) return Error::Sys("unlink(\"" + path + "\")");
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) {
    ::fchmodat(dir_fd, name.c_str(), 0700, 0);
    fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) return Error::Sys("open(\"" + path + "\")");
  ::fchmod(fd, 0700);  // the sandbox may have left it 0500
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return Error::Sys("fdopendir(\"" + path + "\")");
  }
  Status result;
  while (struct dirent* e = ::readdir(d)) {
    std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    result = RemoveAt(::dirfd(d), child, path + "/" + child);
    if (!result) break;
  }
  ::closedir(d);
  if (!result) return result;
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Error::Sys("rmdir(\"" + path + "\")");
  }
  return Ok();
}

}  // namespace

std::string DefaultStateDir() {
  if (const char* dir = std::getenv("MCPCELL_STATE_DIR"); dir && *dir) return dir;
  if (::geteuid() == 0) return "/run/mcpcell";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    return std::string(xdg) + "/mcpcell";
  }
  return "/tmp/mcpcell-" + std::to_string(::geteuid());
}

Status EnsureStateDir(const std::string& state_dir) {
  if (Status s = MakeTraversable(state_dir); !s) return s;
  if (Status s = MakeTraversable(state_dir + "/mnt"); !s) return s;
  return MakeTraversable(state_dir + "/cells");
}

bool CellsRunAsOtherUids() { return ::geteuid() == 0; }

Status CheckCellsCanReachStateDir(const std::string& state_dir) {
  if (!CellsRunAsOtherUids()) return Ok();
  return CheckSearchableByOthers(state_dir);
}

Status CheckSearchableByOthers(const std::string& dir) {
  char* real = ::realpath(dir.c_str(), nullptr);
  if (real == nullptr) return Error::Sys("realpath(\"" + dir + "\")");
  const std::string resolved = real;
  std::free(real);
  // The directories the kernel walks for `dir` as written and, when a symlink leads
  // elsewhere, those of its target; "/" first, so the error names the topmost culprit.
  std::vector<std::string> walk = {"/"};
  for (const std::string& path : {dir, resolved}) {
    for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
      std::string prefix = path.substr(0, slash);
      if (!prefix.empty() && prefix.back() != '/' &&
          std::find(walk.begin(), walk.end(), prefix) == walk.end()) {
        walk.push_back(prefix);
      }
      if (slash == std::string::npos) break;
    }
  }
  for (const std::string& ancestor : walk) {
    struct stat st;
    if (::stat(ancestor.c_str(), &st) != 0) return Error::Sys("stat(\"" + ancestor + "\")");
    if ((st.st_mode & S_IXOTH) != 0) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    std::string owner = st.st_uid == 0 ? "root" : "uid " + std::to_string(st.st_uid);
    return Error::Msg(ancestor + " (mode " + mode + ", owner " + owner +
                      ") cannot be searched by the cells' uids (a root server runs each cell "
                      "as host uids of its own): chmod o+x " +
                      ancestor + ", or choose another --state-dir");
  }
  return Ok();
}

Status RemoveCellDir(const std::string& dir) {
  size_t slash = dir.rfind('/');
  if (slash == std::string::npos || slash + 1 == dir.size()) {
    return Error::Msg("RemoveCellDir: \"" + dir + "\" is not a path to a directory");
  }
  std::string parent = slash == 0 ? "/" : dir.substr(0, slash);
  int parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0) {
    return errno == ENOENT ? Ok() : Error::Sys("open(\"" + parent + "\")");
  }
  Status s = RemoveAt(parent_fd, dir.substr(slash + 1), dir);
  ::close(parent_fd);
  return s;
}

std::string ProcStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "";
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return "";
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (rest >> field); ++i) {
    if (i == 22) return field;
  }
  return "";
}

Status WriteInitRecord(const std::string& cell_dir, pid_t pid) {
  std::string start = ProcStartTime(pid);
  if (start.empty()) return Error::Msg("cell init (pid " + std::to_string(pid) + ") vanished");
  return WriteRecord(cell_dir, kInitRecord, std::to_string(pid) + " " + start);
}

Status WriteOwnerRecord(const std::string& cell_dir) {
  // Read once per thread and process (a fork has another pid): the start time never
  // changes, and the kernel sums every thread of a busy server to answer /proc/<pid>/stat.
  thread_local pid_t cached_pid = 0;
  thread_local std::string record;
  const pid_t self = ::getpid();
  if (cached_pid != self || record.empty()) {
    record = std::to_string(self) + " " + ProcStartTime(self);
    cached_pid = self;
  }
  return WriteRecord(cell_dir, kOwnerRecord, record);
}

bool OwnedByAnotherLiveServer(const std::string& cell_dir) {
  std::ifstream in(cell_dir + "/" + kOwnerRecord);
  pid_t pid = -1;
  std::string start;
  if (!(in >> pid >> start) || pid <= 0) return false;
  if (pid == ::getpid()) return false;
  return ProcStartTime(pid) == start;
}

Result<InitRecord> ReadInitRecord(const std::string& cell_dir) {
  std::ifstream in(cell_dir + "/" + kInitRecord);
  InitRecord r;
  if (!(in >> r.pid >> r.start_time) || r.pid <= 1) {
    return Error::Msg(cell_dir + "/init: missing or malformed");
  }
  return r;
}

std::string StateDirFilesystemNote(const std::string& state_dir) {
  struct statfs fs;
  if (::statfs(state_dir.c_str(), &fs) != 0) return "";  // EnsureStateDir reports it
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) return "";
  const char* type = fs.f_type == EXT4_SUPER_MAGIC        ? "ext2/3/4"
                     : fs.f_type == XFS_SUPER_MAGIC       ? "xfs"
                     : fs.f_type == BTRFS_SUPER_MAGIC     ? "btrfs"
                     : fs.f_type == OVERLAYFS_SUPER_MAGIC ? "overlayfs"
                                                          : nullptr;
  char magic[32];
  std::snprintf(magic, sizeof magic, "0x%lx", static_cast<unsigned long>(fs.f_type));
  return "state dir " + state_dir + " is on a disk filesystem (" + (type ? type : magic) +
         "), not a tmpfs: cells are made and removed faster with a state dir on a tmpfs, "
         "such as one under /run (--state-dir or MCPCELL_STATE_DIR)";
}

}  // namespace mcpcell::sandbox
