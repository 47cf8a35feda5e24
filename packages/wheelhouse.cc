// Offline pip files from a directory (see wheelhouse.h).
#include "packages/wheelhouse.h"

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
    auto stamp = StatRegularFile(path);
    if (!stamp) continue;
    auto sha = hashed_.Get(
        path, *stamp, [](const std::string& p) { return FileDigestHex(p, DigestAlgo::kSha256); });
    if (!sha) return Error::Msg("wheelhouse: " + sha.error().message);
    files.push_back(IndexFile{filename, path, *sha, "", std::nullopt});
  }
  std::sort(files.begin(), files.end(),
            [](const IndexFile& a, const IndexFile& b) { return a.filename < b.filename; });
  return files;
}

std::optional<std::string> Wheelhouse::Find(const std::string& dir, const std::string& sha256,
                                            const std::string& filename) {
  std::string path = (fs::path(dir) / filename).string();
  auto stamp = StatRegularFile(path);
  if (!stamp) return std::nullopt;
  auto known = hashed_.Find(path, *stamp);
  if (!known || *known != sha256) return std::nullopt;
  return path;
}

}  // namespace mcpcell::packages
