// The cgroup freezer against fake cgroupfs trees in a temp dir: v2 writes cgroup.freeze
// and waits for cgroup.events' "frozen"; v1 writes freezer.state and waits to read it back.
// A state the kernel never reaches (a plain file that does not change) ends in an error
// naming the file, and a freeze that timed out is undone. The real freezer is exercised
// on a real cell by tests/integration/cell_pause_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/cgroup_fs.h"

namespace mcpcell::sandbox {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class FreezerTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcpcell-freezer-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }
  std::string root_;
};

TEST_F(FreezerTree, V2FreezeWritesTheFileAndReturnsOnceEventsSayFrozen) {
  Spit(root_ + "/cgroup.freeze", "0\n");
  Spit(root_ + "/cgroup.events", "populated 1\nfrozen 1\n");
  std::unique_ptr<Cgroup> cg = cgroupfs::OpenExistingV2(root_);
  Status frozen = cg->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message;
  EXPECT_EQ(Slurp(root_ + "/cgroup.freeze"), "1\n");  // written over the old "0\n"
  Spit(root_ + "/cgroup.events", "populated 1\nfrozen 0\n");
  Status thawed = cg->Thaw();
  ASSERT_TRUE(thawed.ok()) << thawed.error().message;
  EXPECT_EQ(Slurp(root_ + "/cgroup.freeze"), "0\n");
}

TEST_F(FreezerTree, V2FreezeThatNeverCompletesNamesTheFileAndThawsAgain) {
  Spit(root_ + "/cgroup.freeze", "0\n");
  Spit(root_ + "/cgroup.events", "populated 1\nfrozen 0\n");
  Status s = cgroupfs::SetFrozenV2(root_, true, 20);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(root_ + "/cgroup.events: still \"frozen 0\""), std::string::npos)
      << s.error().message;
  EXPECT_EQ(Slurp(root_ + "/cgroup.freeze"), "0\n");  // not left half frozen
}

TEST_F(FreezerTree, V2WithoutTheFreezerCannotPauseAndSaysWhy) {
  std::unique_ptr<Cgroup> cg = cgroupfs::OpenExistingV2(root_);
  Status s = cg->Freeze();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cgroup.freeze: missing"), std::string::npos);
  EXPECT_TRUE(cg->Thaw().ok());  // nothing to thaw
}

TEST_F(FreezerTree, V2EventsWithoutAFrozenKeyIsAnError) {
  Spit(root_ + "/cgroup.freeze", "0\n");
  Spit(root_ + "/cgroup.events", "populated 1\n");
  Status s = cgroupfs::SetFrozenV2(root_, true, 20);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cgroup.events"), std::string::npos) << s.error().message;
}

TEST_F(FreezerTree, V1FreezeAndThawWriteFreezerState) {
  for (const char* c : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    mkdir((root_ + "/" + c).c_str(), 0755);
  }
  Spit(root_ + "/freezer/freezer.state", "THAWED\n");
  std::vector<std::pair<std::string, std::string>> dirs;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    dirs.emplace_back(c, root_ + "/" + c);
  }
  std::unique_ptr<Cgroup> cg = cgroupfs::OpenExistingV1(dirs);
  Status frozen = cg->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message;
  EXPECT_EQ(Slurp(root_ + "/freezer/freezer.state"), "FROZEN\n");
  Status thawed = cg->Thaw();
  ASSERT_TRUE(thawed.ok()) << thawed.error().message;
  EXPECT_EQ(Slurp(root_ + "/freezer/freezer.state"), "THAWED\n");
}

// The kernel can leave a v1 freeze at FREEZING until FROZEN is written again; here a
// thread plays that kernel for a while, putting FREEZING back over every write.
TEST_F(FreezerTree, V1FreezeStuckAtFreezingIsWrittenAgainUntilItHolds) {
  const std::string file = root_ + "/freezer.state";
  Spit(file, "THAWED\n");
  std::atomic<bool> stop{false};
  std::thread kernel([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
    while (!stop && std::chrono::steady_clock::now() < until) {
      Spit(file, "FREEZING\n");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // A plain file keeps the tail of a longer text under a shorter write ("FROZEN" over
    // "FREEZING"), which the kernel's file does not: leave it empty, a state that is not
    // FROZEN either.
    Spit(file, "");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // FREEZING is there first
  Status s = cgroupfs::SetFrozenV1(root_, true, 2000);
  stop = true;
  kernel.join();
  // Without the rewrite the file would stay empty once the thread stopped.
  ASSERT_TRUE(s.ok()) << s.error().message;
}

TEST_F(FreezerTree, V1WithoutAFreezerFileNamesIt) {
  mkdir((root_ + "/freezer").c_str(), 0755);
  Status s = cgroupfs::SetFrozenV1(root_ + "/freezer", true, 20);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("freezer.state"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace mcpcell::sandbox
