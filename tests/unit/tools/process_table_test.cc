// The sessions' process table (tools/process_table.h) as session-owned state: a process's
// end reaches the end listener (the audit trail's exec.end) exactly once, whoever sees it
// first; ending a session drops its processes and its python interpreter; other sessions
// keep theirs. The processes are DetachedExecs over socketpairs standing in for cell init
// (a hang-up without a report: the program was lost with its cell).
#include "tools/process_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace mcpcell::tools {
namespace {

struct Ended {
  std::string session, tenant, id, state;
};

class ProcessTableTest : public ::testing::Test {
 protected:
  ProcessTableTest() {
    table_.SetEndListener([this](const BackgroundProcess& p, const ProcessState& s) {
      ended_.push_back({p.session_key, p.tenant, p.id, s.state});
    });
  }
  ~ProcessTableTest() override {
    for (int fd : init_ends_) ::close(fd);
  }

  // A process of session `key` in cell "c1"; `init_end` gets cell init's end of its socket.
  std::shared_ptr<BackgroundProcess> Start(const std::string& key, int* init_end = nullptr) {
    int events[2], in[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, events), 0);
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    ::close(in[0]);
    auto p = std::make_shared<BackgroundProcess>();
    p->id = table_.NextId(key);
    p->session_key = key;
    p->tenant = "acme";
    p->kind = "command";
    p->cell_id = "c1";
    p->exec = std::make_shared<sandbox::DetachedExec>(7, 42, UniqueFd(events[0]), UniqueFd(in[1]));
    if (init_end) {
      *init_end = events[1];
    } else {
      init_ends_.push_back(events[1]);
    }
    table_.Add(key, {}, p);
    return p;
  }

  ProcessTable table_;
  std::vector<Ended> ended_;
  std::vector<int> init_ends_;
};

TEST_F(ProcessTableTest, ARunningProcessIsNotReportedAndALostOneOnlyOnce) {
  int init_end = -1;
  auto p = Start("s1", &init_end);
  EXPECT_EQ(table_.Inspect(*p, "c1").state, "running");
  EXPECT_TRUE(ended_.empty());
  ::close(init_end);  // init hung up without an exit report: lost with its cell
  EXPECT_EQ(table_.Inspect(*p, "c1").state, "stopped");
  EXPECT_EQ(table_.Inspect(*p, "c1").state, "stopped");
  table_.EndSession("s1", "client closed");
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(ended_[0].session, "s1");
  EXPECT_EQ(ended_[0].tenant, "acme");
  EXPECT_EQ(ended_[0].id, "p1");
  EXPECT_EQ(ended_[0].state, "stopped");
}

TEST_F(ProcessTableTest, EndingASessionEndsItsProcessesAndInterpreterButNoOtherSessions) {
  Start("s1");
  Start("s1");
  Start("s2");
  auto python = table_.Interpreter("s1");
  python->process_id = "p1";
  EXPECT_EQ(table_.Interpreter("s1"), python);
  table_.EndSession("s1", "client closed");
  ASSERT_EQ(ended_.size(), 2u);
  EXPECT_EQ(ended_[0].id, "p1");
  EXPECT_EQ(ended_[1].id, "p2");
  for (const Ended& e : ended_) {
    EXPECT_EQ(e.session, "s1");
    EXPECT_EQ(e.state, "stopped");  // still running when its session ended
  }
  EXPECT_TRUE(table_.List("s1").empty());
  EXPECT_EQ(table_.List("s2").size(), 1u);
  EXPECT_NE(table_.Interpreter("s1"), python) << "the interpreter went with the session";
  EXPECT_TRUE(table_.Interpreter("s1")->process_id.empty());
  table_.EndSession("s1", "again");  // nothing left: nothing reported twice
  EXPECT_EQ(ended_.size(), 2u);
  table_.EndAll("server shutdown");
  ASSERT_EQ(ended_.size(), 3u);
  EXPECT_EQ(ended_[2].session, "s2");
  EXPECT_EQ(table_.sessions(), 0u);
}

TEST_F(ProcessTableTest, APruneDropsSessionsWhoseCellSessionIsGoneAndReportsThem) {
  Start("gone");  // added without a CellSession: as one whose session was destroyed
  table_.Prune();
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(ended_[0].session, "gone");
  EXPECT_TRUE(table_.List("gone").empty());
}

}  // namespace
}  // namespace mcpcell::tools
