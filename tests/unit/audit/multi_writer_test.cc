// Several writers on one trail (trail.h): Trail objects in one process and Trail objects
// in two processes append interleaved, rotate under each other, and the result is one
// chain that verifies, with every seq once and each record's `server` its writer's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>

#include "audit/trail.h"
#include "audit/trail_files.h"
#include "audit/verify.h"
#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;
using testing::QuietOptions;
using testing::ReadLines;
using testing::TempDir;

// The error of a failed Status, for assertion messages.
std::string Why(const Status& s) { return s ? "" : s.error().message; }

TrailOptions WriterOptions(const std::string& dir, const std::string& server) {
  TrailOptions o = QuietOptions(dir);
  o.server = server;
  return o;
}

// Every record of the trail in dir, rotated files first, then the current one.
std::vector<json> AllRecords(const std::string& dir) {
  std::vector<json> records;
  auto files = ListTrailFiles(dir);
  EXPECT_TRUE(files);
  for (const TrailFile& f : *files)
    for (const std::string& line : ReadLines(f.path)) records.push_back(json::parse(line));
  return records;
}

// The trail verifies, each seq from 1 on appears once, and the records count by server.
std::map<std::string, int> ExpectOneChain(const std::string& dir) {
  auto report = VerifyTrail(dir, nullptr);
  EXPECT_TRUE(report);
  EXPECT_TRUE(report->ok()) << Describe(*report->failure);
  std::map<std::string, int> by_server;
  std::set<uint64_t> seqs;
  for (const json& r : AllRecords(dir)) {
    EXPECT_TRUE(seqs.insert(r["seq"].get<uint64_t>()).second) << "seq twice: " << r.dump();
    if (r["type"] == "exec.start") ++by_server[r.value("server", "")];
  }
  EXPECT_EQ(seqs.size(), seqs.empty() ? 0 : *seqs.rbegin());
  return by_server;
}

TEST(MultiWriterTest, TwoTrailsAppendingInTurnMakeOneChain) {
  TempDir dir;
  {
    auto a = Trail::Open(WriterOptions(dir.path(), "aaaa0001"));
    auto b = Trail::Open(WriterOptions(dir.path(), "bbbb0002"));
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(Why((*a)->Append("exec.start", "t", "s1", "c", {{"i", i}})), "");
      ASSERT_EQ(Why((*b)->Append("exec.start", "t", "s1", "c", {{"i", i}})), "");
      ASSERT_EQ(Why((*b)->Append("exec.start", "t", "s2", "c", {{"i", i}})), "");
    }
    EXPECT_EQ((*a)->last_seq(), 148u);  // its own last record: b wrote two after it
    EXPECT_EQ((*b)->last_seq(), 150u);
  }
  auto by_server = ExpectOneChain(dir.path());
  EXPECT_EQ(by_server["aaaa0001"], 50);
  EXPECT_EQ(by_server["bbbb0002"], 100);
}

TEST(MultiWriterTest, AWriterFollowsAnotherWritersRotation) {
  TempDir dir;
  {
    auto small = WriterOptions(dir.path(), "aaaa0001");
    small.rotate_bytes = 4096;
    auto a = Trail::Open(small);
    auto b = Trail::Open(WriterOptions(dir.path(), "bbbb0002"));
    ASSERT_TRUE(a && b);
    for (int i = 0; i < 120; ++i) {
      ASSERT_EQ(Why((*a)->Append("exec.start", "t", "s", "c", {{"i", i}})), "");
      ASSERT_EQ(Why((*b)->Append("exec.start", "t", "s", "c", {{"i", i}})), "");
    }
  }
  auto files = ListTrailFiles(dir.path());
  ASSERT_TRUE(files);
  EXPECT_GT(files->size(), 3u);  // rotated by a while b kept appending
  auto by_server = ExpectOneChain(dir.path());
  EXPECT_EQ(by_server["aaaa0001"], 120);
  EXPECT_EQ(by_server["bbbb0002"], 120);
}

TEST(MultiWriterTest, TwoProcessesAppendingAtOnceMakeOneChain) {
  TempDir dir;
  constexpr int kEach = 400;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child reports through its exit status only (gtest's asserts stay in the parent).
    auto trail = Trail::Open(WriterOptions(dir.path(), "cccc0003"));
    if (!trail) _exit(2);
    for (int i = 0; i < kEach; ++i)
      if (!(*trail)->Append("exec.start", "t", "s1", "c", {{"i", i}})) _exit(3);
    _exit((*trail)->Close() ? 0 : 4);
  }
  {
    auto trail = Trail::Open(WriterOptions(dir.path(), "pppp0004"));
    ASSERT_TRUE(trail) << trail.error().message;
    for (int i = 0; i < kEach; ++i)
      ASSERT_EQ(Why((*trail)->Append("exec.start", "t", "s1", "c", {{"i", i}})), "");
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto by_server = ExpectOneChain(dir.path());
  EXPECT_EQ(by_server["cccc0003"], kEach);
  EXPECT_EQ(by_server["pppp0004"], kEach);
}

TEST(MultiWriterTest, AppendForNamesTheOtherServer) {
  TempDir dir;
  {
    auto a = Trail::Open(WriterOptions(dir.path(), "aaaa0001"));
    ASSERT_TRUE(a);
    ASSERT_TRUE((*a)->AppendFor("dead0000", "session.end", "t", "s1", "", {{"reason", "x"}}));
  }
  auto records = AllRecords(dir.path());
  ASSERT_GE(records.size(), 1u);
  EXPECT_EQ(records[0]["server"], "dead0000");
  EXPECT_EQ(records[0]["type"], "session.end");
}

}  // namespace
}  // namespace mcpcell::audit
