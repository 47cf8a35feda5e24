// Reading what the in-cell archive helper printed (sandbox/init/archive_tool.h) for
// upload_archive and download_archive. The helper runs as the sandbox user, and the cell's
// own code can run the same binary, so its output is untrusted: every line must be one JSON
// object of the documented shape (unknown keys and wrong types are refused, naming the
// line), and the counts are bounded by what the server keeps.
// Pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace mcpcell::tools {

struct ArchiveEntryReport {
  std::string kind;  // file, directory, symlink, hardlink; "refused" for refusals
  std::string path;
  uint64_t size = 0;
  std::string reason;  // refusals only
};

struct UnpackOutcome {
  std::vector<ArchiveEntryReport> extracted;
  std::vector<ArchiveEntryReport> refused;
  uint64_t entries = 0;  // from the final line (may exceed extracted.size() when cut)
  uint64_t refused_count = 0;
  uint64_t bytes = 0;
  bool stopped = false;  // a limit ended the extraction; the last refusal says which
};

// stdout of `unpack`: entry lines, then the "done" line. An {"error":...} line becomes the
// error; a missing "done" line (the helper was killed or its output cut) is an error too.
Result<UnpackOutcome> ParseUnpackReport(std::string_view text);

struct PackOutcome {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t skipped_count = 0;
  std::vector<std::string> skipped;  // at most 100 "path: kind"
};

// The last line of `pack`'s stderr: the "done" summary, or {"error":...} as the error.
Result<PackOutcome> ParsePackReport(std::string_view stderr_text);

}  // namespace mcpcell::tools
