// The pool's frames over a real SOCK_SEQPACKET pair: what goes in comes out with its fds,
// and every broken frame is an error that names the problem, its fds closed.
#include "run_pool/protocol.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "base/fd_passing.h"

namespace mcpcell::run_pool {
namespace {

using json = nlohmann::json;

class Frames : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    a_.Reset(sv[0]);
    b_.Reset(sv[1]);
  }
  // Sends raw bytes with `fds` from a to b.
  void Raw(const std::string& bytes, std::vector<int> fds = {}) {
    auto sent = SendWithFds(a_.get(),
                            std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                            fds, "test");
    ASSERT_TRUE(sent) << sent.error().message;
  }
  UniqueFd a_, b_;
};

TEST_F(Frames, AFrameAndItsFdsArrive) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  const int fds[] = {w.get(), w.get()};
  ASSERT_TRUE(SendFrame(a_.get(), json{{"op", "status"}}, fds));
  auto got = ReceiveFrame(b_.get(), kMaxStdioFds);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->body, (json{{"op", "status"}}));
  ASSERT_EQ(got->fds.size(), 2u);
  ASSERT_EQ(::write(got->fds[1].get(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(::read(r.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST_F(Frames, BrokenFramesAreNamed) {
  Raw("not json");
  auto bad = ReceiveFrame(b_.get(), 0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "a frame that is not valid JSON");
  Raw("[1]");
  EXPECT_EQ(ReceiveFrame(b_.get(), 0).error().message, "a frame that is not a JSON object");
  Raw(std::string(kMaxPoolFrameBytes + 1, ' '));
  EXPECT_EQ(ReceiveFrame(b_.get(), 0).error().err, EMSGSIZE);
  Raw("{}", {0, 1, 2, 0});
  auto many = ReceiveFrame(b_.get(), kMaxStdioFds);
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().message, "a frame carried 4 fds, at most 3 allowed here");
  Raw("{}", {0});
  EXPECT_EQ(ReceiveFrame(b_.get(), 0).error().message,
            "a frame carried 1 fds, at most 0 allowed here");
  auto none = ReceiveFrame(b_.get(), 0, MSG_DONTWAIT);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().err, EAGAIN);
  a_.Reset();
  auto closed = ReceiveFrame(b_.get(), 0);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().err, 0);
}

TEST_F(Frames, AnExecRequestIsCheckedFieldByField) {
  std::vector<UniqueFd> none;
  json ok = {{"op", "exec"},
             {"cell", "k"},
             {"argv", {"true"}},
             {"env", {"A=1"}},
             {"cwd", "/tmp"},
             {"timeout_ms", 2500},
             {"stdio", {false, false, false}}};
  auto parsed = ParseExec(ok, none);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->key, "k");
  EXPECT_EQ(parsed->exec.argv, std::vector<std::string>{"true"});
  EXPECT_EQ(parsed->exec.timeout, std::chrono::milliseconds(2500));
  json bad = ok;
  bad["env"] = {"NOEQUALS"};
  EXPECT_NE(ParseExec(bad, none).error().message.find("is not KEY=VALUE"), std::string::npos);
  bad = ok;
  bad["stdio"] = {true, false, false};
  EXPECT_EQ(ParseExec(bad, none).error().message,
            "\"stdio\" flags 1 fds but 0 came with the request");
  bad = ok;
  bad["extra"] = 1;
  EXPECT_EQ(ParseExec(bad, none).error().message, "unknown field \"extra\"");
}

}  // namespace
}  // namespace mcpcell::run_pool
