// Packing a directory as tar.gz (pax), for download_archive. Runs inside a cell as the
// sandbox user (archive_tool.h), like extraction, so the server never walks a cell's files.
//
// The walk goes by directory fds (openat O_NOFOLLOW, fstatat AT_SYMLINK_NOFOLLOW), names
// sorted, so the same tree gives the same listing: regular files with their data,
// directories, symlinks as symlinks (never followed). Modes keep their 0777 bits and
// mtimes; owners are not stored (the receiver owns what it unpacks). FIFOs, sockets and
// devices are skipped and named in `skipped`. Hard-linked files are stored as copies.
// Single-threaded, no exceptions (cell init's build).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::sandbox {

struct PackSummary {
  uint64_t entries = 0;
  uint64_t bytes = 0;                // the tar.gz written
  std::vector<std::string> skipped;  // "path: FIFO"
};

// Writes the tree under `dir_fd` as tar.gz to `out_fd`. Fails, naming the size, once the
// output passes `max_bytes` (the caller's cap for what it can return), or on an I/O error
// with the path.
Result<PackSummary> PackDirectory(int dir_fd, int out_fd, uint64_t max_bytes);

}  // namespace mcpcell::sandbox
