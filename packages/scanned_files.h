// ScannedFiles: what was computed from the files of an offline source (a wheel's SHA-256,
// a tarball's package.json and SHA-512), remembered per path together with the file's size
// and mtime, so that each file is read once and read again only after it changed. The
// wheelhouse and the npm directory each keep one.
// Threading: every method may be called from any thread; `compute` runs unlocked, so two
// threads may compute the same file at once (the last result is kept; both are equal).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "base/status.h"

namespace mcpcell::packages {

// Size and modification time of a file: a change to either means it must be read again.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// The stamp of `path` if it is a regular file. stat, not lstat: an operator may link files
// into an offline directory.
inline std::optional<FileStamp> StatRegularFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileStamp{static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

template <typename Facts>
class ScannedFiles {
 public:
  // The facts of `path` as of `stamp`: the remembered ones when the file is unchanged, else
  // compute(path) (a Result<Facts>), remembered when it succeeds.
  template <typename Compute>
  Result<Facts> Get(const std::string& path, const FileStamp& stamp, Compute&& compute) {
    if (auto known = Find(path, stamp)) return std::move(*known);
    Result<Facts> facts = compute(path);
    if (!facts) return facts.error();
    std::lock_guard lock(mu_);
    scanned_[path] = {stamp, *facts};
    return facts;
  }

  // The remembered facts of `path` if the file is unchanged since they were computed.
  std::optional<Facts> Find(const std::string& path, const FileStamp& stamp) {
    std::lock_guard lock(mu_);
    auto it = scanned_.find(path);
    if (it == scanned_.end() || it->second.first != stamp) return std::nullopt;
    return it->second.second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<FileStamp, Facts>> scanned_;  // path -> as of stamp
};

}  // namespace mcpcell::packages
