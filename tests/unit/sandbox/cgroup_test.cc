// cgroups: the file formats (v1 and v2) against a fake cgroupfs tree in a temp dir: limit
// writes, usage parsers, detection of host layouts, the server's placement, and the checks
// of ids, weights and limits. The real cgroupfs of this host: cgroup_real_test.cc; v2
// mechanics on a real cgroup2 mount: cgroup_v2_test.cc.
#include "sandbox/linux/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "sandbox/linux/cgroup_fs.h"
#include "tests/unit/sandbox/cgroup_test_util.h"

namespace mcpcell::sandbox {
namespace {

using cgroup_test::Exists;
using cgroup_test::Slurp;
using cgroup_test::Spit;
using cgroup_test::UniqueId;

// ---- formats, against a fake tree --------------------------------------------------------

TEST(CgroupFormats, V2LimitWrites) {
  CgroupLimits l{256ull << 20, 64, 1500};
  auto w = cgroupfs::V2LimitWrites(l, /*swap_file_present=*/true);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0], std::make_pair(std::string("memory.max"), std::string("268435456")));
  EXPECT_EQ(w[1], std::make_pair(std::string("memory.swap.max"), std::string("0")));
  EXPECT_EQ(w[2], std::make_pair(std::string("pids.max"), std::string("64")));
  EXPECT_EQ(w[3], std::make_pair(std::string("cpu.max"), std::string("15000 10000")));
  EXPECT_TRUE(cgroupfs::V2LimitWrites(CgroupLimits{}, true).empty());
  // A tiny CPU share gets the kernel's minimum quota (1 ms) over a longer period.
  EXPECT_EQ(cgroupfs::V2LimitWrites(CgroupLimits{0, 0, 1}, true)[0].second, "1000 1000000");
}

// 10 ms periods (short bursts at the quota), lengthened only where the quota would fall
// below the kernel's 1 ms; the share itself is exact either way.
TEST(CgroupFormats, CpuBandwidthKeepsTheShareWithShortPeriods) {
  EXPECT_EQ(cgroupfs::kCpuPeriodUs, 10000u);
  for (uint32_t m : {10u, 33u, 99u, 100u, 250u, 1000u, 1500u, 4000u, 1024000u}) {
    const cgroupfs::CpuBandwidth b = cgroupfs::CpuBandwidthFor(m);
    EXPECT_GE(b.quota_us, cgroupfs::kMinCpuQuotaUs) << m;
    EXPECT_GE(b.period_us, cgroupfs::kCpuPeriodUs) << m;
    EXPECT_LE(b.period_us, cgroupfs::kMaxCpuPeriodUs) << m;
    // quota/period within 1% of the share asked for
    const double share = static_cast<double>(b.quota_us) * 1000 / static_cast<double>(b.period_us);
    EXPECT_NEAR(share, m, m * 0.01) << m;
    if (m >= 100) {
      EXPECT_EQ(b.period_us, cgroupfs::kCpuPeriodUs) << m;
    }
  }
  EXPECT_EQ(cgroupfs::CpuBandwidthFor(10).period_us, 100000u);
  EXPECT_EQ(cgroupfs::CpuBandwidthFor(10).quota_us, 1000u);
  EXPECT_EQ(cgroupfs::CpuBandwidthFor(1000).quota_us, 10000u);
}

TEST(CgroupFormats, V1LimitWritesMemoryBeforeMemsw) {
  auto w = cgroupfs::V1LimitWrites(CgroupLimits{64ull << 20, 32, 500}, /*memsw_present=*/true);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0].file, "memory.limit_in_bytes");
  EXPECT_EQ(w[1].file, "memory.memsw.limit_in_bytes");
  EXPECT_EQ(w[1].value, w[0].value);
  EXPECT_EQ(w[2].controller, "pids");
  EXPECT_EQ(w[3].file, "cpu.cfs_period_us");
  EXPECT_EQ(w[3].value, "10000");
  EXPECT_EQ(w[4].value, "5000");
  EXPECT_EQ(cgroupfs::V1LimitWrites(CgroupLimits{1 << 20, 0, 0}, false).size(), 1u);
}

TEST(CgroupFormats, Parsers) {
  EXPECT_EQ(cgroupfs::ParseValue("42\n", "x").value(), 42u);
  EXPECT_EQ(cgroupfs::ParseValue("max\n", "x").value(), UINT64_MAX);
  Result<uint64_t> bad = cgroupfs::ParseValue("12a", "memory.current");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("memory.current"), std::string::npos);
  EXPECT_FALSE(cgroupfs::ParseValue("", "x").ok());
  EXPECT_FALSE(cgroupfs::ParseValue("99999999999999999999999", "x").ok());

  const std::string events = "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n";
  EXPECT_EQ(cgroupfs::ParseKeyed(events, "oom_kill", "f").value(), 1u);
  EXPECT_EQ(cgroupfs::ParseKeyed(events, "oom", "f").value(), 2u);  // not confused with oom_kill
  EXPECT_EQ(cgroupfs::ParseKeyed(events, "max", "f").value(), 7u);
  EXPECT_FALSE(cgroupfs::ParseKeyed(events, "nope", "f").ok());

  auto pids = cgroupfs::ParsePids("12\n345\n\n", "procs");
  ASSERT_TRUE(pids.ok());
  EXPECT_EQ(pids->size(), 2u);
  EXPECT_FALSE(cgroupfs::ParsePids("12\n-1\n", "procs").ok());
  EXPECT_FALSE(cgroupfs::ParsePids("0\n", "procs").ok());

  auto list = cgroupfs::ParseControllerList("cpuset cpu io memory pids\n");
  EXPECT_EQ(list, (std::vector<std::string>{"cpuset", "cpu", "io", "memory", "pids"}));
  EXPECT_TRUE(cgroupfs::ParseControllerList("\n").empty());
}

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcpcell-cgfake-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }
  std::string root_;
};

TEST_F(FakeTree, V2Usage) {
  Spit(root_ + "/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n");
  Spit(root_ + "/memory.current", "1048576\n");
  Spit(root_ + "/memory.peak", "4194304\n");
  Spit(root_ + "/memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n");
  Spit(root_ + "/pids.current", "3\n");
  Spit(root_ + "/pids.events", "max 9\n");
  Result<CgroupUsage> u = cgroupfs::ReadV2Usage(root_);
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->cpu_usage_ns, 2500000u);
  EXPECT_EQ(u->memory_current_bytes, 1048576u);
  EXPECT_EQ(u->memory_peak_bytes, 4194304u);
  EXPECT_EQ(u->oom_kill_count, 1u);
  EXPECT_EQ(u->pids_current, 3u);
  EXPECT_EQ(u->pids_limit_hits, 9u);
  cgroupfs::KeyedCounterFile oom_kills(root_, "memory.events", "oom_kill");
  EXPECT_EQ(oom_kills.Read().value(), 1u);
  // Read again through the same open file: the new content, not the first one.
  Spit(root_ + "/memory.events", "low 0\nhigh 0\nmax 5\noom 3\noom_kill 3\n");
  EXPECT_EQ(oom_kills.Read().value(), 3u);

  Spit(root_ + "/memory.current", "garbage\n");
  Result<CgroupUsage> bad = cgroupfs::ReadV2Usage(root_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("memory.current"), std::string::npos);
}

TEST_F(FakeTree, V2UsageWithoutControllersIsZero) {
  Spit(root_ + "/cpu.stat", "usage_usec 7\n");
  Result<CgroupUsage> u = cgroupfs::ReadV2Usage(root_);
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->cpu_usage_ns, 7000u);
  EXPECT_EQ(u->memory_current_bytes, 0u);
  EXPECT_EQ(u->oom_kill_count, 0u);
  // No memory controller: zero.
  EXPECT_EQ(cgroupfs::KeyedCounterFile(root_, "memory.events", "oom_kill").Read().value(), 0u);
}

TEST_F(FakeTree, V1Usage) {
  for (const char* c : {"/memory", "/pids", "/cpuacct"}) mkdir((root_ + c).c_str(), 0755);
  Spit(root_ + "/cpuacct/cpuacct.usage", "123456789\n");
  Spit(root_ + "/memory/memory.usage_in_bytes", "2097152\n");
  Spit(root_ + "/memory/memory.max_usage_in_bytes", "8388608\n");
  Spit(root_ + "/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  Spit(root_ + "/pids/pids.current", "5\n");
  Spit(root_ + "/pids/pids.events", "max 4\n");
  Result<CgroupUsage> u =
      cgroupfs::ReadV1Usage(root_ + "/memory", root_ + "/pids", root_ + "/cpuacct");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->cpu_usage_ns, 123456789u);
  EXPECT_EQ(u->memory_current_bytes, 2097152u);
  EXPECT_EQ(u->memory_peak_bytes, 8388608u);
  EXPECT_EQ(u->oom_kill_count, 2u);
  EXPECT_EQ(u->pids_current, 5u);
  EXPECT_EQ(u->pids_limit_hits, 4u);
  cgroupfs::KeyedCounterFile oom_kills(root_ + "/memory", "memory.oom_control", "oom_kill");
  EXPECT_EQ(oom_kills.Read().value(), 2u);
  Spit(root_ + "/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  Result<uint64_t> missing = oom_kills.Read();
  ASSERT_FALSE(missing.ok()) << "a file without the key";
  EXPECT_NE(missing.error().message.find("memory.oom_control"), std::string::npos);
}

TEST_F(FakeTree, V2CreateRefusesMissingControllerAndLeavesNothing) {
  Spit(root_ + "/cgroup.subtree_control", "pids\n");
  Result<std::unique_ptr<Cgroup>> cg = CreateCgroupV2(root_, "c1", CgroupLimits{64 << 20, 0, 0});
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.error().message.find("\"memory\" is not enabled"), std::string::npos)
      << cg.error().message;
  EXPECT_FALSE(Exists(root_ + "/c1"));
}

// Detection against fake mountinfo / proc cgroup texts pointing into a fake tree: the
// layouts of hosts this machine is not (pure v2 with systemd delegation, containers).
TEST_F(FakeTree, DetectsPureV2WithDelegationAndTheServerLeaf) {
  const std::string own = root_ + "/cg/system.slice/mcpcell.service";
  ASSERT_EQ(std::system(("mkdir -p " + own).c_str()), 0);
  Spit(own + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  const std::string mountinfo = "30 25 0:26 / " + root_ + "/cg rw,nosuid - cgroup2 cgroup2 rw\n";
  CgroupHost host = cgroupfs::DetectCgroupHostFrom(mountinfo, "0::/system.slice/mcpcell.service\n");
  EXPECT_EQ(host.mode, CgroupMode::kV2) << host.detail;
  ASSERT_EQ(host.cell_parents.size(), 1u);
  EXPECT_EQ(host.cell_parents[0].second, own + "/mcpcell");
  if (geteuid() == 0) {
    EXPECT_TRUE(host.can_create) << host.detail;
  }
  // After the server moved itself into its leaf, cells still go next to it.
  host = cgroupfs::DetectCgroupHostFrom(mountinfo,
                                        "0::/system.slice/mcpcell.service/mcpcell-server\n");
  ASSERT_EQ(host.cell_parents.size(), 1u);
  EXPECT_EQ(host.cell_parents[0].second, own + "/mcpcell");
  // ... also when the server's cgroup is the root one (its leaf at the top).
  Spit(root_ + "/cg/cgroup.controllers", "cpu memory pids\n");
  host = cgroupfs::DetectCgroupHostFrom(mountinfo, "0::/mcpcell-server\n");
  ASSERT_EQ(host.cell_parents.size(), 1u) << host.detail;
  EXPECT_EQ(host.cell_parents[0].second, root_ + "/cg/mcpcell");
}

TEST_F(FakeTree, V2WithoutControllersFallsBackToV1InAContainer) {
  // A container's view: v1 hierarchies mounted with root /docker/abc, cpu and cpuacct
  // co-mounted, and an empty v2 hierarchy (as on this host).
  ASSERT_EQ(std::system(("mkdir -p " + root_ + "/unified " + root_ + "/cpu,cpuacct/sub " + root_ +
                         "/memory/sub " + root_ + "/pids/sub " + root_ + "/free\\ zer/sub")
                            .c_str()),
            0);
  Spit(root_ + "/unified/cgroup.controllers", "\n");
  std::string mountinfo;
  mountinfo += "40 31 0:38 / " + root_ + "/unified rw - cgroup2 cgroup2 rw\n";
  mountinfo +=
      "32 31 0:29 /docker/abc " + root_ + "/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
  mountinfo += "35 31 0:32 /docker/abc " + root_ + "/memory rw - cgroup cgroup rw,memory\n";
  mountinfo += "39 31 0:36 /docker/abc " + root_ + "/pids rw - cgroup cgroup rw,pids\n";
  mountinfo += "37 31 0:34 /docker/abc " + root_ + "/free\\040zer rw - cgroup cgroup rw,freezer\n";
  const std::string cgroup =
      "9:pids:/docker/abc/sub\n6:freezer:/docker/abc/sub\n4:memory:/docker/abc/sub\n"
      "2:cpu,cpuacct:/docker/abc/sub\n0::/\n";
  CgroupHost host = cgroupfs::DetectCgroupHostFrom(mountinfo, cgroup);
  ASSERT_EQ(host.mode, CgroupMode::kV1) << host.detail;
  EXPECT_NE(host.detail.find("lacks the memory controller"), std::string::npos) << host.detail;
  std::map<std::string, std::string> parents(host.cell_parents.begin(), host.cell_parents.end());
  EXPECT_EQ(parents["memory"], root_ + "/memory/sub/mcpcell");
  EXPECT_EQ(parents["cpu"], root_ + "/cpu,cpuacct/sub/mcpcell");
  EXPECT_EQ(parents["cpuacct"], parents["cpu"]);
  EXPECT_EQ(parents["freezer"], root_ + "/free zer/sub/mcpcell");  // \\040 unescaped

  // Our cgroup outside the mount's root (another container's mount): not usable.
  host = cgroupfs::DetectCgroupHostFrom(
      mountinfo, "9:pids:/other\n6:freezer:/other\n4:memory:/other\n2:cpu,cpuacct:/other\n");
  EXPECT_EQ(host.mode, CgroupMode::kNone);
  EXPECT_FALSE(host.can_create);
  EXPECT_NE(host.detail.find("not mounted"), std::string::npos) << host.detail;
}

// Placement of the server above its cells, against fake trees whose files exist (a plain
// directory accepts the writes cgroupfs would): what is written where, in which units.
void MakeFakeCgroup(const std::string& dir, std::initializer_list<const char*> files) {
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  for (const char* f : files) Spit(dir + "/" + f, "");
}

TEST_F(FakeTree, V2PlacementMovesTheServerIntoASiblingOfTheCellsWithWeights) {
  const std::string own = root_ + "/system.slice/mcpcell.service";
  MakeFakeCgroup(own, {"cgroup.procs", "cgroup.subtree_control"});
  Spit(own + "/cgroup.subtree_control", "pids\n");  // on before us: must stay on after
  MakeFakeCgroup(own + "/mcpcell-server", {"cgroup.procs", "cpu.weight"});
  MakeFakeCgroup(own + "/mcpcell", {"cgroup.subtree_control", "cpu.weight"});
  Result<ServerPlacement> p = cgroupfs::PlaceServerIn(CgroupMode::kV2, own, 4242, {700, 30});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->server_dir, own + "/mcpcell-server");
  EXPECT_EQ(p->cells_dir, own + "/mcpcell");
  EXPECT_EQ(Slurp(own + "/mcpcell-server/cgroup.procs"), "4242");
  EXPECT_EQ(Slurp(own + "/mcpcell-server/cpu.weight"), "700");
  EXPECT_EQ(Slurp(own + "/mcpcell/cpu.weight"), "30");
  // Only what we turned on is turned off again at shutdown.
  EXPECT_EQ(p->enabled, (std::vector<std::string>{"memory", "cpu"}));
  EXPECT_NE(p->Describe().find(own + "/mcpcell-server"), std::string::npos) << p->Describe();

  // Shutdown: the cells' parent is gone (a plain directory with files reads as in use here,
  // so empty it as the kernel would), the controllers go off, the server moves back.
  ASSERT_EQ(std::system(("rm -rf '" + own + "/mcpcell'").c_str()), 0);
  Spit(own + "/cgroup.subtree_control", "");
  ASSERT_TRUE(cgroupfs::UnplaceServerFrom(*p, 4242).ok());
  EXPECT_EQ(Slurp(own + "/cgroup.subtree_control"), "-memory");  // the last of "-cpu", "-memory"
  EXPECT_EQ(Slurp(own + "/cgroup.procs"), "4242");
}

TEST_F(FakeTree, V2UnplaceKeepsTheServerWhereItIsWhileCellsRemain) {
  const std::string own = root_ + "/own";
  MakeFakeCgroup(own, {"cgroup.procs", "cgroup.subtree_control"});
  MakeFakeCgroup(own + "/mcpcell-server", {"cgroup.procs", "cpu.weight"});
  MakeFakeCgroup(own + "/mcpcell/another-servers-cell", {"cgroup.subtree_control", "cpu.weight"});
  Spit(own + "/mcpcell/cgroup.subtree_control", "");
  Spit(own + "/mcpcell/cpu.weight", "");
  Result<ServerPlacement> p = cgroupfs::PlaceServerIn(CgroupMode::kV2, own, 77, {});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(Slurp(own + "/mcpcell-server/cpu.weight"), "1000");  // the defaults
  EXPECT_EQ(Slurp(own + "/mcpcell/cpu.weight"), "100");
  Status s = cgroupfs::UnplaceServerFrom(*p, 77);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("still in use"), std::string::npos) << s.error().message;
  EXPECT_EQ(Slurp(own + "/cgroup.procs"), "") << "not moved back into a cgroup with children";
  EXPECT_TRUE(Exists(own + "/mcpcell/another-servers-cell"));
}

TEST_F(FakeTree, V1PlacementUsesSharesAndOnlyTheCpuHierarchy) {
  const std::string own = root_ + "/cpu";
  MakeFakeCgroup(own, {"cgroup.procs"});
  MakeFakeCgroup(own + "/mcpcell-server", {"cgroup.procs", "cpu.shares"});
  MakeFakeCgroup(own + "/mcpcell", {"cpu.shares"});
  Result<ServerPlacement> p = cgroupfs::PlaceServerIn(CgroupMode::kV1, own, 99, {1000, 50});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(Slurp(own + "/mcpcell-server/cpu.shares"), "10240");
  EXPECT_EQ(Slurp(own + "/mcpcell/cpu.shares"), "512");
  EXPECT_EQ(Slurp(own + "/mcpcell-server/cgroup.procs"), "99");
  EXPECT_TRUE(p->enabled.empty());
  ASSERT_TRUE(cgroupfs::UnplaceServerFrom(*p, 99).ok());  // both still "in use": kept
  EXPECT_EQ(Slurp(own + "/cgroup.procs"), "99");
}

TEST_F(FakeTree, PlacementFailsWithTheCauseAndLeavesTheServerWhereItWas) {
  const std::string own = root_ + "/own";
  MakeFakeCgroup(own, {"cgroup.procs", "cgroup.subtree_control"});
  // The server's cgroup has no cpu.weight: the cpu controller is not available.
  MakeFakeCgroup(own + "/mcpcell-server", {"cgroup.procs"});
  Result<ServerPlacement> p = cgroupfs::PlaceServerIn(CgroupMode::kV2, own, 5, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("mcpcell-server/cpu.weight"), std::string::npos)
      << p.error().message;
  EXPECT_EQ(Slurp(own + "/cgroup.procs"), "5") << "moved back";
  // Nothing to create at all: no cgroupfs under own.
  p = cgroupfs::PlaceServerIn(CgroupMode::kV2, root_ + "/missing/own", 5, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("mkdir"), std::string::npos) << p.error().message;
  EXPECT_FALSE(cgroupfs::PlaceServerIn(CgroupMode::kNone, own, 5, {}).ok());
}

TEST(Cgroup, CpuWeightsAreCheckedAndConverted) {
  EXPECT_TRUE(ValidateCpuWeights({}).ok());
  for (CpuWeights w : {CpuWeights{0, 100}, CpuWeights{100, 0}, CpuWeights{10001, 100}}) {
    Status s = ValidateCpuWeights(w);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("outside [1, 10000]"), std::string::npos);
  }
  EXPECT_EQ(cgroupfs::CpuWeightWrite(CgroupMode::kV1, 100).second, "1024");
  EXPECT_EQ(cgroupfs::CpuWeightWrite(CgroupMode::kV1, 1).second, "10");
  EXPECT_EQ(cgroupfs::CpuWeightWrite(CgroupMode::kV1, 10000).second, "102400");
  EXPECT_EQ(cgroupfs::CpuWeightWrite(CgroupMode::kV2, 250),
            std::make_pair(std::string("cpu.weight"), std::string("250")));
}

TEST(Cgroup, BadCellIdsAreRefused) {
  for (const char* id : {"", ".", "..", "a/b", "../x", "x y", "mcpcell-server"}) {
    Result<std::unique_ptr<Cgroup>> cg = CreateCellCgroup(id, CgroupLimits{});
    ASSERT_FALSE(cg.ok()) << id;
    EXPECT_NE(cg.error().message.find("cell id"), std::string::npos) << cg.error().message;
  }
  EXPECT_FALSE(CreateCellCgroup(std::string(65, 'a'), CgroupLimits{}).ok());
}

TEST(Cgroup, LimitsACellCannotLiveWithNameTheField) {
  struct Case {
    CgroupLimits limits;
    const char* field;
  } cases[] = {{{1 << 20, 0, 0}, "limits.memory_max_bytes"},
               {{0, 2, 0}, "limits.pids_max"},
               {{0, 0, 5}, "limits.cpu_millicores"},
               {{0, 0, 2000000}, "limits.cpu_millicores"}};
  for (const Case& c : cases) {
    Status s = ValidateCgroupLimits(c.limits);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(s.error().message.find(c.field), std::string::npos) << s.error().message;
    Result<std::unique_ptr<Cgroup>> cg = CreateCellCgroup(UniqueId("bad-limits"), c.limits);
    ASSERT_FALSE(cg.ok());
    EXPECT_NE(cg.error().message.find(c.field), std::string::npos) << cg.error().message;
  }
  EXPECT_TRUE(ValidateCgroupLimits(CgroupLimits{}).ok());
  EXPECT_TRUE(ValidateCgroupLimits(CgroupLimits{64ull << 20, 16, 100}).ok());
}

TEST(Cgroup, DetectIsConsistent) {
  CgroupHost host = DetectCgroupHost();
  EXPECT_FALSE(host.detail.empty());
  if (host.mode == CgroupMode::kNone) return;
  ASSERT_FALSE(host.cell_parents.empty());
  for (const auto& [controller, dir] : host.cell_parents) {
    EXPECT_EQ(dir.substr(dir.rfind('/')), "/mcpcell") << dir;
    // Our own cgroup directory (the parent of mcpcell/) exists.
    EXPECT_TRUE(Exists(dir.substr(0, dir.rfind('/')))) << controller << " " << dir;
  }
}

}  // namespace
}  // namespace mcpcell::sandbox
