// Issue 27: Cell::Destroy's report (sandbox/backend.h DestroyReport) for a real cell with
// background processes running: the processes counted before the kill, init reaped (its
// namespaces gone), the cgroup and the cell dir (its ephemeral workspace first) removed,
// the id range released, and nothing in `left`; and each of those really gone on the host.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::CellDirNames;
using celltest::Eventually;
using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;

// The host pids in the cell's cgroup (cgroup.procs of its first directory).
std::vector<pid_t> CgroupProcs(const Cell& cell) {
  std::vector<pid_t> pids;
  std::ifstream in(cell.cgroup()->Paths().front() + "/cgroup.procs");
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// The entries of <state_dir>/idranges (the id range claims).
size_t IdRangeClaims(const std::string& state_dir) {
  size_t n = 0;
  if (DIR* d = ::opendir((state_dir + "/idranges").c_str())) {
    while (struct dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

TEST(CellDestroy, TheReportCountsTheKilledProcessesAndNamesWhatWasRemoved) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(made) << made.error().message;
  Cell& cell = **made;
  EXPECT_FALSE(cell.last_destroy_report()) << "no report before Destroy";
  const size_t idle = cell.cgroup() ? CgroupProcs(cell).size() : 0;

  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 100 & sleep 100 & wait"};
  o.detached_output = "/tmp/bg.log";
  o.detached_output_cap = 4096;
  auto started = cell.channel().Exec(o);
  ASSERT_TRUE(started) << started.error().message;

  std::vector<pid_t> before;
  if (cell.cgroup()) {
    // The shell and its two sleeps join the processes the idle cell had.
    ASSERT_TRUE(Eventually([&] { return CgroupProcs(cell).size() >= idle + 3; }))
        << CgroupProcs(cell).size() << " processes, idle " << idle;
    before = CgroupProcs(cell);
  }
  const std::vector<std::string> cgroup_paths =
      cell.cgroup() ? cell.cgroup()->Paths() : std::vector<std::string>{};
  const std::string dir = cell.dir();
  const bool own_workspace = access((dir + "/workspace").c_str(), F_OK) == 0;
  const bool had_id_range = cell.id_map().slot >= 0;
  ASSERT_EQ(IdRangeClaims(state.path()), had_id_range ? 1u : 0u);

  Status destroyed = cell.Destroy();
  ASSERT_TRUE(destroyed) << destroyed.error().message;
  std::optional<DestroyReport> report = cell.last_destroy_report();
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->result);
  EXPECT_TRUE(report->left.empty())
      << report->left.front().what << ": " << report->left.front().why;

  if (cell.cgroup()) {
    ASSERT_TRUE(report->processes_killed);
    EXPECT_EQ(*report->processes_killed, before.size());
    for (pid_t pid : before) EXPECT_EQ(::kill(pid, 0) != 0 ? errno : 0, ESRCH) << pid;
  } else {
    EXPECT_FALSE(report->processes_killed) << "no cgroup: nothing counted them";
  }
  EXPECT_TRUE(report->init_reaped);
  EXPECT_EQ(report->namespaces_gone,
            (std::vector<std::string>{"pid", "mount", "net", "ipc", "uts"}));
  EXPECT_EQ(report->cgroup_removed, cgroup_paths);
  for (const std::string& p : cgroup_paths) EXPECT_NE(access(p.c_str(), F_OK), 0) << p;
  std::vector<std::string> dirs;
  if (own_workspace) dirs.push_back(dir + "/workspace");
  dirs.push_back(dir);
  EXPECT_EQ(report->dirs_removed, dirs);
  EXPECT_NE(access(dir.c_str(), F_OK), 0);
  EXPECT_TRUE(CellDirNames(state.path()).empty());
  EXPECT_EQ(report->id_range_released, had_id_range);
  EXPECT_EQ(IdRangeClaims(state.path()), 0u);

  // Destroy is idempotent and the report stays the first one's.
  EXPECT_TRUE(cell.Destroy());
  ASSERT_TRUE(cell.last_destroy_report());
  EXPECT_EQ(cell.last_destroy_report()->dirs_removed, dirs);
}

// A frozen cell's processes are counted too (cgroup.procs lists frozen tasks).
TEST(CellDestroy, AFrozenCellsProcessesAreCounted) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(made) << made.error().message;
  Cell& cell = **made;
  if (!cell.cgroup()) GTEST_SKIP() << "no cgroup here (unprivileged): a cell cannot be paused";
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 100 & wait"};
  o.detached_output = "/tmp/bg.log";
  o.detached_output_cap = 4096;
  const size_t idle = CgroupProcs(cell).size();
  auto started = cell.channel().Exec(o);
  ASSERT_TRUE(started) << started.error().message;
  ASSERT_TRUE(Eventually([&] { return CgroupProcs(cell).size() >= idle + 2; }));
  ASSERT_TRUE(cell.Freeze());
  const size_t frozen = CgroupProcs(cell).size();
  ASSERT_TRUE(cell.Destroy());
  auto report = cell.last_destroy_report();
  ASSERT_TRUE(report);
  ASSERT_TRUE(report->processes_killed);
  EXPECT_EQ(*report->processes_killed, frozen);
  EXPECT_TRUE(report->left.empty());
  EXPECT_TRUE(report->init_reaped);
}

}  // namespace
}  // namespace mcpcell::sandbox
