// Rotation by size and age keeps one chain across files; retention deletes whole old files
// from the front and records each deletion.
#include <gtest/gtest.h>

#include <memory>

#include "audit/trail.h"
#include "audit/trail_files.h"
#include "audit/verify.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;
using testing::ReadLines;
using testing::TempDir;
using Clock = std::chrono::system_clock;

TEST(RotationTest, BySizeTheChainContinuesIntoTheNextFile) {
  TempDir dir;
  auto options = testing::QuietOptions(dir.path());
  options.rotate_bytes = 1000;
  auto trail = Trail::Open(options);
  ASSERT_TRUE(trail);
  testing::AppendN(trail->get(), 12);
  ASSERT_TRUE((*trail)->Close());
  auto files = ListTrailFiles(dir.path());
  ASSERT_TRUE(files);
  ASSERT_GE(files->size(), 3u);
  for (size_t i = 0; i + 1 < files->size(); ++i) {
    const TrailFile& f = (*files)[i];
    EXPECT_FALSE(f.current);
    auto lines = ReadLines(f.path);
    json first = json::parse(lines.front()), last = json::parse(lines.back());
    EXPECT_EQ(first["seq"], f.first_seq);
    EXPECT_EQ(f.name.rfind("audit-" + std::to_string(f.first_seq) + "-", 0), 0u) << f.name;
    EXPECT_EQ(last["type"], "checkpoint");  // each rotated file ends sealed
    json next_first = json::parse(ReadLines((*files)[i + 1].path).front());
    EXPECT_EQ(next_first["type"], "audit.rotated");
    EXPECT_EQ(next_first["prev"], last["hash"]);
    EXPECT_EQ(next_first["seq"], last["seq"].get<uint64_t>() + 1);
    EXPECT_EQ(next_first["file"], f.name);
    EXPECT_EQ(next_first["last_hash"], last["hash"]);
  }
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  EXPECT_EQ(report->files, files->size());
}

TEST(RotationTest, ByAgeTheFileIsNamedAfterItsFirstRecordsTime) {
  TempDir dir;
  auto now = std::make_shared<Clock::time_point>(Clock::time_point(std::chrono::hours(490000)));
  auto options = testing::QuietOptions(dir.path());
  options.rotate_age = std::chrono::hours(24);
  options.clock = [now] { return *now; };
  const Clock::time_point start = *now;
  auto trail = Trail::Open(options);
  ASSERT_TRUE(trail);
  testing::AppendN(trail->get(), 2);
  *now += std::chrono::hours(23);
  testing::AppendN(trail->get(), 1);
  EXPECT_EQ(ListTrailFiles(dir.path())->size(), 1u);
  *now += std::chrono::hours(2);
  testing::AppendN(trail->get(), 1);
  auto files = ListTrailFiles(dir.path());
  ASSERT_TRUE(files);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].name, "audit-1-" + FormatCompactTime(start) + ".jsonl");
  ASSERT_TRUE((*trail)->Close());
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
}

TEST(RetentionTest, DeletesOldRotatedFilesAndRecordsEachDeletion) {
  TempDir dir;
  auto now = std::make_shared<Clock::time_point>(Clock::now());
  auto options = testing::QuietOptions(dir.path());
  options.rotate_bytes = 1000;
  options.retention = std::chrono::hours(24);
  options.clock = [now] { return *now; };
  auto trail = Trail::Open(options);
  ASSERT_TRUE(trail);
  testing::AppendN(trail->get(), 12);
  auto before = ListTrailFiles(dir.path());
  ASSERT_TRUE(before);
  ASSERT_GE(before->size(), 3u);
  ASSERT_TRUE((*trail)->EnforceRetention());  // nothing is a day old yet
  EXPECT_EQ(ListTrailFiles(dir.path())->size(), before->size());

  *now += std::chrono::hours(48);
  ASSERT_TRUE((*trail)->EnforceRetention());
  auto after = ListTrailFiles(dir.path());
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_TRUE((*after)[0].current);
  auto lines = ReadLines((*after)[0].path);
  std::vector<json> deleted;
  for (const auto& l : lines)
    if (json r = json::parse(l); r["type"] == "audit.deleted") deleted.push_back(r);
  ASSERT_EQ(deleted.size(), before->size() - 1);
  for (size_t i = 0; i < deleted.size(); ++i) {
    EXPECT_EQ(deleted[i]["file"], (*before)[i].name);
    EXPECT_EQ(deleted[i]["first_seq"], (*before)[i].first_seq);
    EXPECT_EQ(deleted[i]["reason"], "retention");
  }
  EXPECT_EQ(deleted.back()["last_seq"].get<uint64_t>() + 1,
            json::parse(lines.front())["seq"].get<uint64_t>());
  ASSERT_TRUE((*trail)->Close());

  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  ASSERT_FALSE(report->notes.empty());
  EXPECT_NE(report->notes[0].find("deleted by retention"), std::string::npos);
}

TEST(RetentionTest, ARotatedFileRemovedByHandIsFound) {
  TempDir dir;
  auto options = testing::QuietOptions(dir.path());
  options.rotate_bytes = 1000;
  {
    auto trail = Trail::Open(options);
    ASSERT_TRUE(trail);
    testing::AppendN(trail->get(), 12);
  }
  auto files = ListTrailFiles(dir.path());
  ASSERT_TRUE(files);
  ASSERT_GE(files->size(), 3u);
  ASSERT_EQ(::unlink((*files)[1].path.c_str()), 0);
  auto report = VerifyTrail(dir.path(), nullptr);
  ASSERT_TRUE(report);
  ASSERT_FALSE(report->ok());
  EXPECT_EQ(report->failure->kind, FindingKind::kRemoved);
  EXPECT_EQ(report->failure->file, (*files)[2].name);
  EXPECT_EQ(report->failure->seq, (*files)[1].first_seq);
}

}  // namespace
}  // namespace mcpcell::audit
