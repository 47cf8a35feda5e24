// The launch of cell init (sandbox/cell_launch.cc): a failure at each of its steps, on the
// server's side, in the cloned child before execve, or while waiting for Ready, is
// reported with the step's name and leaves no process, fd, cell directory, id range or
// cgroup behind; a cell made after the failures works. Cell init gets the creating
// thread's signal mask (every signal is blocked only around the clone).
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/cell_internal.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using cell_internal::FailNextLaunchAt;
using cell_internal::LaunchStep;
using celltest::CellDirNames;
using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;

// This process's open fds and where they point.
std::map<int, std::string> OpenFds() {
  std::map<int, std::string> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return fds;
  const int own = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::stoi(e->d_name);
    if (fd == own) continue;
    char target[512] = {};
    ssize_t n = ::readlinkat(own, e->d_name, target, sizeof target - 1);
    fds[fd] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
  }
  ::closedir(d);
  return fds;
}

// The children of every thread of this process, zombies included.
std::set<std::string> Children() {
  std::set<std::string> pids;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return pids;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/children");
    std::string pid;
    while (f >> pid) pids.insert(pid);
  }
  ::closedir(d);
  return pids;
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.insert(e->d_name);
  }
  ::closedir(d);
  return names;
}

// Cgroup directories anywhere under /sys/fs/cgroup named after a cell id.
std::string wanted_cgroup;
std::vector<std::string> found_cgroups;
int FindCgroup(const char* path, const struct stat*, int type, struct FTW* ftw) {
  if (type == FTW_D && wanted_cgroup == path + ftw->base) found_cgroups.push_back(path);
  return 0;
}
std::vector<std::string> CgroupsNamed(const std::string& id) {
  wanted_cgroup = id;
  found_cgroups.clear();
  (void)::nftw("/sys/fs/cgroup", FindCgroup, 32, FTW_PHYS);
  return found_cgroups;
}

struct Step {
  LaunchStep step;
  const char* error;  // what the error must say
};

// A cell that works, made, used and released. The first exec of a thread opens that
// thread's wake-up eventfd (cell_channel.cc), kept for the thread's life.
void MakeCellAndRunAProgram(const TempStateDir& state) {
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(made) << made.error().message;
  auto run = RunInCell(**made, {"/bin/sh", "-c", "echo ok"});
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.out, "ok\n");
  ASSERT_TRUE((*made)->Destroy().ok());
}

TEST(CellLaunch, AFailureAtEveryLaunchStepNamesItAndLeavesNothingBehind) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  MakeCellAndRunAProgram(state);
  const std::vector<Step> steps = {
      {LaunchStep::kPrepare, "start: prepare launch (injected)"},
      {LaunchStep::kCgroup, "cgroup: create cgroup (injected)"},
      {LaunchStep::kClone, "start: clone3 (injected)"},
      {LaunchStep::kChildSignals, "cell init child: resetting signal handlers"},
      {LaunchStep::kChildCredentials, "cell init child: keeping capabilities for cell init"},
      {LaunchStep::kChildFds, "cell init child: arranging inherited fds"},
      {LaunchStep::kChildExec, "cell init child: execve(cell init)"},
      {LaunchStep::kInitRecord, "start: init record (injected)"},
      {LaunchStep::kIdMaps, "start: id maps (injected)"},
      {LaunchStep::kGo, "start: send(sync socket, go) (injected)"},
      {LaunchStep::kRootOrder, "start: layers: root order (injected)"},
      {LaunchStep::kHandOver, "start: hand-over (injected)"},
      {LaunchStep::kReady, "setup: wait for Ready (injected)"},
  };
  const std::map<int, std::string> fds_before = OpenFds();
  const std::set<std::string> children_before = Children();
  for (const Step& s : steps) {
    SCOPED_TRACE(s.error);
    CellSpec spec = ProbeSpec(state);
    FailNextLaunchAt(s.step, EIO);
    auto made = Cell::Create(spec, TestCreateOptions());
    ASSERT_FALSE(made) << "the injected failure did not fire";
    EXPECT_THAT(made.error().message, HasSubstr("create cell " + spec.id));
    EXPECT_THAT(made.error().message, HasSubstr(s.error));
    EXPECT_THAT(made.error().message, HasSubstr("EIO"));
    EXPECT_EQ(OpenFds(), fds_before);
    EXPECT_EQ(Children(), children_before);
    EXPECT_EQ(CellDirNames(state.path()), std::set<std::string>{});
    EXPECT_EQ(Entries(state.path() + "/idranges"), std::set<std::string>{});
    EXPECT_EQ(CgroupsNamed(spec.id), std::vector<std::string>{});
  }
  // Every injection was used up: the next cell is made and runs a program.
  MakeCellAndRunAProgram(state);
  EXPECT_EQ(OpenFds(), fds_before);
  EXPECT_EQ(Children(), children_before);
}

TEST(CellLaunch, AnInitThatCannotBeExecutedIsReportedAndLeavesNothing) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  const std::string not_executable = state.path() + "/not-init";
  std::ofstream(not_executable) << "#!/bin/sh\n";
  ASSERT_EQ(::chmod(not_executable.c_str(), 0644), 0);
  const std::map<int, std::string> fds_before = OpenFds();
  const std::set<std::string> children_before = Children();
  CellCreateOptions options = TestCreateOptions();
  options.init_path = not_executable;
  CellSpec spec = ProbeSpec(state);
  auto made = Cell::Create(spec, options);
  ASSERT_FALSE(made);
  EXPECT_THAT(made.error().message,
              HasSubstr("cell init child: execve(cell init) (" + not_executable + "): EACCES"));
  EXPECT_EQ(OpenFds(), fds_before);
  EXPECT_EQ(Children(), children_before);
  EXPECT_EQ(CellDirNames(state.path()), std::set<std::string>{});
  EXPECT_EQ(CgroupsNamed(spec.id), std::vector<std::string>{});
}

// The "SigBlk:" or "SigCgt:" mask of a process, as a number.
uint64_t SignalMask(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1), 0, 16);
  }
  return ~0ull;
}

TEST(CellLaunch, CellInitGetsTheCreatingThreadsSignalMaskNotTheLaunchsFullOne) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(made) << made.error().message;
  const pid_t init = (*made)->init_pid();
  // Inherited from this thread; not every signal, as during the clone.
  EXPECT_NE(SignalMask(init, "SigBlk") & (1ull << (SIGUSR1 - 1)), 0u);
  EXPECT_EQ(SignalMask(init, "SigBlk") & (1ull << (SIGTERM - 1)), 0u);
  ASSERT_TRUE((*made)->Destroy().ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
