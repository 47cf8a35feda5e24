// File operations that the server asks cell init to perform: read, write, list, stat,
// mkdir, remove. They run in pid 1 of the cell, i.e. inside its mount namespace, and must
// never reach anything the sandboxed code itself could not:
//   - identity: for the duration of one operation the thread's fsuid/fsgid are the sandbox
//     user's and its effective capability set is empty (CAP_DAC_OVERRIDE and
//     CAP_SYS_PTRACE would otherwise let init read what the user cannot, e.g.
//     /proc/1/environ); both are restored afterwards (FileOpIdentity).
//   - resolution: every path is resolved with openat2 under `root_fd` with
//     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: absolute symlinks and ".." stay inside the
//     root, and /proc/<pid>/root, /proc/<pid>/fd/<n>, /proc/<pid>/cwd and the like are
//     refused (ELOOP). A ".." component is resolved by the kernel the same way: after any
//     symlink before it, never above the root (as the sandboxed code's own open would);
//     a path that ends in ".." is refused where the operation would act on it as an entry
//     (create, remove, rename, stat without following). NUL bytes and paths over
//     kMaxPathBytes are refused before any syscall; relative paths are taken relative to
//     `base` (the workspace). Cell init's own /proc/<pid> entries (also as /proc/self) are refused
//     (EACCES): the kernel exempts a process from the access checks on its own entries.
//   - type: read and write only act on regular files (a FIFO could block init forever, a
//     device could be infinite); files are opened O_NONBLOCK and checked with fstat.
//   - remove: the final component is never followed; recursive removal does not follow
//     symlinks and does not cross into other mounts (RESOLVE_NO_XDEV below the target).
//
// Each function answers with the protocol's reply type; errors carry the syscall, the
// path and errno. Single-threaded (cell init), no exceptions. `root_fd` is a directory fd;
// in unit tests it is a temp dir on the host.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/control/protocol.h"

namespace mcpcell::sandbox {

struct FileOpContext {
  int root_fd = -1;                 // the cell's "/" (a directory fd)
  std::string base = "/workspace";  // relative paths are relative to this (inside root)
  uid_t uid = 1000;                 // the sandbox user
  gid_t gid = 1000;
};

// Switches the calling thread's fsuid/fsgid to `ctx`'s user and empties its effective
// capability set; the destructor restores both. ok() is false if the switch failed
// (then nothing runs).
class FileOpIdentity {
 public:
  explicit FileOpIdentity(const FileOpContext& ctx);
  ~FileOpIdentity();
  FileOpIdentity(const FileOpIdentity&) = delete;
  FileOpIdentity& operator=(const FileOpIdentity&) = delete;
  const Status& status() const { return status_; }

 private:
  Status status_;
  uid_t saved_fsuid_ = 0;
  gid_t saved_fsgid_ = 0;
  bool caps_saved_ = false;
  unsigned saved_effective_[2] = {0, 0};
};

// Checks a request path and makes it absolute (relative to ctx.base), dropping empty and
// "." components and keeping ".." ones for the kernel; refuses "", NUL and overlong paths
// and components, naming the problem.
Result<std::string> NormalizeCellPath(const FileOpContext& ctx, const std::string& path);

Result<control::ReadFileReply> ReadFile(const FileOpContext& ctx,
                                        const control::ReadFileRequest& request);
Status WriteFile(const FileOpContext& ctx, const control::WriteFileRequest& request);
Result<control::ListDirReply> ListDir(const FileOpContext& ctx,
                                      const control::ListDirRequest& request);
Result<control::StatReply> StatPath(const FileOpContext& ctx, const control::StatRequest& request);
Status MakeDirectory(const FileOpContext& ctx, const control::MkdirRequest& request);
Status RemovePath(const FileOpContext& ctx, const control::RemoveRequest& request);
// Creates (or truncates) the regular file `path` as the sandbox user, mode 0600, and returns
// it open for writing: a detached exec's output file (DetachedExecRequest). Its parent
// directory must exist; a symlink as the last component is not followed.
Result<UniqueFd> CreateOutputFile(const FileOpContext& ctx, const std::string& path);
// renameat2 within the cell: both parents resolved like every other path, the last
// components never followed (a symlink is renamed, not its target).
Status RenamePath(const FileOpContext& ctx, const control::RenameRequest& request);

}  // namespace mcpcell::sandbox
