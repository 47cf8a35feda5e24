// The offline source of npm packages: a directory of package tarballs (*.tgz, as `npm pack`
// writes them) that the operator provides. Each tarball's package.json (the first
// "<top dir>/package.json" entry of the gzip'd tar) says its name and version; its SHA-512
// is the integrity npm verifies. Both are computed once per (path, size, mtime). From them
// Packument() builds the document an upstream registry would answer, which the service then
// filters like an upstream one (npm_index.h). Never touches the network.
// Threading: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "packages/scanned_files.h"

namespace mcpcell::packages {

// The package.json of an npm tarball (gzip'd tar), at most 1 MiB, reading at most 64 MiB of
// the uncompressed archive to find it.
Result<nlohmann::json> ReadTarballPackageJson(const std::string& path);

class NpmDirectory {
 public:
  // The packument of `name` built from every tarball of it in `dir` (tarball URLs are the
  // files' paths); an error when the directory has none.
  Result<nlohmann::json> Packument(const std::string& dir, const std::string& name);
  // The path of `filename` in `dir` if its SHA-512 (hex) is `sha512`, as last computed.
  std::optional<std::string> Find(const std::string& dir, const std::string& sha512,
                                  const std::string& filename);

 private:
  struct Scanned {
    std::string sha512;       // hex
    nlohmann::json manifest;  // package.json; null when unreadable
    std::string error;
  };
  ScannedFiles<Scanned> scanned_;  // path -> what it holds
};

}  // namespace mcpcell::packages
