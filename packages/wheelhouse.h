// The offline source of pip files: a directory of wheels (and sdists, served only when the
// policy allows them) that the operator provides. File names say the project and version
// (pypi_index.h); each file's SHA-256 is computed once and remembered by (path, size,
// mtime), so a changed file is hashed again. Never touches the network.
// Threading: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "packages/pypi_index.h"
#include "packages/scanned_files.h"

namespace mcpcell::packages {

class Wheelhouse {
 public:
  // The files of `project` (normalized) in `dir`; IndexFile.url is the file's path.
  Result<std::vector<IndexFile>> FilesOf(const std::string& dir, const std::string& project);
  // The path of the file named `filename` in `dir` whose SHA-256 is `sha256`, as last hashed.
  std::optional<std::string> Find(const std::string& dir, const std::string& sha256,
                                  const std::string& filename);

 private:
  ScannedFiles<std::string> hashed_;  // path -> SHA-256 (hex)
};

}  // namespace mcpcell::packages
