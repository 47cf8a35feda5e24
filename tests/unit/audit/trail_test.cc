#include "audit/trail.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "audit/trail_files.h"
#include "audit/verify.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;
using testing::AppendN;
using testing::CurrentPath;
using testing::QuietOptions;
using testing::ReadLines;
using testing::TempDir;

TEST(TrailTest, WritesOneChainedCanonicalRecordPerLine) {
  TempDir dir;
  {
    auto trail = Trail::Open(QuietOptions(dir.path()));
    ASSERT_TRUE(trail) << trail.error().message;
    ASSERT_TRUE((*trail)->Append("session.start", "acme", "s-1", "c-1",
                                 {{"transport", "stdio"}, {"policy", "default"}}));
    ASSERT_TRUE((*trail)->Append("session.end", "acme", "s-1", "", {{"reason", "client closed"}}));
  }
  auto lines = ReadLines(CurrentPath(dir.path()));
  ASSERT_EQ(lines.size(), 3u);  // two records and the checkpoint of Close
  json first = json::parse(lines[0]), second = json::parse(lines[1]);
  EXPECT_EQ(lines[0], CanonicalJson(first));
  EXPECT_EQ(first["seq"], 1);
  EXPECT_EQ(first["type"], "session.start");
  EXPECT_EQ(first["tenant"], "acme");
  EXPECT_EQ(first["transport"], "stdio");
  EXPECT_EQ(first["prev"], std::string(kZeroHash));
  EXPECT_EQ(first["hash"], RecordHash(first));
  EXPECT_EQ(second["seq"], 2);
  EXPECT_EQ(second["prev"], first["hash"]);
  EXPECT_EQ(second["cell"], "");
  json checkpoint = json::parse(lines[2]);
  EXPECT_EQ(checkpoint["type"], "checkpoint");
  EXPECT_EQ(checkpoint["signed_hash"], second["hash"]);
  EXPECT_FALSE(checkpoint.contains("signature"));
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  EXPECT_EQ(report->records, 3u);
}

TEST(TrailTest, RefusesFieldsThatUseTheRecordsOwnNames) {
  TempDir dir;
  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail);
  Status s = (*trail)->Append("exec.start", "t", "s", "c", {{"hash", "x"}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("\"hash\""), std::string::npos);
  EXPECT_FALSE((*trail)->Append("exec.start", "t", "s", "c", json::array()));
  EXPECT_EQ((*trail)->last_seq(), 0u);
}

TEST(TrailTest, ReopeningContinuesTheChain) {
  TempDir dir;
  {
    auto trail = Trail::Open(QuietOptions(dir.path()));
    ASSERT_TRUE(trail);
    AppendN(trail->get(), 3);
  }
  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail);
  EXPECT_EQ((*trail)->last_seq(), 4u);  // 3 records and a checkpoint
  AppendN(trail->get(), 1);
  EXPECT_EQ((*trail)->last_seq(), 5u);
  ASSERT_TRUE((*trail)->Close());
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  EXPECT_TRUE(report->notes.empty());
}

TEST(TrailTest, CheckpointsEveryNRecords) {
  TempDir dir;
  auto options = QuietOptions(dir.path());
  options.checkpoint_every = 3;
  auto trail = Trail::Open(options);
  ASSERT_TRUE(trail);
  AppendN(trail->get(), 7);
  auto lines = ReadLines(CurrentPath(dir.path()));
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(json::parse(lines[3])["type"], "checkpoint");
  EXPECT_EQ(json::parse(lines[7])["type"], "checkpoint");
  EXPECT_EQ(json::parse(lines[7])["signed_seq"], 7);
}

TEST(TrailTest, SinksSeeEachRecordAndItsLine) {
  TempDir dir;
  std::vector<std::string> seen;  // outlives the trail, whose Close still calls the sink
  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail);
  (*trail)->AddSink([&](const json& record, std::string_view line) {
    EXPECT_EQ(CanonicalJson(record), line);
    seen.push_back(record["type"]);
  });
  ASSERT_TRUE((*trail)->Append("file.write", "t", "s", "c", {{"path", "/w/a"}, {"bytes", 3}}));
  ASSERT_TRUE((*trail)->Append("file.read", "t", "s", "c", {{"path", "/w/a"}}));
  EXPECT_EQ(seen, (std::vector<std::string>{"file.write", "file.read"}));
}

TEST(TrailTest, AppendsFromManyThreadsMakeOneChain) {
  TempDir dir;
  {
    auto trail = Trail::Open(QuietOptions(dir.path()));
    ASSERT_TRUE(trail);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { AppendN(trail->get(), 250); });
    for (auto& t : threads) t.join();
  }
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  EXPECT_EQ(report->records, 1001u);
}

// A crash between renaming the full file and the first record of the new one.
TEST(TrailRecoveryTest, AnEmptyCurrentFileContinuesFromTheNewestRotatedFile) {
  TempDir dir;
  auto options = QuietOptions(dir.path());
  options.rotate_bytes = 1000;
  {
    auto trail = Trail::Open(options);
    ASSERT_TRUE(trail);
    AppendN(trail->get(), 8);
  }
  const std::string current = CurrentPath(dir.path());
  const uint64_t first = json::parse(ReadLines(current).front())["seq"];
  std::string newest = dir.path() + "/" + RotatedFileName(first, std::chrono::system_clock::now());
  ASSERT_EQ(::rename(current.c_str(), newest.c_str()), 0);
  testing::WriteFile(current, "");
  const uint64_t last = json::parse(ReadLines(newest).back())["seq"];
  {
    auto trail = Trail::Open(options);
    ASSERT_TRUE(trail) << trail.error().message;
    EXPECT_EQ((*trail)->last_seq(), last);
    AppendN(trail->get(), 1);
  }
  EXPECT_EQ(json::parse(ReadLines(current).front())["seq"], last + 1);
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
}

TEST(TrailRecoveryTest, ACutTailGetsARecoveredRecordAndVerifyNamesTheCut) {
  TempDir dir;
  {
    auto trail = Trail::Open(QuietOptions(dir.path()));
    ASSERT_TRUE(trail);
    AppendN(trail->get(), 4);
  }
  // A crash mid-write: half a record at the end.
  std::string data = testing::ReadFile(CurrentPath(dir.path()));
  const uint64_t cut_at = data.size();
  testing::WriteFile(CurrentPath(dir.path()), data + R"({"seq":6,"time":"2025-)");
  auto before = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(before);
  ASSERT_FALSE(before->ok());
  EXPECT_EQ(before->failure->kind, FindingKind::kCut);
  EXPECT_EQ(before->failure->line, 6u);
  EXPECT_EQ(before->failure->seq, 6u);

  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail) << trail.error().message;
  auto lines = ReadLines(CurrentPath(dir.path()));
  ASSERT_EQ(lines.size(), 7u);
  json recovered = json::parse(lines[6]);
  EXPECT_EQ(recovered["type"], "recovered");
  EXPECT_EQ(recovered["seq"], 6);
  EXPECT_EQ(recovered["after_seq"], 5);
  EXPECT_EQ(recovered["cut_offset"], cut_at);
  EXPECT_EQ(recovered["file"], "audit.jsonl");
  EXPECT_EQ(recovered["prev"], json::parse(lines[4])["hash"]);
  AppendN(trail->get(), 2);
  ASSERT_TRUE((*trail)->Close());

  auto after = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->ok()) << Describe(*after->failure);
  ASSERT_EQ(after->notes.size(), 1u);
  EXPECT_NE(after->notes[0].find("cut at audit.jsonl:6 (offset " + std::to_string(cut_at) +
                                 ") after seq 5; recovered at seq 6"),
            std::string::npos)
      << after->notes[0];
}

TEST(TrailRecoveryTest, AnEditedLastRecordIsRecoveredAfterButStillReported) {
  TempDir dir;
  {
    auto trail = Trail::Open(QuietOptions(dir.path()));
    ASSERT_TRUE(trail);
    AppendN(trail->get(), 3);
  }
  auto lines = ReadLines(CurrentPath(dir.path()));
  lines.back().replace(lines.back().find("checkpoint"), 10, "checkpoinT");
  testing::WriteLines(CurrentPath(dir.path()), lines);
  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail);
  json recovered = json::parse(ReadLines(CurrentPath(dir.path())).back());
  EXPECT_EQ(recovered["type"], "recovered");
  EXPECT_EQ(recovered["after_seq"], 3);
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  ASSERT_FALSE(report->ok());  // `recovered` excuses a cut, not an edited record
  EXPECT_EQ(report->failure->kind, FindingKind::kEdited);
  EXPECT_EQ(report->failure->line, 4u);
}

TEST(TrailHealthTest, AnUnwritableDirectoryIsAnErrorThatNamesIt) {
  TempDir dir;
  testing::WriteFile(dir.path() + "/file", "x");
  auto trail = Trail::Open(QuietOptions(dir.path() + "/file/audit"));
  ASSERT_FALSE(trail);
  EXPECT_NE(trail.error().message.find(dir.path() + "/file/audit"), std::string::npos);
}

// A file size limit makes write(2) stop part-way, as a full disk does.
TEST(TrailHealthTest, AShortWriteLeavesNoTornRecordAndARequiredTrailUnhealthy) {
  TempDir dir;
  auto options = QuietOptions(dir.path());
  options.required = true;
  auto trail = Trail::Open(options);
  ASSERT_TRUE(trail);
  AppendN(trail->get(), 2);
  const std::string before = testing::ReadFile(CurrentPath(dir.path()));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = before.size() + 40;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s = (*trail)->Append("file.write", "t", "s", "c", {{"path", std::string(200, 'p')}});
  bool healthy_while_full = (*trail)->Healthy();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("short write"), std::string::npos) << s.error().message;
  EXPECT_FALSE(healthy_while_full);
  EXPECT_EQ((*trail)->failed_writes(), 1u);
  EXPECT_EQ(testing::ReadFile(CurrentPath(dir.path())), before);  // nothing of it stayed
  EXPECT_EQ((*trail)->last_seq(), 2u);
  ASSERT_TRUE((*trail)->Append("file.write", "t", "s", "c", {{"path", "/w/b"}}));
  EXPECT_TRUE((*trail)->Healthy());
  ASSERT_TRUE((*trail)->Close());
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
}

TEST(TrailHealthTest, ANotRequiredTrailStaysHealthyButCountsFailures) {
  TempDir dir;
  auto trail = Trail::Open(QuietOptions(dir.path()));
  ASSERT_TRUE(trail);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit none = old;
  none.rlim_cur = 0;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &none), 0);
  Status s = (*trail)->Append("file.write", "t", "s", "c", {{"path", "/w/a"}});
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("EFBIG"), std::string::npos) << s.error().message;
  EXPECT_TRUE((*trail)->Healthy());
  EXPECT_EQ((*trail)->failed_writes(), 1u);
  EXPECT_EQ((*trail)->last_error(), s.error().message);
}

}  // namespace
}  // namespace mcpcell::audit
