// File operations inside a cell, as the sandbox user, resolved with openat2 under the
// cell's root. See file_ops.h for the rules; the comments here say why each step is where
// it is.
#include "sandbox/init/file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/unique_fd.h"

namespace mcpcell::sandbox {
namespace {

using control::FileStat;
using control::FileType;

constexpr uint64_t kResolveCell = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
constexpr int kMaxRemoveDepth = 256;

std::string Quoted(const std::string& path) { return "\"" + path + "\""; }

// An error from a syscall on a cell path; ELOOP gets the likely reason spelled out.
Error PathError(const char* call, const std::string& path, int e = errno) {
  Error error = Error::Sys(std::string(call) + "(" + Quoted(path) + ")", e);
  if (e == ELOOP) error.message += ": symlink loop or /proc magic link, refused";
  if (e == EXDEV) error.message += ": path escapes the cell root or crosses a mount, refused";
  return error;
}

// The kernel lets a process at its own /proc/<pid> entries whatever its fsuid and
// capabilities (the same-thread-group exemption of ptrace_may_access and of the fd/
// directories): maps, fd/, fdinfo/, map_files/, attr/, timerslack_ns. File operations run
// in cell init, so without this check they would show the sandbox user what its own code
// gets EACCES for (init's memory map, with the host path of mcpcell-init and its address
// layout; its descriptors) and write init's attr/ files. Anything on procfs is checked by
// the path the kernel reports for the open descriptor; when that cannot be read the open
// is refused.
Status RefuseOwnProcEntry(int fd, const std::string& path) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return PathError("fstatfs", path);
  if (fs.f_type != PROC_SUPER_MAGIC) return Ok();
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  ssize_t n = ::readlink(link, target, sizeof target);
  if (n < 0 || n == static_cast<ssize_t>(sizeof target)) return PathError("readlink", link);
  const std::string own = "/proc/" + std::to_string(::getpid());
  std::string_view resolved(target, static_cast<size_t>(n));
  if (resolved == own || resolved.substr(0, own.size() + 1) == own + "/") {
    Error error = PathError("openat2", path, EACCES);
    error.message += ": cell init's own /proc entries are refused";
    return error;
  }
  return Ok();
}

Result<UniqueFd> OpenInRoot(int root_fd, const std::string& path, uint64_t flags,
                            uint64_t resolve = kResolveCell, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve;
  int fd;
  // EAGAIN: a ".." was resolved while a rename or mount happened somewhere on the system,
  // and the kernel would rather fail than risk an escape; it is safe to ask again.
  int tries = 0;
  do {
    fd = static_cast<int>(::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
  } while (fd < 0 && (errno == EINTR || (errno == EAGAIN && ++tries < 64)));
  if (fd < 0) return PathError("openat2", path);
  UniqueFd opened(fd);
  if (Status own = RefuseOwnProcEntry(opened.get(), path); !own) return own.error();
  return opened;
}

FileType TypeOf(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return FileType::kRegular;
    case S_IFDIR:
      return FileType::kDirectory;
    case S_IFLNK:
      return FileType::kSymlink;
    case S_IFIFO:
      return FileType::kFifo;
    case S_IFSOCK:
      return FileType::kSocket;
    case S_IFCHR:
      return FileType::kChar;
    case S_IFBLK:
      return FileType::kBlock;
    default:
      return FileType::kUnknown;
  }
}

FileStat ToFileStat(const struct stat& st) {
  FileStat s;
  s.type = TypeOf(st.st_mode);
  s.mode = st.st_mode & 07777;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.uid = st.st_uid;
  s.gid = st.st_gid;
  s.nlink = st.st_nlink;
  return s;
}

// "/a/b/c" -> {"/a/b", "c"}; "/c" -> {"/", "c"}. `path` is normalized and not "/".
std::pair<std::string, std::string> SplitParent(const std::string& path) {
  size_t slash = path.rfind('/');
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Opens the parent directory of a normalized non-root path and returns it with the name.
struct ParentAndName {
  UniqueFd dir;
  std::string name;
};
Result<ParentAndName> OpenParent(const FileOpContext& ctx, const std::string& path) {
  if (path == "/") return Error::Msg("\"/\": operation not allowed on the cell root");
  auto [parent, name] = SplitParent(path);
  // "x/.." names a directory by way of its child: creating, removing or renaming it as the
  // entry ".." of x would act on x's parent (rm -rf refuses it too).
  if (name == "..") {
    return Error::Msg("path " + Quoted(path) +
                      ": ends in \"..\"; name the directory itself (its path without the "
                      "last two components)");
  }
  Result<UniqueFd> dir = OpenInRoot(ctx.root_fd, parent, O_PATH | O_DIRECTORY);
  if (!dir.ok()) return dir.error();
  return ParentAndName{std::move(*dir), std::move(name)};
}

// Reads one batch of directory entries; returns bytes read (0 at the end).
Result<long> GetDents(int fd, char* buffer, size_t size, const std::string& path) {
  long n = ::syscall(SYS_getdents64, fd, buffer, size);
  if (n < 0) return PathError("getdents64", path);
  return n;
}

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool IsDotOrDotDot(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// Empties the directory `name` under `parent_fd` without following symlinks and without
// crossing into another mount (RESOLVE_NO_XDEV: a bind mount inside is left alone and
// reported).
Status RemoveTreeContents(int parent_fd, const std::string& name, const std::string& shown,
                          int depth) {
  if (depth > kMaxRemoveDepth)
    return Error::Msg(Quoted(shown) + ": directory tree too deep to remove");
  Result<UniqueFd> dir =
      OpenInRoot(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS);
  if (!dir.ok()) return dir.error();
  alignas(LinuxDirent64) char buffer[8192];
  for (;;) {
    // Deleting while reading can make getdents skip entries on some filesystems, so read
    // from the start again after every batch until only "." and ".." are left.
    if (::lseek(dir->get(), 0, SEEK_SET) < 0) return PathError("lseek", shown);
    Result<long> n = GetDents(dir->get(), buffer, sizeof(buffer), shown);
    if (!n.ok()) return n.error();
    bool removed_any = false;
    for (long pos = 0; pos < *n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buffer + pos);
      pos += d->d_reclen;
      if (IsDotOrDotDot(d->d_name)) continue;
      std::string child_shown = shown + "/" + d->d_name;
      bool is_dir = d->d_type == DT_DIR;
      if (d->d_type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dir->get(), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
          return PathError("fstatat", child_shown);
        }
        is_dir = S_ISDIR(st.st_mode);
      }
      if (is_dir) {
        if (Status s = RemoveTreeContents(dir->get(), d->d_name, child_shown, depth + 1); !s.ok()) {
          return s;
        }
      }
      if (::unlinkat(dir->get(), d->d_name, is_dir ? AT_REMOVEDIR : 0) != 0) {
        return PathError("unlinkat", child_shown);
      }
      removed_any = true;
    }
    if (!removed_any) return Ok();
  }
}

}  // namespace

FileOpIdentity::FileOpIdentity(const FileOpContext& ctx) {
  // setfsuid cannot report failure directly; the previous value it returns and a second
  // call with -1 tell whether the change took. Order matters: the fsuid change needs
  // CAP_SETUID, so it comes before the effective set is emptied.
  saved_fsgid_ = static_cast<gid_t>(::setfsgid(ctx.gid));
  saved_fsuid_ = static_cast<uid_t>(::setfsuid(ctx.uid));
  if (static_cast<gid_t>(::setfsgid(-1)) != ctx.gid ||
      static_cast<uid_t>(::setfsuid(-1)) != ctx.uid) {
    status_ = Error::Msg("setfsuid/setfsgid(" + std::to_string(ctx.uid) + "/" +
                         std::to_string(ctx.gid) + "): identity change did not take effect");
    return;
  }
  // Going from fsuid 0 to non-zero clears only the filesystem capabilities; others such
  // as CAP_SYS_PTRACE (which /proc access checks use) stay. Empty the effective set.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) {
    status_ = Error::Sys("capget");
    return;
  }
  saved_effective_[0] = data[0].effective;
  saved_effective_[1] = data[1].effective;
  caps_saved_ = true;
  data[0].effective = data[1].effective = 0;
  if (::syscall(SYS_capset, &header, data) != 0) status_ = Error::Sys("capset(effective = {})");
}

FileOpIdentity::~FileOpIdentity() {
  if (caps_saved_) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &header, data) == 0) {
      data[0].effective = saved_effective_[0];
      data[1].effective = saved_effective_[1];
      ::syscall(SYS_capset, &header, data);
    }
  }
  ::setfsuid(saved_fsuid_);
  ::setfsgid(saved_fsgid_);
}

Result<std::string> NormalizeCellPath(const FileOpContext& ctx, const std::string& path) {
  if (path.empty()) return Error::Msg("path: empty");
  if (path.find('\0') != std::string::npos) return Error::Msg("path: contains a NUL byte");
  if (path.size() > control::kMaxPathBytes) return Error::Msg("path: longer than 4096 bytes");
  std::string full = path[0] == '/' ? path : ctx.base + "/" + path;
  std::string out;
  size_t pos = 0;
  while (pos < full.size()) {
    size_t next = full.find('/', pos);
    if (next == std::string::npos) next = full.size();
    std::string_view part(full.data() + pos, next - pos);
    pos = next + 1;
    // ".." stays: the kernel resolves it under RESOLVE_IN_ROOT (physically, after any
    // symlink before it, as the sandboxed code's own open would; never above the root).
    if (part.empty() || part == ".") continue;
    if (part.size() > control::kMaxNameBytes) {
      return Error::Msg("path " + Quoted(path) + ": a component is longer than 255 bytes");
    }
    out += '/';
    out += part;
  }
  if (out.empty()) out = "/";
  if (out.size() > control::kMaxPathBytes) return Error::Msg("path: longer than 4096 bytes");
  return out;
}

Result<control::ReadFileReply> ReadFile(const FileOpContext& ctx,
                                        const control::ReadFileRequest& request) {
  if (request.max_bytes > control::kMaxFileChunkBytes) {
    return Error::Msg("max_bytes " + std::to_string(request.max_bytes) + " exceeds " +
                      std::to_string(control::kMaxFileChunkBytes));
  }
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  // O_NONBLOCK: opening a FIFO must not block init; the fstat below refuses it anyway.
  Result<UniqueFd> fd = OpenInRoot(ctx.root_fd, *path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return PathError("fstat", *path);
  if (S_ISDIR(st.st_mode)) return PathError("read", *path, EISDIR);
  if (!S_ISREG(st.st_mode)) return Error::Msg(Quoted(*path) + ": not a regular file, refused");
  control::ReadFileReply reply;
  reply.request_id = request.request_id;
  reply.file_size = static_cast<uint64_t>(st.st_size);
  reply.data.resize(request.max_bytes);
  size_t got = 0;
  while (got < reply.data.size()) {
    ssize_t n = ::pread(fd->get(), reply.data.data() + got, reply.data.size() - got,
                        static_cast<off_t>(request.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathError("pread", *path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  reply.data.resize(got);
  // A short read is the end. st_size also tells for regular files on real filesystems;
  // /proc and /sys report 0 for files that do have content, so 0 never means "at the end".
  reply.eof =
      got < request.max_bytes || (reply.file_size > 0 && request.offset + got >= reply.file_size);
  return reply;
}

Status WriteFile(const FileOpContext& ctx, const control::WriteFileRequest& request) {
  if (request.data.size() > control::kMaxFileChunkBytes) return Error::Msg("data: chunk too large");
  if (request.flags & ~uint32_t{control::kWriteCreate | control::kWriteTruncate |
                                control::kWriteExclusive | control::kWriteAppend}) {
    return Error::Msg("flags: unknown bits " + std::to_string(request.flags));
  }
  const bool append = (request.flags & control::kWriteAppend) != 0;
  if (append && (request.flags & control::kWriteTruncate)) {
    return Error::Msg("flags: append and truncate together");
  }
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  uint64_t flags = O_WRONLY | O_NONBLOCK | O_NOCTTY;
  if (request.flags & control::kWriteCreate) flags |= O_CREAT;
  if (request.flags & control::kWriteExclusive) flags |= O_CREAT | O_EXCL;
  if (append) flags |= O_APPEND;
  // No O_TRUNC at open: truncation waits until fstat has shown a regular file.
  // openat2 refuses a mode without O_CREAT (EINVAL), unlike openat.
  const uint64_t mode = (flags & O_CREAT) ? (request.mode & 0777) : 0;
  Result<UniqueFd> fd = OpenInRoot(ctx.root_fd, *path, flags, kResolveCell, mode);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return PathError("fstat", *path);
  if (!S_ISREG(st.st_mode)) return Error::Msg(Quoted(*path) + ": not a regular file, refused");
  if ((request.flags & control::kWriteTruncate) && ::ftruncate(fd->get(), 0) != 0) {
    return PathError("ftruncate", *path);
  }
  size_t done = 0;
  while (done < request.data.size()) {
    ssize_t n = append ? ::write(fd->get(), request.data.data() + done, request.data.size() - done)
                       : ::pwrite(fd->get(), request.data.data() + done, request.data.size() - done,
                                  static_cast<off_t>(request.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathError("pwrite", *path);
    done += static_cast<size_t>(n);
  }
  return Ok();
}

Result<UniqueFd> CreateOutputFile(const FileOpContext& ctx, const std::string& request_path) {
  Result<std::string> path = NormalizeCellPath(ctx, request_path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  const uint64_t flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  Result<UniqueFd> fd = OpenInRoot(ctx.root_fd, *path, flags, kResolveCell, 0600);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return PathError("fstat", *path);
  if (!S_ISREG(st.st_mode)) return Error::Msg(Quoted(*path) + ": not a regular file, refused");
  if (::ftruncate(fd->get(), 0) != 0) return PathError("ftruncate", *path);
  return fd;
}

Result<control::ListDirReply> ListDir(const FileOpContext& ctx,
                                      const control::ListDirRequest& request) {
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  Result<UniqueFd> dir = OpenInRoot(ctx.root_fd, *path, O_RDONLY | O_DIRECTORY);
  if (!dir.ok()) return dir.error();
  if (request.cookie != 0 &&
      ::lseek(dir->get(), static_cast<off_t>(request.cookie), SEEK_SET) < 0) {
    return PathError("lseek", *path);
  }
  control::ListDirReply reply;
  reply.request_id = request.request_id;
  // Keep the reply well inside one frame: each entry costs its name plus ~45 bytes.
  size_t budget = control::kMaxFrameBytes - 1024;
  alignas(LinuxDirent64) char buffer[8192];
  for (;;) {
    Result<long> n = GetDents(dir->get(), buffer, sizeof(buffer), *path);
    if (!n.ok()) return n.error();
    if (*n == 0) {
      reply.next_cookie = 0;  // complete
      return reply;
    }
    for (long pos = 0; pos < *n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buffer + pos);
      pos += d->d_reclen;
      if (IsDotOrDotDot(d->d_name)) continue;
      size_t cost = std::strlen(d->d_name) + 64;
      if (reply.entries.size() == control::kMaxDirEntries || cost > budget) {
        return reply;  // next_cookie is the offset after the last entry included
      }
      struct stat st;
      if (::fstatat(dir->get(), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed while listing
        return PathError("fstatat", *path + "/" + d->d_name);
      }
      reply.entries.push_back(control::DirEntry{d->d_name, ToFileStat(st)});
      budget -= cost;
      reply.next_cookie = static_cast<uint64_t>(d->d_off);
    }
  }
}

Result<control::StatReply> StatPath(const FileOpContext& ctx, const control::StatRequest& request) {
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  struct stat st;
  if (*path == "/" || request.follow_symlinks) {
    Result<UniqueFd> fd = OpenInRoot(ctx.root_fd, *path, O_PATH);
    if (!fd.ok()) return fd.error();
    if (::fstat(fd->get(), &st) != 0) return PathError("fstat", *path);
  } else {
    Result<ParentAndName> parent = OpenParent(ctx, *path);
    if (!parent.ok()) return parent.error();
    if (::fstatat(parent->dir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return PathError("fstatat", *path);
    }
  }
  return control::StatReply{request.request_id, ToFileStat(st)};
}

Status MakeDirectory(const FileOpContext& ctx, const control::MkdirRequest& request) {
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  if (*path == "/") return request.parents ? Ok() : PathError("mkdirat", *path, EEXIST);
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  const mode_t mode = request.mode & 0777;
  // With `parents`, create each missing prefix in turn; each step resolves its parent
  // afresh under the root, so a symlink planted in between is still confined.
  size_t start = request.parents ? 1 : path->size();
  for (size_t end = path->find('/', start);; end = path->find('/', end + 1)) {
    const bool last = end == std::string::npos;
    std::string prefix = last ? *path : path->substr(0, end);
    // "a/b/.." exists once "a/b" does (as mkdir -p finds): nothing to make; the next
    // prefix resolves it as its parent.
    if (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/..") == 0) {
      if (!last) continue;
      Result<UniqueFd> dir = OpenInRoot(ctx.root_fd, prefix, O_PATH | O_DIRECTORY);
      if (!dir.ok()) return dir.error();
      return request.parents ? Ok() : PathError("mkdirat", prefix, EEXIST);
    }
    Result<ParentAndName> parent = OpenParent(ctx, prefix);
    if (!parent.ok()) return parent.error();
    if (::mkdirat(parent->dir.get(), parent->name.c_str(), mode) != 0) {
      if (errno != EEXIST || (last && !request.parents)) return PathError("mkdirat", prefix);
      // An existing prefix must be a directory once resolved inside the root.
      if (!OpenInRoot(ctx.root_fd, prefix, O_PATH | O_DIRECTORY).ok()) {
        return PathError("mkdirat", prefix, ENOTDIR);
      }
    }
    if (last) return Ok();
  }
}

Status RenamePath(const FileOpContext& ctx, const control::RenameRequest& request) {
  Result<std::string> from = NormalizeCellPath(ctx, request.from);
  if (!from.ok()) return from.error().Wrap("from");
  Result<std::string> to = NormalizeCellPath(ctx, request.to);
  if (!to.ok()) return to.error().Wrap("to");
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  Result<ParentAndName> from_parent = OpenParent(ctx, *from);
  if (!from_parent.ok()) return from_parent.error();
  Result<ParentAndName> to_parent = OpenParent(ctx, *to);
  if (!to_parent.ok()) return to_parent.error();
  const unsigned flags = request.no_replace ? RENAME_NOREPLACE : 0;
  if (::renameat2(from_parent->dir.get(), from_parent->name.c_str(), to_parent->dir.get(),
                  to_parent->name.c_str(), flags) != 0) {
    return PathError("renameat2", *from + " -> " + *to);
  }
  return Ok();
}

Status RemovePath(const FileOpContext& ctx, const control::RemoveRequest& request) {
  Result<std::string> path = NormalizeCellPath(ctx, request.path);
  if (!path.ok()) return path.error();
  FileOpIdentity identity(ctx);
  if (!identity.status().ok()) return identity.status().error();
  Result<ParentAndName> parent = OpenParent(ctx, *path);
  if (!parent.ok()) return parent.error();
  struct stat st;
  // The final component is never followed: removing a symlink removes the link.
  if (::fstatat(parent->dir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError("fstatat", *path);
  }
  const bool is_dir = S_ISDIR(st.st_mode);
  if (is_dir && request.recursive) {
    if (Status s = RemoveTreeContents(parent->dir.get(), parent->name, *path, 0); !s.ok()) return s;
  }
  if (::unlinkat(parent->dir.get(), parent->name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0) {
    return PathError("unlinkat", *path);
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
