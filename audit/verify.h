// Checking a whole trail: every file in chain order (trail_files.h), every record's hash,
// the seq and prev links between records and across files, checkpoints and, given the
// operator's public key, their signatures. Stops at the first problem and names it: the
// file, the line (1-based) and the seq. A cut that a later `recovered` record accounts for
// (the writer's recovery after a crash) is a note, not a failure; so is the start of a
// trail whose earlier files retention deleted, when an `audit.deleted` record says so.
// Pure reads; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audit/signing.h"
#include "base/status.h"

namespace mcpcell::audit {

enum class FindingKind {
  kEdited,        // a record's hash does not match its content, or a line is not a record
  kRemoved,       // a gap in seq: records are missing
  kReordered,     // a seq out of order
  kCut,           // the last line is incomplete
  kBadSignature,  // a checkpoint's signature does not verify (or is missing with a key)
};
const char* FindingKindName(FindingKind kind);

struct Finding {
  FindingKind kind;
  std::string file;             // file name in the audit dir
  size_t line = 0;              // 1-based
  std::optional<uint64_t> seq;  // the record named (or the one expected there)
  std::string message;
};
// "audit.jsonl:12 (seq 12): edited: hash does not match the record's content"
std::string Describe(const Finding& finding);

struct VerifyReport {
  std::optional<Finding> failure;  // the first problem; none if the trail verifies
  std::vector<std::string> notes;  // recoveries, retention, signatures not checked
  uint64_t files = 0;
  uint64_t records = 0;
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  uint64_t checkpoints = 0;
  uint64_t signatures_verified = 0;
  bool ok() const { return !failure.has_value(); }
};

// Verifies the trail in dir. verifier may be null (signatures are then not checked; with
// one, every checkpoint must carry a signature that verifies). Errors are for a trail that
// cannot be read at all (no such directory).
Result<VerifyReport> VerifyTrail(const std::string& dir, const SignatureVerifier* verifier);

}  // namespace mcpcell::audit
