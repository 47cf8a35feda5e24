// Issue 32: detached execs (sandbox/detached_exec.h, DetachedExecRequest) in real cells.
// Cell init runs the program in the background, copies its stdout and stderr into a file
// of the cell up to a cap (then one marker line, and the program is not blocked), keeps
// its stdin a pipe the server writes, reports its exit on the exec's event socket, and a
// signal reaches it by its exec id; a cell that ends loses it, which Poll says.
#include "sandbox/detached_exec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "sandbox/cell.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class DetachedExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    auto cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
    ASSERT_TRUE(cell.ok()) << cell.error().message;
    cell_ = std::move(cell).value();
  }
  void TearDown() override {
    if (cell_) {
      EXPECT_TRUE(cell_->Destroy().ok());
    }
  }
  Result<ExecResult> Start(const std::string& script, const std::string& output,
                           uint64_t cap = 1 << 20) {
    ExecOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.detached_output = output;
    o.detached_output_cap = cap;
    return cell_->channel().Exec(o);
  }
  // The exit, waiting up to 30 s; fails the test when it does not come.
  ExecResult Exit(DetachedExec& exec) {
    auto r = exec.Poll(30s);
    EXPECT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r.ok() && r->has_value()) << "no exit within 30 s";
    return r.ok() && r->has_value() ? **r : ExecResult{};
  }

  TempStateDir state_;
  std::unique_ptr<Cell> cell_;
};

TEST_F(DetachedExecTest, OutputGoesToTheFileAndStdinComesFromTheServer) {
  auto started = Start("echo out; echo err >&2; cat; echo done", "/tmp/bg.log");
  ASSERT_TRUE(started.ok()) << started.error().message;
  ASSERT_TRUE(started->detached);
  DetachedExec& exec = *started->detached;
  EXPECT_GT(exec.pid(), 1);
  auto running = exec.Poll(0ms);
  ASSERT_TRUE(running.ok());
  EXPECT_FALSE(running->has_value()) << "cat waits for stdin";
  auto wrote = exec.WriteStdin("ping\n");
  ASSERT_TRUE(wrote.ok()) << wrote.error().message;
  EXPECT_EQ(*wrote, 5u);
  exec.CloseStdin();
  ExecResult exit = Exit(exec);
  EXPECT_FALSE(exit.signaled);
  EXPECT_EQ(exit.exit_code, 0);
  // The output read before the exit was reported is in the file.
  auto log = cell_->channel().ReadFile("/tmp/bg.log", 1 << 20);
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(*log, "out\nerr\nping\ndone\n");
  EXPECT_EQ(exec.WriteStdin("x").error().err, EBADF);
}

TEST_F(DetachedExecTest, OutputPastTheCapIsDroppedWithAMarkerAndTheProgramGoesOn) {
  auto started = Start("head -c 2000000 /dev/zero | tr '\\0' a; echo; echo finished >&2",
                       "/tmp/flood.log", 64 * 1024);
  ASSERT_TRUE(started.ok()) << started.error().message;
  ExecResult exit = Exit(*started->detached);
  EXPECT_EQ(exit.exit_code, 0) << "the program was not blocked by a full pipe";
  auto stat = cell_->channel().Stat("/tmp/flood.log");
  ASSERT_TRUE(stat.ok());
  EXPECT_LE(stat->size, 64u * 1024);
  auto log = cell_->channel().ReadFile("/tmp/flood.log", 1 << 20);
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("[mcpcell: output not kept past here: the cap of 65536 bytes"));
  EXPECT_THAT(*log, ::testing::Not(HasSubstr("finished")));
}

TEST_F(DetachedExecTest, ASignalByExecIdEndsItAndTheExitSaysSo) {
  auto started = Start("exec sleep 100", "/tmp/sleep.log");
  ASSERT_TRUE(started.ok()) << started.error().message;
  DetachedExec& exec = *started->detached;
  ASSERT_TRUE(cell_->channel().SignalExec(exec.exec_id(), SIGTERM).ok());
  ExecResult exit = Exit(exec);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signo, SIGTERM);
}

TEST_F(DetachedExecTest, ABadOutputPathIsAnErrorNamingIt) {
  auto started = Start("true", "/no/such/dir/out.log");
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(started.error().message, HasSubstr("output file"));
  EXPECT_THAT(started.error().message, HasSubstr("/no/such/dir/out.log"));
}

TEST_F(DetachedExecTest, ACellThatEndsLosesTheProgramAndPollSaysSo) {
  auto started = Start("exec sleep 100", "/tmp/lost.log");
  ASSERT_TRUE(started.ok()) << started.error().message;
  std::shared_ptr<DetachedExec> exec = started->detached;
  ASSERT_TRUE(cell_->Destroy().ok());
  cell_.reset();
  auto r = exec->Poll(10s);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("the cell ended"));
}

}  // namespace
}  // namespace mcpcell::sandbox
