// The files of one audit trail, in `<state_dir>/audit/`: the current file `audit.jsonl`
// and the files rotated away from it, `audit-<first seq>-<YYYYMMDDTHHMMSSZ>.jsonl`. Read in
// order of their first seq, then the current file, they are one hash chain. Pure
// filesystem reads; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::audit {

inline constexpr char kCurrentFileName[] = "audit.jsonl";

struct TrailFile {
  std::string name;  // file name inside the audit dir
  std::string path;
  uint64_t first_seq = 0;  // from the name; 0 for the current file
  bool current = false;
};

// "<state_dir>/audit"
std::string AuditDir(const std::string& state_dir);

// "audit-<first_seq>-<time>.jsonl"
std::string RotatedFileName(uint64_t first_seq, std::chrono::system_clock::time_point first_time);

// The trail's files in chain order (rotated by first seq, then audit.jsonl if present).
// Other files in the directory (egress.jsonl, …) are not part of it. A missing directory
// is an error that names it.
Result<std::vector<TrailFile>> ListTrailFiles(const std::string& dir);

}  // namespace mcpcell::audit
