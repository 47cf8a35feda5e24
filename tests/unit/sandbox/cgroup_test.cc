// cgroups: the file formats against a fake cgroupfs tree in a temp dir, then the real
// thing on this host (under our own cgroup, cleaned up): limits written, processes moved,
// OOM kills, fork limits and CPU quota observed, kill-all and removal, stale reaping. The
// v2 mechanics run against a real cgroup2 mount even when it has no controllers (as on a
// v1 host). Tests needing a writable cgroupfs skip with the reason when there is none.
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

namespace mcpcell::sandbox {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string UniqueId(const char* what) {
  static int n = 0;
  return std::string("unit-") + what + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

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

// ---- the real cgroupfs of this host ------------------------------------------------------

// A forked child that waits until released, so the parent can move it into a cgroup first.
template <typename Fn>
class HeldChild {
 public:
  explicit HeldChild(Fn fn) {
    if (pipe(gate_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(gate_[1]);
      char c;
      if (read(gate_[0], &c, 1) != 1) _exit(99);
      _exit(fn());
    }
    close(gate_[0]);
  }
  ~HeldChild() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  pid_t pid() const { return pid_; }
  void Release() {
    if (write(gate_[1], "g", 1) != 1) ADD_FAILURE() << "release";
    close(gate_[1]);
  }
  int Wait() {
    waitpid(pid_, &status_, 0);
    waited_ = true;
    return status_;
  }

 private:
  int gate_[2] = {-1, -1};
  pid_t pid_ = -1;
  int status_ = 0;
  bool waited_ = false;
};

class RealCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = DetectCgroupHost();
    if (!host_.can_create) GTEST_SKIP() << "no writable cgroup here: " << host_.detail;
  }
  Result<std::unique_ptr<Cgroup>> Create(const char* what, CgroupLimits limits) {
    return CreateCellCgroup(UniqueId(what), limits);
  }
  CgroupHost host_;
};

TEST_F(RealCgroup, CreateWritesLimitsAndDestroyRemovesEverything) {
  auto cg = Create("limits", CgroupLimits{64ull << 20, 32, 250});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  const std::vector<std::string> paths = (*cg)->Paths();
  ASSERT_FALSE(paths.empty());
  for (const std::string& p : paths) EXPECT_TRUE(Exists(p)) << p;
  if (host_.mode == CgroupMode::kV1) {
    for (const std::string& p : paths) {
      if (Exists(p + "/memory.limit_in_bytes")) {
        EXPECT_EQ(Slurp(p + "/memory.limit_in_bytes"), "67108864\n");
        if (Exists(p + "/memory.memsw.limit_in_bytes")) {
          EXPECT_EQ(Slurp(p + "/memory.memsw.limit_in_bytes"), "67108864\n");
        }
      }
      if (Exists(p + "/pids.max")) {
        EXPECT_EQ(Slurp(p + "/pids.max"), "32\n");
      }
      if (Exists(p + "/cpu.cfs_quota_us")) {
        EXPECT_EQ(Slurp(p + "/cpu.cfs_quota_us"), "2500\n");
        EXPECT_EQ(Slurp(p + "/cpu.cfs_period_us"), "10000\n");
      }
    }
    EXPECT_EQ((*cg)->DirFd(), -1);
  } else {
    EXPECT_EQ(Slurp(paths[0] + "/memory.max"), "67108864\n");
    EXPECT_EQ(Slurp(paths[0] + "/pids.max"), "32\n");
    EXPECT_EQ(Slurp(paths[0] + "/cpu.max"), "2500 10000\n");
    EXPECT_GE((*cg)->DirFd(), 0);
  }
  ASSERT_TRUE((*cg)->Destroy().ok());
  for (const std::string& p : paths) EXPECT_FALSE(Exists(p)) << p;
  EXPECT_TRUE((*cg)->Destroy().ok());  // idempotent
}

TEST_F(RealCgroup, ProcessesJoinAndKillAllKillsThemAll) {
  auto cg = Create("kill", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  // The child forks a grandchild, then both sleep: KillAll must get both.
  HeldChild child([] {
    if (fork() == 0) pause();
    pause();
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(child.pid()).ok());
  child.Release();
  const std::string procs = (*cg)->Paths()[0] + "/cgroup.procs";
  for (int i = 0; i < 200 && Slurp(procs).find('\n') == Slurp(procs).rfind('\n'); ++i) {
    usleep(5000);  // until the grandchild is listed too
  }
  EXPECT_NE(Slurp("/proc/" + std::to_string(child.pid()) + "/cgroup")
                .find((*cg)->Paths()[0].substr((*cg)->Paths()[0].find("/mcpcell/"))),
            std::string::npos);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->pids_current, 2u);
  ASSERT_TRUE((*cg)->KillAll().ok());
  const int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_TRUE((*cg)->Destroy().ok());  // waits for the reparented grandchild to be gone
}

TEST_F(RealCgroup, MemoryHogIsOomKilledAndCounted) {
  auto cg = Create("oom", CgroupLimits{32ull << 20, 0, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild hog([] {
    const size_t size = 256ull << 20;
    char* p = static_cast<char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 2;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return 0;  // reaching here means the limit did not hold
  });
  ASSERT_TRUE((*cg)->AddProcess(hog.pid()).ok());
  hog.Release();
  const int status = hog.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->oom_kill_count, 1u);
  EXPECT_LE(u->memory_peak_bytes, (32ull << 20) + (1 << 20));
  EXPECT_GT(u->memory_peak_bytes, 16ull << 20);
  ASSERT_TRUE((*cg)->Destroy().ok());
}

TEST_F(RealCgroup, ForkBombStopsAtPidsMax) {
  auto cg = Create("pids", CgroupLimits{0, 16, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild bomb([] {
    int forked = 0;
    for (int i = 0; i < 100; ++i) {
      pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p < 0) return errno == EAGAIN ? forked : 200;
      ++forked;
    }
    return 201;  // 100 forks succeeded: no limit
  });
  ASSERT_TRUE((*cg)->AddProcess(bomb.pid()).ok());
  bomb.Release();
  const int status = bomb.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 15);  // 16 pids: the bomb itself and 15 children
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->pids_limit_hits, 1u);
  ASSERT_TRUE((*cg)->Destroy().ok());  // kills the 15 paused children
}

double CpuSecondsOfSpin(double wall_seconds) {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  volatile uint64_t x = 0;
  do {
    for (int i = 0; i < 100000; ++i) x = x + i;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < wall_seconds);
  return 0;
}

TEST_F(RealCgroup, CpuQuotaHolds) {
  auto cg = Create("cpu", CgroupLimits{0, 0, 100});  // a tenth of a CPU
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  HeldChild spinner([] {
    CpuSecondsOfSpin(1.0);
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(spinner.pid()).ok());
  spinner.Release();
  ASSERT_EQ(spinner.Wait(), 0);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  // One second of wall time at 10%: about 0.1 s of CPU; 0.3 s leaves room for the period
  // boundaries and still fails clearly without a quota (about 1 s).
  EXPECT_LT(u->cpu_usage_ns, 300000000u);
  EXPECT_GT(u->cpu_usage_ns, 5000000u);  // it ran at all (a loaded CI machine may give less)
  ASSERT_TRUE((*cg)->Destroy().ok());
}

// The v1 fast path A's Cell uses: the child, already in a new user namespace, joins through
// fds the server opened, and lands in every controller.
TEST_F(RealCgroup, ChildJoinsThroughServerOpenedFds) {
  if (host_.mode != CgroupMode::kV1) GTEST_SKIP() << "v1 only (v2 uses CLONE_INTO_CGROUP)";
  auto cg = Create("join", CgroupLimits{64ull << 20, 16, 0});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  Result<std::vector<int>> fds = (*cg)->OpenJoinFds();
  ASSERT_TRUE(fds.ok()) << fds.error().message;
  ASSERT_EQ(fds->size(), (*cg)->Paths().size());
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  if (pid == 0) {
    // As in a cell: a new user namespace, no capabilities over the host's cgroupfs.
    if (unshare(CLONE_NEWUSER) != 0) _exit(10);
    const int err = JoinCgroupFromChild(fds->data(), fds->size());
    if (write(done[1], &err, sizeof err) != sizeof err) _exit(11);
    pause();
    _exit(0);
  }
  for (int fd : *fds) close(fd);
  close(done[1]);
  int err = -1;
  ASSERT_EQ(read(done[0], &err, sizeof err), static_cast<ssize_t>(sizeof err));
  close(done[0]);
  EXPECT_EQ(err, 0) << strerror(err);
  for (const std::string& p : (*cg)->Paths()) {
    EXPECT_EQ(Slurp(p + "/cgroup.procs"), std::to_string(pid) + "\n") << p;
  }
  ASSERT_TRUE((*cg)->Destroy().ok());
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST_F(RealCgroup, ExistingCgroupIsNotReused) {
  const std::string id = UniqueId("twice");
  auto first = CreateCellCgroup(id, CgroupLimits{});
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = CreateCellCgroup(id, CgroupLimits{});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("already exists"), std::string::npos)
      << second.error().message;
  for (const std::string& p : (*first)->Paths()) EXPECT_TRUE(Exists(p)) << p;  // untouched
  ASSERT_TRUE((*first)->Destroy().ok());
}

TEST_F(RealCgroup, ReapStaleRemovesOnlyTheDeadOnes) {
  const std::string stale_id = UniqueId("stale");
  const std::string live_id = UniqueId("live");
  auto stale = CreateCellCgroup(stale_id, CgroupLimits{0, 8, 0});
  auto live = CreateCellCgroup(live_id, CgroupLimits{});
  ASSERT_TRUE(stale.ok() && live.ok());
  HeldChild orphan([] {
    pause();
    return 0;
  });
  ASSERT_TRUE((*stale)->AddProcess(orphan.pid()).ok());
  orphan.Release();
  const std::vector<std::string> stale_paths = (*stale)->Paths();
  stale->reset();  // the server "crashed": nobody owns this cgroup any more
  // Other cells on this host (other tests running now) count as live.
  ASSERT_TRUE(ReapStaleCgroups([&](const std::string& id) { return id != stale_id; }).ok());
  const int status = orphan.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  for (const std::string& p : stale_paths) EXPECT_FALSE(Exists(p)) << p;
  for (const std::string& p : (*live)->Paths()) EXPECT_TRUE(Exists(p)) << p;
  ASSERT_TRUE((*live)->Destroy().ok());
}

// The real placement on this host: this test process is the "server". It moves into
// <own>/mcpcell-server with the weight, a cell made meanwhile lands in <own>/mcpcell, and
// undoing it puts the process back and leaves nothing of ours.
TEST_F(RealCgroup, ServerPlacementAndUndo) {
  const std::string before = Slurp("/proc/self/cgroup");
  Result<ServerPlacement> p = PlaceServerAboveCells({800, 100});
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::string during = Slurp("/proc/self/cgroup");
  EXPECT_NE(during.find("/mcpcell-server\n"), std::string::npos) << during;
  const auto [file, value] = cgroupfs::CpuWeightWrite(host_.mode, 800);
  EXPECT_EQ(Slurp(p->server_dir + "/" + file), value + "\n");
  EXPECT_NE(Slurp(p->server_dir + "/cgroup.procs").find(std::to_string(getpid()) + "\n"),
            std::string::npos);
  // Cells still go next to the server, not below it: detection run now (as a server that
  // placed itself before its first cell does) and the cell made now.
  const CgroupHost placed_host = DetectCgroupHost();
  for (const auto& [controller, dir] : placed_host.cell_parents) {
    if (controller == "cpu" || controller == "unified") {
      EXPECT_EQ(dir, p->cells_dir) << controller;
    }
  }
  auto cg = Create("placed", CgroupLimits{0, 16, 100});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  bool under_cells_dir = false;
  for (const std::string& path : (*cg)->Paths()) {
    under_cells_dir = under_cells_dir || path.rfind(p->cells_dir + "/", 0) == 0;
  }
  EXPECT_TRUE(under_cells_dir) << p->cells_dir;
  ASSERT_TRUE((*cg)->Destroy().ok());

  Status undo = UnplaceServer(*p);
  // Other servers' cells on this host may keep the shared parents (v2: and us in our leaf).
  if (!undo.ok()) {
    EXPECT_NE(undo.error().message.find("still in use"), std::string::npos) << undo.error().message;
    return;
  }
  EXPECT_EQ(Slurp("/proc/self/cgroup"), before);
  // mcpcell-server is gone unless another process (a server) is in it.
  if (Exists(p->server_dir)) {
    EXPECT_EQ(Slurp(p->server_dir + "/cgroup.procs").find(std::to_string(getpid()) + "\n"),
              std::string::npos);
  }
}

// ---- v2 mechanics on a real cgroup2 mount -------------------------------------------------

std::string FindCgroup2Mount() {
  for (const char* p : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    struct statfs fs {};
    if (statfs(p, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) return p;
  }
  return "";
}

class RealCgroupV2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string mount = FindCgroup2Mount();
    if (mount.empty()) GTEST_SKIP() << "no cgroup2 mount";
    // Our own v2 cgroup, from "0::/path".
    const std::string self = Slurp("/proc/self/cgroup");
    const size_t pos = self.find("0::");
    if (pos == std::string::npos) GTEST_SKIP() << "not in a v2 cgroup";
    std::string own = self.substr(pos + 3, self.find('\n', pos) - pos - 3);
    if (own == "/") own.clear();
    parent_ = mount + own + "/mcpcell-unit-v2-" + std::to_string(getpid());
    if (mkdir(parent_.c_str(), 0755) != 0) {
      GTEST_SKIP() << "cannot create " << parent_ << ": " << strerror(errno);
    }
  }
  void TearDown() override {
    if (!parent_.empty()) rmdir(parent_.c_str());
  }
  std::string parent_;
};

TEST_F(RealCgroupV2, LifecycleWithCgroupKillAndCloneIntoCgroup) {
  auto cg = CreateCgroupV2(parent_, "cell", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  const std::string dir = (*cg)->Paths()[0];
  ASSERT_GE((*cg)->DirFd(), 0);
  Result<std::vector<int>> join = (*cg)->OpenJoinFds();
  ASSERT_TRUE(join.ok());
  EXPECT_TRUE(join->empty());

  // clone3(CLONE_INTO_CGROUP) with DirFd(): the child starts inside, as A's Cell does.
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>((*cg)->DirFd());
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    CpuSecondsOfSpin(0.05);
    pause();
    _exit(0);
  }
  ASSERT_GT(pid, 0) << strerror(errno);
  EXPECT_EQ(Slurp(dir + "/cgroup.procs"), std::to_string(pid) + "\n");
  // AddProcess moves a second process in.
  HeldChild other([] {
    pause();
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(other.pid()).ok());
  other.Release();
  usleep(100000);
  Result<CgroupUsage> u = (*cg)->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GT(u->cpu_usage_ns, 10000000u);  // cpu.stat works without the cpu controller

  ASSERT_TRUE((*cg)->KillAll().ok());  // cgroup.kill
  int status = 0;
  waitpid(static_cast<pid_t>(pid), &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  status = other.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_TRUE((*cg)->Destroy().ok());
  EXPECT_FALSE(Exists(dir));
}

// The v2 freezer on a real cgroup2 mount (cgroup.freeze is there without any controller):
// a child counting in shared memory stops while frozen and continues once thawed; a
// frozen cgroup is destroyed (cgroup.kill kills frozen tasks) without hanging.
TEST_F(RealCgroupV2, FreezeStopsACountingChildAndThawResumesIt) {
  auto cg = CreateCgroupV2(parent_, "paused", CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  auto* counter = static_cast<volatile uint64_t*>(
      mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  *counter = 0;
  HeldChild child([counter] {
    for (;;) *counter = *counter + 1;
    return 0;
  });
  ASSERT_TRUE((*cg)->AddProcess(child.pid()).ok());
  child.Release();
  while (*counter < 1000) usleep(1000);

  Status frozen = (*cg)->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.error().message;
  const uint64_t at_freeze = *counter;
  usleep(100000);
  EXPECT_EQ(*counter, at_freeze);  // not one more increment while frozen
  Status thawed = (*cg)->Thaw();
  ASSERT_TRUE(thawed.ok()) << thawed.error().message;
  for (int i = 0; i < 3000 && *counter <= at_freeze; ++i) usleep(1000);
  EXPECT_GT(*counter, at_freeze);

  ASSERT_TRUE((*cg)->Freeze().ok());
  Status destroyed = (*cg)->Destroy();
  ASSERT_TRUE(destroyed.ok()) << destroyed.error().message;
  const int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  munmap(const_cast<uint64_t*>(counter), sizeof(uint64_t));
}

TEST_F(RealCgroupV2, LimitsNeedEnabledControllers) {
  const std::string controllers = Slurp(parent_ + "/cgroup.controllers");
  if (controllers.find("memory") != std::string::npos) GTEST_SKIP() << "memory is available";
  auto cg = CreateCgroupV2(parent_, "cell", CgroupLimits{64 << 20, 0, 0});
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.error().message.find("\"memory\" is not enabled"), std::string::npos)
      << cg.error().message;
  EXPECT_FALSE(Exists(parent_ + "/cell"));
}

}  // namespace
}  // namespace mcpcell::sandbox
