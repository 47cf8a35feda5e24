// The launch of cell init copies nothing of the server's address space (CLONE_VM,
// sandbox/linux/clone_vm.h): a process whose page tables alone are twice its memory
// cgroup's limit still makes a working cell. A fork-style clone copies those page tables
// and is charged for them, so there the cgroup's OOM killer ends the process instead.
//
// The process is a child of this test (forked before this binary made any thread: it is
// the only test here), moved into a memory cgroup of its own after it built its page
// tables (a move takes no charge along); the test removes the cgroup. Needs root (a
// cgroup of our own): the unprivileged run skips, saying so.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "sandbox/linux/cgroup.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;

constexpr size_t kSpan = 64ull << 30;                       // address space made sparse
constexpr size_t kStride = 2ull << 20;                      // one page table page maps 2 MiB
constexpr uint64_t kPageTablesKib = (kSpan / kStride) * 4;  // 128 MiB of page tables
constexpr uint64_t kLimitBytes = 64ull << 20;               // the cgroup's limit: half that

uint64_t VmPteKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmPTE:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

// Page tables without memory: one written page makes the mapping copyable (an anon_vma),
// then a read every 2 MiB maps the shared zero page and allocates a page-table page.
bool BuildSparsePageTables() {
  void* p = ::mmap(nullptr, kSpan, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  ::madvise(p, kSpan, MADV_NOHUGEPAGE);  // a huge zero page would need no page table
  auto* bytes = static_cast<volatile char*>(p);
  bytes[0] = 1;
  for (size_t off = 0; off < kSpan; off += kStride) (void)bytes[off];
  return true;
}

// The forked child: builds the page tables, enters `cgroup`, makes a cell and runs a program
// in it. Writes what happened to `report` and exits 0 only if the cell worked.
[[noreturn]] void LaunchFromLargeProcess(Cgroup& cgroup, const TempStateDir& state, int report) {
  auto say = [report](const std::string& m) { (void)!::write(report, m.data(), m.size()); };
  if (!BuildSparsePageTables()) say("mmap failed; ");
  const uint64_t pte_kib = VmPteKib();
  say("VmPTE " + std::to_string(pte_kib) + " kB; ");
  if (pte_kib < kPageTablesKib) _exit(2);
  if (Status s = cgroup.AddProcess(::getpid()); !s) {
    say(s.error().message);
    _exit(3);
  }
  auto made = Cell::Create(ProbeSpec(state), TestCreateOptions());
  if (!made) {
    say(made.error().message);
    _exit(4);
  }
  auto run = RunInCell(**made, {"/bin/sh", "-c", "echo launched"});
  say(run.ok ? "cell said " + run.out : run.error);
  const bool destroyed = (*made)->Destroy().ok();
  _exit(run.ok && run.out == "launched\n" && destroyed ? 0 : 5);
}

TEST(CellLaunchCopy, AProcessWhosePageTablesExceedItsMemoryLimitStillLaunchesACell) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the test makes a memory cgroup of its own";
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CgroupLimits limits;
  limits.memory_max_bytes = kLimitBytes;
  auto cgroup = CreateCellCgroup("launch-copy-" + GenerateCellId(), limits);
  ASSERT_TRUE(cgroup) << cgroup.error().message;
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    LaunchFromLargeProcess(**cgroup, state, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) report.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) +
                                    " (the cgroup's OOM killer: the launch copied the page "
                                    "tables?)"
                              : "exit " + std::to_string(WEXITSTATUS(status)))
      << "; " << report;
  EXPECT_NE(report.find("cell said launched"), std::string::npos) << report;
  EXPECT_TRUE((*cgroup)->Destroy().ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
