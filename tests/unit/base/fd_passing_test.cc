// SCM_RIGHTS passing over a real SOCK_SEQPACKET pair: bytes and fds arrive together and
// owned; more fds than the receiver takes, or a longer datagram, are flagged, never leaked.
#include "base/fd_passing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace mcpcell {
namespace {

class FdPassing : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    a_.Reset(sv[0]);
    b_.Reset(sv[1]);
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    r_.Reset(p[0]);
    w_.Reset(p[1]);
  }
  Result<size_t> Send(const std::string& bytes, std::vector<int> fds) {
    return SendWithFds(a_.get(),
                       std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), fds,
                       "test socket");
  }
  // True when the pipe's read end sees EOF: no copy of its write end is left open.
  bool WriteEndClosed() {
    w_.Reset();
    char c;
    return ::read(r_.get(), &c, 1) == 0;
  }
  UniqueFd a_, b_, r_, w_;
};

TEST_F(FdPassing, BytesAndFdsArriveTogetherAndOwned) {
  auto sent = Send("hello", {w_.get(), w_.get()});
  ASSERT_TRUE(sent) << sent.error().message;
  EXPECT_EQ(*sent, 5u);
  uint8_t buf[16];
  auto got = ReceiveWithFds(b_.get(), buf, 4, 0, "test socket");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), got->size), "hello");
  ASSERT_EQ(got->fds.size(), 2u);
  EXPECT_FALSE(got->truncated || got->fds_truncated || got->foreign_control);
  EXPECT_EQ(::fcntl(got->fds[0].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(got->fds[1].get(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(::read(r_.get(), &c, 1), 1);
  got->fds.clear();
  EXPECT_TRUE(WriteEndClosed());
}

TEST_F(FdPassing, TooManyFdsAndLongDatagramsAreFlaggedAndClosed) {
  ASSERT_TRUE(Send("0123456789", {w_.get(), w_.get(), w_.get()}));
  uint8_t buf[4];
  auto got = ReceiveWithFds(b_.get(), buf, 1, 0, "test socket");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(got->truncated);
  EXPECT_TRUE(got->fds_truncated);
  EXPECT_LE(got->fds.size(), 1u);
  got->fds.clear();
  EXPECT_TRUE(WriteEndClosed()) << "the fds that did not fit were closed by the kernel";
}

TEST_F(FdPassing, ErrorsNameTheCallAndTheSocket) {
  auto over = Send("x", std::vector<int>(kMaxPassedFds + 1, 0));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message, "sendmsg(test socket): too many fds");
  uint8_t buf[4];
  auto none = ReceiveWithFds(b_.get(), buf, 0, MSG_DONTWAIT, "test socket");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().err, EAGAIN);
  EXPECT_EQ(none.error().message.rfind("recvmsg(test socket)", 0), 0u) << none.error().message;
}

}  // namespace
}  // namespace mcpcell
