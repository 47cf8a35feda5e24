// Kernel confinement seen from inside real cells: every syscall the default seccomp filter
// refuses returns its errno, other ABIs are killed, a cell process has no capabilities,
// no_new_privs, its own process group and the spec's rlimits, and the cgroup limits hold
// (OOM kill reported, fork bomb stopped at pids.max, CPU quota) while the cell survives.
// Runs as root (per-cell uid range, cgroups) and as uid 65534 (desktop mode: no cgroup,
// which the cell must report as "limits not enforced" rather than pretend).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <thread>

#include "sandbox/linux/seccomp.h"
#include "tests/integration/cell_fixture.h"
#include "tests/unit/sandbox/seccomp_denied_calls.h"

namespace mcpcell::sandbox {
namespace {

using celltest::Facts;
using celltest::ProbeRun;
using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ConfinementProbe() {
  return std::string(celltest::kProbeDirInCell) + "/mcpcell-confinement-probe";
}

std::map<std::string, std::string> FactMap(const std::string& out) {
  std::map<std::string, std::string> m;
  for (auto& [k, v] : Facts(out)) m[k] = v;
  return m;
}

// Every test runs on a cell made at once and on one parked then unparked (a warm pool's
// cell claimed for a session, Cell::CreateParked): both must be confined the same way.
class ConfinementTest : public ::testing::TestWithParam<bool> {
 protected:
  static TempStateDir& SharedState() {
    static TempStateDir state;
    return state;
  }
  void SetUp() override { ASSERT_FALSE(state_.path().empty()); }

  std::unique_ptr<Cell> NewCell(const CgroupLimits& limits = {}) {
    CellSpec spec = ProbeSpec(state_);
    if (limits.memory_max_bytes || limits.pids_max || limits.cpu_millicores) spec.limits = limits;
    const bool parked = GetParam();
    Result<std::unique_ptr<Cell>> cell = parked ? Cell::CreateParked(spec, TestCreateOptions())
                                                : Cell::Create(spec, TestCreateOptions());
    EXPECT_TRUE(cell.ok()) << cell.error().message;
    if (!cell) return nullptr;
    if (parked) {
      Status unparked = (*cell)->Unpark({});
      EXPECT_TRUE(unparked.ok()) << unparked.error().message;
      if (!unparked) return nullptr;
    }
    return std::move(cell).value();
  }

  ProbeRun Probe(Cell& cell, std::vector<std::string> args,
                 std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    args.insert(args.begin(), ConfinementProbe());
    return RunInCell(cell, std::move(args), timeout);
  }

  // Limits need a cgroup; without one the cell must say so. Returns false (and records why)
  // when the test cannot check the limit here.
  bool HasCgroupOrReportsWhy(Cell& cell) {
    if (cell.cgroup() != nullptr) return true;
    bool reported = false;
    for (const std::string& w : cell.warnings()) {
      reported = reported || w.find("limits not enforced") != std::string::npos;
    }
    EXPECT_TRUE(reported) << "a cell without a cgroup must report \"limits not enforced\"";
    EXPECT_FALSE(cell.Usage().ok());
    return false;
  }

  TempStateDir& state_ = SharedState();
};

TEST_P(ConfinementTest, EveryDeniedSyscallReturnsItsErrnoInsideACell) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  ProbeRun r = Probe(*cell, {"denied"});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto facts = FactMap(r.out);
  ASSERT_EQ(facts.size(), testing::DeniedCalls().size()) << r.out;
  for (const auto& c : testing::DeniedCalls()) {
    const std::string key = std::string(c.syscall) + "/" + c.variant;
    EXPECT_EQ(facts[key], strerrorname_np(c.expected_errno)) << key;
  }
  // And every rule of the filter was exercised.
  for (const SeccompRule& rule : DefaultSeccompRules()) {
    bool seen = false;
    for (const auto& [key, value] : facts) seen = seen || key.rfind(rule.syscall + "/", 0) == 0;
    EXPECT_TRUE(seen) << rule.syscall;
  }
}

TEST_P(ConfinementTest, OrdinaryCallsStillWorkInsideACell) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  ProbeRun r = Probe(*cell, {"allowed"});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto facts = Facts(r.out);
  ASSERT_EQ(facts.size(), testing::AllowedCalls().size()) << r.out;
  for (const auto& [what, result] : facts) EXPECT_NE(result, "EPERM") << what;
}

TEST_P(ConfinementTest, OtherAbisAreKilled) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
#if defined(__x86_64__)
  for (const char* abi : {"i386", "x32"}) {
    ProbeRun r = Probe(*cell, {abi});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.signo, SIGSYS) << abi << ": exit " << r.exit_code << " out " << r.out;
    EXPECT_EQ(r.out, "") << abi;
  }
#endif
  // The cell is unharmed.
  ProbeRun after = Probe(*cell, {"rlimits"});
  EXPECT_EQ(after.exit_code, 0) << after.error << after.err;
}

TEST_P(ConfinementTest, NoCapabilitiesNoNewPrivsSeccompAndOwnProcessGroup) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  ProbeRun r = Probe(*cell, {"status"});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = FactMap(r.out);
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_EQ(f[set], "0000000000000000") << set << "\n" << r.out;
  }
  EXPECT_EQ(f["NoNewPrivs"], "1");
  EXPECT_EQ(f["Seccomp"], "2");  // filter mode
  EXPECT_NE(f["Uid"], "0") << "cell processes must not be root inside";
  EXPECT_NE(f["Gid"], "0");
  EXPECT_EQ(f["pgid_is_pid"], "yes");
}

TEST_P(ConfinementTest, RlimitsOfTheSpecApply) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  ProbeRun r = Probe(*cell, {"rlimits"});
  ASSERT_EQ(r.exit_code, 0) << r.error << r.err;
  auto f = FactMap(r.out);
  const RlimitSpec defaults;
  EXPECT_EQ(f["nofile_soft"], std::to_string(defaults.nofile));
  EXPECT_EQ(f["nofile_hard"], std::to_string(defaults.nofile));
  EXPECT_EQ(f["fsize_hard"], std::to_string(defaults.fsize_bytes));
  EXPECT_EQ(f["core_soft"], "0");
  EXPECT_EQ(f["core_hard"], "0");
}

TEST_P(ConfinementTest, MemoryHogIsOomKilledInsideItsCellOnlyAndReported) {
  auto cell = NewCell(CgroupLimits{64ull << 20, 256, 0});
  ASSERT_TRUE(cell);
  if (!HasCgroupOrReportsWhy(*cell)) GTEST_SKIP() << "no cgroup: limits not enforced (reported)";
  auto bystander = NewCell();
  ASSERT_TRUE(bystander);
  ExecOptions o;
  o.argv = {ConfinementProbe(), "hog", "512"};
  Result<ExecResult> res = cell->channel().Exec(o);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_TRUE(res->signaled) << "exit " << res->exit_code << " out " << res->out.data;
  EXPECT_EQ(res->signo, SIGKILL);
  EXPECT_TRUE(res->oom_killed) << "the OOM kill must be reported in the exec result";
  EXPECT_THAT(res->out.data, Not(HasSubstr("survived")));
  Result<CgroupUsage> u = cell->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->oom_kill_count, 1u);
  EXPECT_LE(u->memory_peak_bytes, (64ull << 20) + (2 << 20));
  // The cell (its init) and another cell keep running.
  EXPECT_EQ(Probe(*cell, {"rlimits"}).exit_code, 0);
  EXPECT_EQ(Probe(*bystander, {"rlimits"}).exit_code, 0);
}

TEST_P(ConfinementTest, ForkBombStopsAtThePidsLimit) {
  auto cell = NewCell(CgroupLimits{256ull << 20, 32, 0});
  ASSERT_TRUE(cell);
  if (!HasCgroupOrReportsWhy(*cell)) GTEST_SKIP() << "no cgroup: limits not enforced (reported)";
  ProbeRun r = Probe(*cell, {"forkbomb", "1000"});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = FactMap(r.out);
  // 32 pids in the cell: init, the probe, and at most 30 children.
  EXPECT_LE(std::stoi(f["forked"]), 30) << r.out;
  EXPECT_GE(std::stoi(f["forked"]), 20) << r.out;
  EXPECT_EQ(f["errno"], "EAGAIN");
  Result<CgroupUsage> u = cell->Usage();
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GE(u->pids_limit_hits, 1u);
  EXPECT_EQ(Probe(*cell, {"rlimits"}).exit_code, 0) << "the cell must survive the bomb";
}

// A fork bomb that puts itself in the background outlives its call and keeps the cell at
// pids.max. The next exec's fork fails; init then kills what calls that have ended left
// running (never a running call's processes) and the exec goes ahead.
TEST_P(ConfinementTest, LeftoversFillingThePidsLimitAreKilledForTheNextExec) {
  auto cell = NewCell(CgroupLimits{256ull << 20, 32, 0});
  ASSERT_TRUE(cell);
  if (!HasCgroupOrReportsWhy(*cell)) GTEST_SKIP() << "no cgroup: limits not enforced (reported)";
  // Python: a failed fork is an exception it retries, so the bomb takes every pid freed.
  ProbeRun bomb = RunInCell(*cell, {"/usr/bin/python3", "-c",
                                    "import os, sys, time\n"
                                    "if os.fork() == 0:\n"
                                    "    os.setsid()\n"
                                    "    while True:\n"
                                    "        try:\n"
                                    "            if os.fork() == 0:\n"
                                    "                time.sleep(1000)\n"
                                    "                os._exit(0)\n"
                                    "        except OSError:\n"
                                    "            time.sleep(0.005)\n"
                                    "print('started')\n"});
  ASSERT_TRUE(bomb.ok) << bomb.error;
  EXPECT_EQ(bomb.out, "started\n");
  // Wait until the bomb holds every pid: the cgroup counts limit hits.
  for (int i = 0; i < 200; ++i) {
    Result<CgroupUsage> u = cell->Usage();
    ASSERT_TRUE(u.ok()) << u.error().message;
    if (u->pids_limit_hits > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ProbeRun after =
      RunInCell(*cell, {"/bin/sh", "-c", "echo recovered; ps -e -o comm= | sort | uniq -c"});
  ASSERT_TRUE(after.ok) << after.error;
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_THAT(after.out, HasSubstr("recovered\n"));
  EXPECT_THAT(after.out, Not(HasSubstr("sleep"))) << "the bomb's processes are gone";
}

TEST_P(ConfinementTest, CpuQuotaHolds) {
  auto cell = NewCell(CgroupLimits{256ull << 20, 64, 200});  // a fifth of a CPU
  ASSERT_TRUE(cell);
  if (!HasCgroupOrReportsWhy(*cell)) GTEST_SKIP() << "no cgroup: limits not enforced (reported)";
  ProbeRun r = Probe(*cell, {"spin", "1.0"});
  ASSERT_EQ(r.exit_code, 0) << r.error << r.err;
  const int cpu_ms = std::stoi(FactMap(r.out)["cpu_ms"]);
  EXPECT_LT(cpu_ms, 450) << "1 s of wall time at 20% of a CPU";
  EXPECT_GT(cpu_ms, 10);  // it ran at all (a loaded CI machine may give less than the quota)
}

// The cell's processes see their cgroup as "/" in every hierarchy: pid 1 joined the cell's
// cgroup before it created its cgroup namespace (a late join would show a path like
// "/../mcpcell/<id>"). No cgroupfs is mounted inside, so nothing can move itself out.
TEST_P(ConfinementTest, CgroupNamespaceRootIsTheCellsCgroupAndNoCgroupfsInside) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  ProbeRun r = Probe(*cell, {"cgroup"});
  ASSERT_EQ(r.exit_code, 0) << r.error << r.err;
  auto facts = Facts(r.out);
  ASSERT_GE(facts.size(), 2u) << r.out;
  for (const auto& [hierarchy, path] : facts) {
    if (hierarchy == "cgroup_mounts") {
      EXPECT_EQ(path, "0") << r.out;
    } else {
      EXPECT_EQ(path, "/") << hierarchy << "\n" << r.out;
    }
  }
}

TEST_P(ConfinementTest, WithoutACgroupTheCellSaysLimitsAreNotEnforced) {
  CellSpec spec = ProbeSpec(state_);
  CellCreateOptions options = TestCreateOptions();
  options.skip_cgroup = true;
  Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, options);
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  EXPECT_EQ((*cell)->cgroup(), nullptr);
  EXPECT_FALSE(HasCgroupOrReportsWhy(**cell));
}

INSTANTIATE_TEST_SUITE_P(Cells, ConfinementTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Unparked" : "Made";
                         });

}  // namespace
}  // namespace mcpcell::sandbox
