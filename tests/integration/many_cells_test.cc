// Many live cells hold no thread each (issue 29): a cell's control socket is waited on by
// a reactor (here the process's default one, as for cells made without a reactor), so
// two hundred cells alive at once leave this process's thread count where one cell left
// it, and every one of them still answers a file request and an exec. The death of a
// cell's init completes a call waiting on it with an error that names the cell.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include <future>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int ThreadCount() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

class ManyCellsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    rlimit fds{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &fds), 0);
    fds.rlim_cur = fds.rlim_max;  // a cell holds a few fds; 200 of them exceed 1024
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &fds), 0);
  }
  void TearDown() override {
    for (auto& c : cells_) EXPECT_TRUE(c->Destroy().ok());
    cells_.clear();
  }
  void MakeCells(int n) {
    for (int i = 0; i < n; ++i) {
      auto cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
      ASSERT_TRUE(cell.ok()) << cell.error().message;
      cells_.push_back(std::move(cell).value());
    }
  }

  TempStateDir state_;
  std::vector<std::unique_ptr<Cell>> cells_;
};

TEST_F(ManyCellsTest, TwoHundredLiveCellsHoldNoThreadAndEachStillAnswers) {
  constexpr int kCells = 200;
  // The first cell starts what every cell shares (the default reactor's thread).
  ASSERT_NO_FATAL_FAILURE(MakeCells(1));
  const int threads_with_one = ThreadCount();
  ASSERT_GT(threads_with_one, 0);
  ASSERT_NO_FATAL_FAILURE(MakeCells(kCells - 1));
  EXPECT_EQ(ThreadCount(), threads_with_one) << "threads grew with the number of live cells";
  for (size_t i = 0; i < cells_.size(); ++i) {
    Cell& cell = *cells_[i];
    const std::string mark = "cell-" + std::to_string(i);
    ASSERT_TRUE(cell.WriteFile("/tmp/mark", mark, 0644).ok()) << i;
    Result<std::string> read = cell.ReadFile("/tmp/mark", 100);
    ASSERT_TRUE(read.ok()) << i << ": " << read.error().message;
    EXPECT_EQ(*read, mark);
    ExecOptions o;
    o.argv = {"/bin/cat", "/tmp/mark"};
    Result<ExecResult> r = cell.Exec(o);
    ASSERT_TRUE(r.ok()) << i << ": " << r.error().message;
    EXPECT_EQ(r->exit_code, 0);
    EXPECT_EQ(r->out.data, mark);
  }
  EXPECT_EQ(ThreadCount(), threads_with_one) << "threads grew while the cells answered";
}

// Init is stopped (from the host: SIGSTOP reaches a pid namespace's init from an ancestor),
// so the request is sent and waits; then init is killed. The waiter is woken by the
// reactor's read of EOF, not by a timeout, and the error names the cell.
TEST_F(ManyCellsTest, DeathOfInitCompletesAWaitingCallWithAnErrorNamingTheCell) {
  ASSERT_NO_FATAL_FAILURE(MakeCells(1));
  Cell& cell = *cells_[0];
  ASSERT_EQ(::kill(cell.init_pid(), SIGSTOP), 0);
  auto waiting = std::async(std::launch::async, [&] { return cell.Stat("/etc/passwd", false); });
  ASSERT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "init answered while stopped";
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(cell.init_pid(), SIGKILL), 0);
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "the call hung after init died";
  EXPECT_LT(Clock::now() - t0, 5s);
  auto r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("cell " + cell.id()));
  EXPECT_THAT(r.error().message, HasSubstr("cell init is gone"));
  EXPECT_THAT(r.error().message, HasSubstr("control channel closed"));
  EXPECT_FALSE(cell.usable());
  // Later calls fail at once, naming the cell too.
  Status later = cell.Mkdir("/tmp/x", 0755, false);
  ASSERT_FALSE(later.ok());
  EXPECT_THAT(later.error().message, HasSubstr("cell " + cell.id()));
}

}  // namespace
}  // namespace mcpcell::sandbox
