// Reading the end (and the start) of a trail file when the writer opens it: where the chain
// goes on from, and whether the end was cut (a crash mid-write, a full disk) or does not
// verify, in which case the writer records a `recovered` record naming the place. Reads at
// most the last MiB; a record is one line, far smaller. Any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace mcpcell::audit {

struct TailState {
  uint64_t size = 0;                   // the file's size
  std::optional<nlohmann::json> last;  // the last record that parses and whose hash holds
  bool unterminated = false;           // the file does not end with a newline
  bool damaged = false;                // bytes after `last`, or `last` does not chain on
  // The damage is only an unterminated line right after `last`: a write cut short by a
  // crash (the newline is the last byte of every write). Anything else is not a crash.
  bool torn = false;
  uint64_t cut_offset = 0;  // where the damage starts (when damaged)
  std::string reason;       // what the damage is (when damaged)
};

// An empty or missing file gives a TailState without `last`, not damaged.
Result<TailState> ScanTail(const std::string& path);

// The last line of the first `size` bytes of the open file `fd` (`path` names it in errors)
// as a good record (parses, hash holds): what a writer reads when another process appended
// since its own last record. nullopt when the bytes do not end with a newline or their last
// line is not a good record (the caller then scans the tail with ScanTail).
Result<std::optional<nlohmann::json>> LastGoodRecord(int fd, uint64_t size,
                                                     const std::string& path);

// The file's first record, if its first line is one (it is not checked against a hash).
std::optional<nlohmann::json> FirstRecord(const std::string& path);

}  // namespace mcpcell::audit
