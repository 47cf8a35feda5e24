// Extracting an untrusted archive (tar, tar.gz/.bz2/.xz/.zst, zip) into one directory, for
// upload_archive. It runs inside a cell as the sandbox user (archive_tool.h: cell init's
// binary started like any exec), never in the server, so a bug in libarchive or here is
// confined like the cell's own code.
//
// Everything is written relative to the target's directory fd: each parent directory is
// made with mkdirat and opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), the
// entry itself with O_NOFOLLOW | O_EXCL, so no path string is resolved against "/" and no
// symlink is ever followed (one made by an earlier entry included). Refused, each with its
// path and reason, and the rest extracted: absolute paths, ".." components, symlinks whose
// target leaves the directory, hard links to anything but a regular file inside it, device
// nodes, FIFOs, sockets, setuid/setgid bits, paths through a symlink. Stopping the whole
// extraction (what was written stays, the entry in progress is removed): the total of the
// entries' sizes over max_bytes, output over max_ratio times the input read so far (past
// kRatioFloorBytes), more than max_entries entries.
// Single-threaded, no exceptions (cell init's build).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell::sandbox {

struct UnpackLimits {
  uint64_t max_bytes = 1ull << 30;  // sum of the extracted files' sizes
  uint64_t max_ratio = 200;         // extracted bytes per archive byte read
  uint64_t max_entries = 100000;
};

// Below this much output the ratio is not checked: a small, very compressible file is not a
// bomb.
inline constexpr uint64_t kRatioFloorBytes = 1ull << 20;

// What happened to one entry. kind: "file", "directory", "symlink", "hardlink" when
// extracted; "refused" (reason says why).
struct UnpackEvent {
  std::string kind;
  std::string path;  // as the archive names it
  uint64_t size = 0;
  std::string reason;  // refused only
};

struct UnpackSummary {
  uint64_t entries = 0;  // extracted
  uint64_t refused = 0;
  uint64_t bytes = 0;    // file data written
  bool stopped = false;  // a limit ended the extraction (its event says which)
};

using UnpackReport = std::function<void(const UnpackEvent&)>;

// Extracts the archive in `data` into the directory `dir_fd`. An error only when the
// archive cannot be read at all (unknown format, corrupt header) or the directory fails;
// everything refused is an event, not an error.
Result<UnpackSummary> UnpackArchive(std::string_view data, int dir_fd, const UnpackLimits& limits,
                                    const UnpackReport& report);

// Why an archive path may not be extracted ("" when it may): empty, absolute, a ".."
// component, longer than PATH_MAX.
std::string ArchivePathProblem(std::string_view path);
// Why a symlink at `link_path` pointing to `target` leaves the directory ("" when it stays
// inside): an absolute target, or more ".." than the link has parents.
std::string SymlinkTargetProblem(std::string_view link_path, std::string_view target);

}  // namespace mcpcell::sandbox
