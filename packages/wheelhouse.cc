// Offline pip files from a directory (see wheelhouse.h).
#include "packages/wheelhouse.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "packages/digest.h"

namespace mcpcell::packages {

namespace fs = std::filesystem;

Result<std::vector<IndexFile>> Wheelhouse::FilesOf(const std::string& dir,
                                                   const std::string& project) {
  std::vector<IndexFile> files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error::Msg("wheelhouse \"" + dir + "\": " + ec.message());
  for (const auto& entry : it) {
    std::string filename = entry.path().filename().string();
    auto dist = ParseDistFilename(filename, project);
    if (!dist) continue;
    std::string path = entry.path().string();
    struct stat st {};
    // stat, not lstat: an operator may link files into the wheelhouse; only regular files.
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    std::string sha;
    {
      std::lock_guard lock(mu_);
      auto h = hashed_.find(path);
      if (h != hashed_.end() && h->second.size == static_cast<uint64_t>(st.st_size) &&
          h->second.mtime_ns == mtime)
        sha = h->second.sha256;
    }
    if (sha.empty()) {
      auto digest = FileDigestHex(path, DigestAlgo::kSha256);
      if (!digest) return Error::Msg("wheelhouse: " + digest.error().message);
      sha = *digest;
      std::lock_guard lock(mu_);
      hashed_[path] = Hashed{static_cast<uint64_t>(st.st_size), mtime, sha};
    }
    files.push_back(IndexFile{filename, path, sha, "", std::nullopt});
  }
  std::sort(files.begin(), files.end(),
            [](const IndexFile& a, const IndexFile& b) { return a.filename < b.filename; });
  return files;
}

std::optional<std::string> Wheelhouse::Find(const std::string& dir, const std::string& sha256,
                                            const std::string& filename) {
  std::string path = (fs::path(dir) / filename).string();
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::lock_guard lock(mu_);
  auto h = hashed_.find(path);
  if (h == hashed_.end() || h->second.sha256 != sha256 ||
      h->second.size != static_cast<uint64_t>(st.st_size) || h->second.mtime_ns != mtime)
    return std::nullopt;
  return path;
}

}  // namespace mcpcell::packages
