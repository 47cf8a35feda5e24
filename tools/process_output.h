// ReadProcessOutput: the new output of a background process (process_table.h) since a
// cursor (a byte offset into its output file), bounded like a finished run's: when more
// than `keep` bytes are new, the first and the last keep/2 of them with a line between
// naming what was left out and how to read it. The window never ends inside a UTF-8
// character (the cursor stops before it), so text stays whole across reads.
// Threading: any handler thread, with its call's lease.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "sandbox/cell_session.h"

namespace mcpcell::tools {

struct OutputWindow {
  std::string text;  // valid UTF-8
  uint64_t next_cursor = 0;
  uint64_t file_size = 0;
  uint64_t left_out = 0;  // bytes between head and tail not shown
};

// An error names the problem: a cursor past the end of the output, an unreadable file.
Result<OutputWindow> ReadProcessOutput(const sandbox::CellLease& lease, const std::string& path,
                                       uint64_t cursor, size_t keep, const std::string& id);

// How many bytes at the end of `bytes` form an incomplete UTF-8 character (0..3).
size_t IncompleteUtf8Tail(std::string_view bytes);

}  // namespace mcpcell::tools
