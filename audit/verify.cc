#include "audit/verify.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "audit/record.h"
#include "audit/trail_files.h"

namespace mcpcell::audit {

using nlohmann::json;

const char* FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kEdited:
      return "edited";
    case FindingKind::kRemoved:
      return "removed";
    case FindingKind::kReordered:
      return "reordered";
    case FindingKind::kCut:
      return "cut";
    case FindingKind::kBadSignature:
      return "bad signature";
  }
  return "?";
}

std::string Describe(const Finding& f) {
  std::string out = f.file + ":" + std::to_string(f.line);
  if (f.seq) out += " (seq " + std::to_string(*f.seq) + ")";
  return out + ": " + FindingKindName(f.kind) + ": " + f.message;
}

namespace {

struct Line {
  uint64_t offset;
  std::string_view text;
  bool terminated;
};

std::vector<Line> SplitLines(std::string_view data) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    bool terminated = nl != std::string_view::npos;
    size_t end = terminated ? nl : data.size();
    lines.push_back({pos, data.substr(pos, end - pos), terminated});
    pos = end + 1;
  }
  return lines;
}

// A line that is not a good record, waiting to see whether a `recovered` record follows.
struct Bad {
  std::string file;
  size_t line;
  uint64_t offset;
  std::optional<uint64_t> seq;
  std::string what;
  bool terminated;
  uint64_t size;     // of the first bad line, without a newline
  size_t count = 1;  // bad lines in a row
};

class ChainCheck {
 public:
  ChainCheck(const SignatureVerifier* verifier, VerifyReport* report)
      : verifier_(verifier), report_(report) {}
  // False once a failure is recorded.
  bool File(const TrailFile& file, std::string_view data, bool last_file);
  void Finish();

 private:
  bool Good(const TrailFile& file, const std::vector<Line>& lines, size_t i, const json& r);
  bool Chain(const TrailFile& file, const std::vector<Line>& lines, size_t i, const json& r);
  bool CheckpointOk(const TrailFile& file, size_t i, const json& r);
  bool Fail(FindingKind kind, const std::string& file, size_t line, std::optional<uint64_t> seq,
            std::string message) {
    report_->failure = Finding{kind, file, line, seq, std::move(message)};
    return false;
  }
  void FailBad() {
    bool cut = !bad_->terminated;
    Fail(cut ? FindingKind::kCut : FindingKind::kEdited, bad_->file, bad_->line, bad_->seq,
         bad_->what);
  }

  const SignatureVerifier* verifier_;
  VerifyReport* report_;
  std::optional<Bad> bad_;
  uint64_t last_seq_ = 0;
  std::string last_hash_{kZeroHash};
  std::set<uint64_t> deleted_up_to_;  // last_seq of files retention deleted
  uint64_t unsigned_checkpoints_ = 0;
  uint64_t last_signed_seq_ = 0;
};

bool ChainCheck::File(const TrailFile& file, std::string_view data, bool last_file) {
  std::vector<Line> lines = SplitLines(data);
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    auto record = ParseRecordLine(line.text);
    bool good = record && RecordHash(*record) == (*record)["hash"].get<std::string>();
    if (good) {
      if (!Good(file, lines, i, *record)) return false;
      continue;
    }
    std::optional<uint64_t> seq;
    if (record) seq = (*record)["seq"].get<uint64_t>();
    if (!line.terminated && last_file)
      return Fail(FindingKind::kCut, file.name, i + 1, seq ? seq : last_seq_ + 1,
                  "the last line is cut off (" + std::to_string(line.text.size()) +
                      " bytes without a newline) after seq " + std::to_string(last_seq_));
    if (bad_) {
      ++bad_->count;
      continue;
    }
    std::string what = record ? "the hash does not match the record's content"
                              : "the line is not a record (" + record.error().message + ")";
    bad_ = Bad{file.name, i + 1,           line.offset,     seq ? seq : last_seq_ + 1,
               what,      line.terminated, line.text.size()};
  }
  return true;
}

bool ChainCheck::Good(const TrailFile& file, const std::vector<Line>& lines, size_t i,
                      const json& r) {
  const std::string& type = r["type"].get_ref<const std::string&>();
  if (bad_) {
    // A `recovered` record excuses exactly the torn write it names, nothing else.
    bool excused =
        type == "recovered" && BoolField(r, "torn") && bad_->count == 1 &&
        StringField(r, "file") == bad_->file && UintField(r, "cut_offset") == bad_->offset &&
        UintField(r, "cut_bytes") == bad_->size && UintField(r, "after_seq") == last_seq_;
    if (!excused) {
      FailBad();
      return false;
    }
    report_->notes.push_back("cut at " + bad_->file + ":" + std::to_string(bad_->line) +
                             " (offset " + std::to_string(bad_->offset) + ") after seq " +
                             std::to_string(last_seq_) + "; recovered at seq " +
                             std::to_string(r["seq"].get<uint64_t>()) + " (" + file.name + ":" +
                             std::to_string(i + 1) + ")");
    bad_.reset();
  }
  if (!Chain(file, lines, i, r)) return false;
  // A server that ended without server.stop (kill -9): the next one's `recovered` names it.
  if (type == "recovered" && r.contains("stopped_server"))
    report_->notes.push_back("server " + StringField(r, "stopped_server") +
                             " stopped without server.stop after seq " +
                             std::to_string(UintField(r, "after_seq")) + "; recovered at seq " +
                             std::to_string(r["seq"].get<uint64_t>()) + " (" + file.name + ":" +
                             std::to_string(i + 1) + ")");
  if (type == "checkpoint" && !CheckpointOk(file, i, r)) return false;
  if (type == "audit.deleted") deleted_up_to_.insert(UintField(r, "last_seq"));
  last_seq_ = r["seq"].get<uint64_t>();
  last_hash_ = r["hash"].get<std::string>();
  if (report_->records++ == 0) report_->first_seq = last_seq_;
  report_->last_seq = last_seq_;
  return true;
}

// The seq and prev links from the record before.
bool ChainCheck::Chain(const TrailFile& file, const std::vector<Line>& lines, size_t i,
                       const json& r) {
  const uint64_t seq = r["seq"].get<uint64_t>();
  if (report_->records == 0) {
    if (seq == 1 && r["prev"] != kZeroHash)
      return Fail(FindingKind::kEdited, file.name, i + 1, seq,
                  "the first record's prev is not 64 zeros");
    return true;
  }
  const uint64_t want = last_seq_ + 1;
  if (seq < want)
    return Fail(FindingKind::kReordered, file.name, i + 1, seq,
                "seq " + std::to_string(seq) + " comes after seq " + std::to_string(last_seq_));
  if (seq > want) {
    for (size_t j = i + 1; j < lines.size(); ++j) {
      auto later = ParseRecordLine(lines[j].text);
      if (later && (*later)["seq"].get<uint64_t>() == want)
        return Fail(FindingKind::kReordered, file.name, i + 1, seq,
                    "seq " + std::to_string(seq) + " comes before seq " + std::to_string(want) +
                        " (line " + std::to_string(j + 1) + ")");
    }
    return Fail(FindingKind::kRemoved, file.name, i + 1, want,
                "records " + std::to_string(want) + ".." + std::to_string(seq - 1) +
                    " are missing before seq " + std::to_string(seq));
  }
  if (r["prev"] != last_hash_)
    return Fail(FindingKind::kEdited, file.name, i + 1, seq,
                "prev is not the hash of seq " + std::to_string(last_seq_) +
                    " (that record was rewritten, or this one replaced)");
  return true;
}

bool ChainCheck::CheckpointOk(const TrailFile& file, size_t i, const json& r) {
  const uint64_t seq = r["seq"].get<uint64_t>();
  ++report_->checkpoints;
  if (StringField(r, "signed_hash") != r["prev"].get<std::string>() ||
      UintField(r, "signed_seq") != seq - 1)
    return Fail(FindingKind::kEdited, file.name, i + 1, seq,
                "the checkpoint does not name the record before it");
  if (!verifier_) {
    if (!r.contains("signature")) ++unsigned_checkpoints_;
    return true;
  }
  if (!r.contains("signature") || !r["signature"].is_string())
    return Fail(FindingKind::kBadSignature, file.name, i + 1, seq,
                "the checkpoint is not signed, but a public key was given");
  Status s =
      verifier_->Verify(r["signed_hash"].get<std::string>(), r["signature"].get<std::string>());
  if (!s) return Fail(FindingKind::kBadSignature, file.name, i + 1, seq, s.error().message);
  ++report_->signatures_verified;
  last_signed_seq_ = seq;
  return true;
}

void ChainCheck::Finish() {
  if (report_->failure) return;
  if (bad_) return FailBad();
  if (report_->records == 0) return;
  const uint64_t first = report_->first_seq;
  if (first != 1) {
    if (!deleted_up_to_.count(first - 1)) {
      Fail(FindingKind::kRemoved, "", 1, 1,
           "the trail starts at seq " + std::to_string(first) + "; records 1.." +
               std::to_string(first - 1) + " are gone and no audit.deleted record says why");
      return;
    }
    report_->notes.push_back("records 1.." + std::to_string(first - 1) +
                             " were deleted by retention");
  }
  if (!verifier_ && report_->checkpoints > unsigned_checkpoints_)
    report_->notes.push_back(std::to_string(report_->checkpoints - unsigned_checkpoints_) +
                             " checkpoint signature(s) not checked (no public key given)");
  if (verifier_ && last_signed_seq_ < report_->last_seq)
    report_->notes.push_back("records after seq " + std::to_string(last_signed_seq_) +
                             " are not covered by a signed checkpoint yet");
}

}  // namespace

Result<VerifyReport> VerifyTrail(const std::string& dir, const SignatureVerifier* verifier) {
  auto files = ListTrailFiles(dir);
  if (!files) return files.error();
  VerifyReport report;
  ChainCheck check(verifier, &report);
  for (size_t i = 0; i < files->size(); ++i) {
    const TrailFile& file = (*files)[i];
    std::ifstream in(file.path, std::ios::binary);
    if (!in) return Error::Sys("open(\"" + file.path + "\")");
    std::stringstream buf;
    buf << in.rdbuf();
    std::string data = buf.str();
    ++report.files;
    if (!check.File(file, data, i + 1 == files->size())) return report;
  }
  check.Finish();
  return report;
}

}  // namespace mcpcell::audit
