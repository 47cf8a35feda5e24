// Each kind of tampering is found, and the finding names the record.
#include <gtest/gtest.h>

#include "audit/trail.h"
#include "audit/verify.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;
using testing::CurrentPath;
using testing::ReadLines;
using testing::TempDir;
using testing::WriteLines;

// A closed trail of 6 records (5 events and the checkpoint of Close) in dir.
std::vector<std::string> MakeTrail(const std::string& dir) {
  auto trail = Trail::Open(testing::QuietOptions(dir));
  EXPECT_TRUE(trail);
  testing::AppendN(trail->get(), 5);
  EXPECT_TRUE((*trail)->Close());
  return ReadLines(CurrentPath(dir));
}

Finding FirstFinding(const std::string& dir, const SignatureVerifier* verifier = nullptr) {
  auto report = VerifyTrail(dir, verifier);
  EXPECT_TRUE(report) << report.error().message;
  if (!report || report->ok()) {
    ADD_FAILURE() << "the trail verified";
    return Finding{FindingKind::kEdited, "", 0, std::nullopt, ""};
  }
  return *report->failure;
}

TEST(TamperTest, AnUntouchedTrailVerifies) {
  TempDir dir;
  MakeTrail(dir.path());
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->first_seq, 1u);
  EXPECT_EQ(report->last_seq, 6u);
}

TEST(TamperTest, AnEditedFieldIsNamedByLineAndSeq) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  json r = json::parse(lines[2]);
  r["tenant"] = "someone-else";
  lines[2] = CanonicalJson(r);
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.file, "audit.jsonl");
  EXPECT_EQ(f.line, 3u);
  EXPECT_EQ(f.seq, 3u);
  EXPECT_EQ(Describe(f),
            "audit.jsonl:3 (seq 3): edited: the hash does not match the record's content");
}

TEST(TamperTest, AnEditedAndRehashedRecordBreaksTheLinkAfterIt) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  json r = json::parse(lines[1]);
  r["tool"] = "other";
  lines[1] = CanonicalJson(r);
  std::vector<std::string> only_that = lines;
  testing::Rehash(&only_that, 1);  // re-hashes everything from line 2 on...
  only_that.resize(2);             // ...but keeps the original records after it
  only_that.insert(only_that.end(), lines.begin() + 2, lines.end());
  WriteLines(CurrentPath(dir.path()), only_that);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.line, 3u);
  EXPECT_EQ(f.seq, 3u);
  EXPECT_NE(f.message.find("prev is not the hash of seq 2"), std::string::npos);
}

TEST(TamperTest, ADeletedLineIsNamedAsTheMissingSeq) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  lines.erase(lines.begin() + 3);  // seq 4
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kRemoved);
  EXPECT_EQ(f.line, 4u);
  EXPECT_EQ(f.seq, 4u);
  EXPECT_NE(f.message.find("records 4..4 are missing before seq 5"), std::string::npos);
}

TEST(TamperTest, TwoSwappedLinesAreNamedAsReordered) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  std::swap(lines[1], lines[2]);  // seq 3 before seq 2
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kReordered);
  EXPECT_EQ(f.line, 2u);
  EXPECT_EQ(f.seq, 3u);
  EXPECT_NE(f.message.find("seq 3 comes before seq 2 (line 3)"), std::string::npos);
}

TEST(TamperTest, ACutLastLineIsNamed) {
  TempDir dir;
  MakeTrail(dir.path());
  std::string data = testing::ReadFile(CurrentPath(dir.path()));
  testing::WriteFile(CurrentPath(dir.path()), data.substr(0, data.size() - 20));
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kCut);
  EXPECT_EQ(f.line, 6u);
  EXPECT_EQ(f.seq, 6u);
}

TEST(TamperTest, AGarbledLineInTheMiddleIsNamed) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  lines[4] = "{\"not\": \"a record\"}";
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.line, 5u);
  EXPECT_EQ(f.seq, 5u);
  EXPECT_NE(f.message.find("not a record"), std::string::npos);
}

TEST(TamperTest, AForgedRecoveredRecordDoesNotExcuseAnEdit) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  json r = json::parse(lines[3]);
  r["tool"] = "edited";
  lines[3] = CanonicalJson(r);  // seq 4, hash now wrong
  json forged = json::parse(lines[4]);
  forged["type"] = "recovered";
  forged["file"] = "audit.jsonl";
  forged["torn"] = true;
  forged["after_seq"] = 3;
  forged["cut_offset"] = 0;
  forged["cut_bytes"] = 1;
  lines[4] = CanonicalJson(forged);
  testing::Rehash(&lines, 4);
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.line, 4u);
}

TEST(TamperTest, RemovingTheFirstRecordsIsFound) {
  TempDir dir;
  auto lines = MakeTrail(dir.path());
  lines.erase(lines.begin(), lines.begin() + 2);
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kRemoved);
  EXPECT_NE(f.message.find("starts at seq 3"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::audit

namespace mcpcell::audit {
namespace {

// Trail files are input: fields of the wrong type are findings, never exceptions.
TEST(TamperTest, FieldsOfTheWrongTypeAreFindingsNotCrashes) {
  TempDir dir;
  auto original = MakeTrail(dir.path());
  auto lines = original;
  json r = json::parse(lines[2]);
  r["type"] = "recovered";
  r["file"] = json::array();
  r["torn"] = "yes";
  r["cut_offset"] = -1;
  lines[2] = CanonicalJson(r);
  testing::Rehash(&lines, 2);
  lines[1] = "{\"broken\":";
  WriteLines(CurrentPath(dir.path()), lines);
  Finding f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.line, 2u);

  lines = original;
  json cp = json::parse(lines.back());
  ASSERT_EQ(cp["type"], "checkpoint");
  cp["signed_hash"] = 5;
  cp["signed_seq"] = "five";
  lines.back() = CanonicalJson(cp);
  testing::Rehash(&lines, lines.size() - 1);
  WriteLines(CurrentPath(dir.path()), lines);
  f = FirstFinding(dir.path());
  EXPECT_EQ(f.kind, FindingKind::kEdited);
  EXPECT_EQ(f.line, lines.size());
  EXPECT_NE(f.message.find("does not name the record before it"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::audit
