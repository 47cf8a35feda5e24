#include "audit/query.h"

#include <gtest/gtest.h>

#include "audit/trail.h"
#include "audit/trail_files.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;

json Rec(const std::string& type, const std::string& tenant, const std::string& session,
         const std::string& time) {
  return {{"seq", 7},
          {"time", time},
          {"type", type},
          {"tenant", tenant},
          {"session", session},
          {"cell", "c"},
          {"prev", std::string(kZeroHash)},
          {"hash", std::string(64, 'a')}};
}

// A filter with one member set.
template <typename T, typename V>
QueryFilter F(T QueryFilter::*member, V value) {
  QueryFilter f;
  f.*member = value;
  return f;
}

TEST(QueryFilterTest, MatchesTenantSessionTypeAndTimeRange) {
  json r = Rec("exec.start", "acme", "s1", "2026-12-02T10:00:00.000Z");
  EXPECT_TRUE(Matches(r, QueryFilter{}));
  EXPECT_TRUE(Matches(r, F(&QueryFilter::tenant, "acme")));
  EXPECT_FALSE(Matches(r, F(&QueryFilter::tenant, "other")));
  EXPECT_FALSE(Matches(r, F(&QueryFilter::session, "s2")));
  EXPECT_TRUE(Matches(r, F(&QueryFilter::type, "exec.start")));
  EXPECT_TRUE(Matches(r, F(&QueryFilter::type, "exec.")));
  EXPECT_TRUE(Matches(r, F(&QueryFilter::type, "exec*")));
  EXPECT_FALSE(Matches(r, F(&QueryFilter::type, "exec")));  // exact unless it ends with '.' or '*'
  EXPECT_FALSE(Matches(r, F(&QueryFilter::type, "file.")));
  int64_t t = ParseTimeMs("2026-12-02T10:00:00Z").value();
  EXPECT_TRUE(Matches(r, F(&QueryFilter::since_ms, t)));
  EXPECT_FALSE(Matches(r, F(&QueryFilter::since_ms, t + 1)));
  EXPECT_TRUE(Matches(r, F(&QueryFilter::until_ms, t + 1)));
  EXPECT_FALSE(Matches(r, F(&QueryFilter::until_ms, t)));
}

TEST(VisibleTest, AnOperatorSeesOnlyItsTenantsRecords) {
  json acme = Rec("exec.start", "acme", "s1", "2026-12-02T10:00:00.000Z");
  json globex = Rec("exec.start", "globex", "s2", "2026-12-02T10:00:00.000Z");
  json trail_own = Rec("checkpoint", "", "", "2026-12-02T10:00:00.000Z");
  TenantScope acme_only{false, {"acme"}};
  EXPECT_TRUE(Visible(acme, acme_only));
  EXPECT_FALSE(Visible(globex, acme_only));
  EXPECT_FALSE(Visible(trail_own, acme_only));
  TenantScope all{true, {}};
  EXPECT_TRUE(Visible(globex, all));
  EXPECT_TRUE(Visible(trail_own, all));
}

TEST(OcsfTest, MapsClassActivityTimeAndKeepsTheRecord) {
  json r = Rec("exec.end", "acme", "s1", "2026-12-02T10:00:00.250Z");
  r["exit_status"] = 0;
  json o = ToOcsf(r);
  EXPECT_EQ(o["class_uid"], 1007);
  EXPECT_EQ(o["category_uid"], 1);
  EXPECT_EQ(o["activity_id"], 2);
  EXPECT_EQ(o["type_uid"], 100702);
  EXPECT_EQ(o["time"], ParseTimeMs("2026-12-02T10:00:00.250Z").value());
  EXPECT_EQ(o["metadata"]["sequence"], 7);
  EXPECT_EQ(o["metadata"]["uid"], r["hash"]);
  EXPECT_EQ(o["metadata"]["tenant_uid"], "acme");
  EXPECT_EQ(o["unmapped"], r);
  EXPECT_EQ(ToOcsf(Rec("file.delete", "", "", ""))["type_uid"], 100104);
  EXPECT_EQ(ToOcsf(Rec("auth.refused", "", "", ""))["class_uid"], 3002);
  EXPECT_EQ(ToOcsf(Rec("checkpoint", "", "", ""))["class_uid"], 6002);
}

TEST(ForEachRecordTest, ReadsEveryFileInOrderAndCountsLinesThatAreNotRecords) {
  testing::TempDir dir;
  auto options = testing::QuietOptions(dir.path());
  options.rotate_bytes = 1000;
  {
    auto trail = Trail::Open(options);
    ASSERT_TRUE(trail);
    testing::AppendN(trail->get(), 10);
  }
  std::string path = testing::CurrentPath(dir.path());
  testing::WriteFile(path, testing::ReadFile(path) + "garbage\n");
  std::vector<uint64_t> seqs;
  uint64_t skipped = 0;
  ASSERT_TRUE(ForEachRecord(
      dir.path(), [&](const json& r) { seqs.push_back(r["seq"]); }, &skipped));
  EXPECT_EQ(skipped, 1u);
  ASSERT_FALSE(seqs.empty());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
  EXPECT_FALSE(ForEachRecord(
      dir.path() + "/missing", [](const json&) {}, nullptr));
}

TEST(ForEachRecordTest, NewestFirstReadsFromTheCurrentFileBackAndStopsWhenAsked) {
  testing::TempDir dir;
  auto options = testing::QuietOptions(dir.path());
  options.rotate_bytes = 1000;  // several rotated files: the order crosses them
  {
    auto trail = Trail::Open(options);
    ASSERT_TRUE(trail);
    testing::AppendN(trail->get(), 10);
  }
  std::vector<uint64_t> forward;
  ASSERT_TRUE(ForEachRecord(
      dir.path(), [&](const json& r) { forward.push_back(r["seq"]); }, nullptr));
  ASSERT_GE(ListTrailFiles(dir.path())->size(), 2u);
  std::string path = testing::CurrentPath(dir.path());
  testing::WriteFile(path, testing::ReadFile(path) + "garbage\n");

  std::vector<uint64_t> backward;
  uint64_t skipped = 0;
  ASSERT_TRUE(ForEachRecordNewestFirst(
      dir.path(),
      [&](const json& r) {
        backward.push_back(r["seq"]);
        return true;
      },
      &skipped));
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(backward, std::vector<uint64_t>(forward.rbegin(), forward.rend()));

  std::vector<uint64_t> newest3;
  ASSERT_TRUE(ForEachRecordNewestFirst(
      dir.path(),
      [&](const json& r) {
        newest3.push_back(r["seq"]);
        return newest3.size() < 3;
      },
      nullptr));
  const uint64_t last = forward.back();
  EXPECT_EQ(newest3, (std::vector<uint64_t>{last, last - 1, last - 2}));
  EXPECT_FALSE(ForEachRecordNewestFirst(
      dir.path() + "/missing", [](const json&) { return true; }, nullptr));
}

}  // namespace
}  // namespace mcpcell::audit
