// The control protocol against hostile input: everything from a cell is untrusted, so every
// malformed frame must be rejected with an error that names the problem, and fds that
// arrive with a bad frame must be closed, never leaked.
#include "sandbox/control/protocol.h"

#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

namespace mcpcell::sandbox::control {
namespace {

using testing::HasSubstr;

size_t OpenFdCount() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

void PutU32(std::vector<uint8_t>& frame, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) frame[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Sends raw bytes with `nfds` copies of /dev/null attached, bypassing the encoder.
void SendRaw(int fd, const std::vector<uint8_t>& bytes, int nfds) {
  std::vector<int> fds;
  for (int i = 0; i < nfds; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * 16));
  if (nfds > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * nfds);
  }
  ASSERT_EQ(sendmsg(fd, &msg, 0), static_cast<ssize_t>(bytes.size())) << strerror(errno);
  for (int f : fds) close(f);
}

ExecRequest SampleExec() {
  ExecRequest r;
  r.request_id = 42;
  r.argv = {"/usr/bin/python3", "-c", "print(1)"};
  r.env = {"A=1", "B="};
  r.cwd = "/workspace/sub";
  return r;
}

class SocketPair : public testing::Test {
 protected:
  void SetUp() override {
    auto pair = CreateControlSocketPair();
    ASSERT_TRUE(pair.ok()) << pair.error().message;
    a_ = std::move(pair->first);
    b_ = std::move(pair->second);
  }
  UniqueFd a_, b_;
};

TEST(ProtocolCodec, EveryMessageRoundTrips) {
  ListDirReply list{7,
                    {{"a.txt", {FileType::kRegular, 0644, 12, 99, 1000, 1000, 1}},
                     {"dir", {FileType::kDirectory, 0755, 0, -5, 0, 0, 2}}},
                    1234};
  std::vector<Message> messages = {
      Ready{{{"mounts", 1200}, {"pivot_root", 30}}},
      SetupFailed{"rootfs: mount: EPERM"},
      SignalRequest{1, 2, 9},
      ReadFileRequest{3, "/etc/hosts", 10, 4096},
      WriteFileRequest{4, "x", 5, kWriteCreate | kWriteTruncate, 0600, std::string("a\0b", 3)},
      ListDirRequest{5, "/", 77},
      StatRequest{6, "/tmp", 1},
      MkdirRequest{8, "/a/b", 0700, 1},
      RemoveRequest{9, "/a", 1},
      StatsRequest{10},
      ErrorReply{11, ENOENT, "no such file"},
      OkReply{12},
      ExecStarted{13, 77},
      ExecExited{14, 1, 0, 9, 100, 200, 1 << 20},
      ReadFileReply{15, 3, 1, "abc"},
      StatReply{16, {FileType::kSymlink, 0777, 4, 1, 2, 3, 1}},
      list,
      StatsReply{17, 2, 30, 4096},
      RenameRequest{18, "/a", "/b", 1}};
  for (const Message& m : messages) {
    std::vector<uint8_t> frame = EncodeFrame(m, 0);
    Result<Message> back = DecodeFrame(frame, 0);
    ASSERT_TRUE(back.ok()) << MessageName(m) << ": " << back.error().message;
    EXPECT_EQ(back->index(), m.index());
    EXPECT_EQ(EncodeFrame(*back, 0), frame) << MessageName(m);  // byte-identical re-encode
  }
  Result<Message> exec = DecodeFrame(EncodeFrame(SampleExec(), 4), 4);
  ASSERT_TRUE(exec.ok()) << exec.error().message;
  EXPECT_EQ(std::get<ExecRequest>(*exec).argv, SampleExec().argv);
  EXPECT_EQ(std::get<ExecRequest>(*exec).cwd, "/workspace/sub");
  EXPECT_EQ(RequestIdOf(*exec), 42u);
}

// A detached exec (issue 32) carries its stdin and event socket, nothing else, and names
// a non-empty output file with a cap above 0.
TEST(ProtocolCodec, DetachedExecRequestCarriesTwoFdsAndACappedOutputFile) {
  DetachedExecRequest request{21,           {"/bin/sh", "-c", "sleep 1"},           {"A=1"},
                              "/workspace", "/workspace/.mcpcell/processes/p1.log", 1 << 20};
  Result<Message> back = DecodeFrame(EncodeFrame(request, 2), 2);
  ASSERT_TRUE(back.ok()) << back.error().message;
  const auto& got = std::get<DetachedExecRequest>(*back);
  EXPECT_EQ(got.argv, request.argv);
  EXPECT_EQ(got.output_path, request.output_path);
  EXPECT_EQ(got.output_cap, 1u << 20);
  EXPECT_EQ(RequiredFdCount(*back), 2u);
  EXPECT_EQ(RequestIdOf(*back), 21u);
  EXPECT_STREQ(MessageName(*back), "DetachedExecRequest");
  EXPECT_THAT(DecodeFrame(EncodeFrame(request, 4), 4).error().message, HasSubstr("needs 2 fds"));
  DetachedExecRequest no_path = request;
  no_path.output_path.clear();
  EXPECT_THAT(DecodeFrame(EncodeFrame(no_path, 2), 2).error().message,
              HasSubstr("DetachedExecRequest.output_path: empty"));
  DetachedExecRequest no_cap = request;
  no_cap.output_cap = 0;
  EXPECT_THAT(DecodeFrame(EncodeFrame(no_cap, 2), 2).error().message,
              HasSubstr("DetachedExecRequest.output_cap: must be > 0"));
}

// ExecExited carries no fds (the server keeps its own copies of the output pipes): a
// hostile init cannot slip one in with it.
TEST(ProtocolCodec, ExecExitedCarriesNoFds) {
  ExecExited exited{3, 0, 0, 0, 0, 0, 0};
  Result<Message> ok = DecodeFrame(EncodeFrame(exited, 0), 0);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(RequiredFdCount(*ok), 0u);
  EXPECT_THAT(DecodeFrame(EncodeFrame(exited, 2), 2).error().message, HasSubstr("needs 0 fds"));
}

// Ready carries the egress listener only when it says so; a hostile init can neither
// slip an fd into a Ready that declares none nor claim one it did not send.
TEST(ProtocolCodec, ReadyCarriesTheEgressListenerOnlyWhenDeclared) {
  Ready with{{{"net", 5}}, 1};
  Result<Message> ok = DecodeFrame(EncodeFrame(with, 1), 1);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(std::get<Ready>(*ok).egress_listener, 1);
  EXPECT_THAT(DecodeFrame(EncodeFrame(with, 0), 0).error().message, HasSubstr("needs 1 fds"));
  Ready without{{{"net", 5}}, 0};
  EXPECT_THAT(DecodeFrame(EncodeFrame(without, 1), 1).error().message, HasSubstr("needs 0 fds"));
  Ready bad{{{"net", 5}}, 2};
  EXPECT_THAT(DecodeFrame(EncodeFrame(bad, 1), 1).error().message,
              HasSubstr("Ready.egress_listener: must be 0 or 1"));
}

TEST(ProtocolCodec, EveryTruncationIsRejected) {
  std::vector<uint8_t> frame = EncodeFrame(SampleExec(), 4);
  for (size_t len = 0; len < frame.size(); ++len) {
    std::vector<uint8_t> cut(frame.begin(), frame.begin() + len);
    // Keep the header's payload_len consistent so the field decoder itself is exercised.
    if (len >= 12) PutU32(cut, 8, static_cast<uint32_t>(len - 12));
    Result<Message> r = DecodeFrame(cut, 4);
    EXPECT_FALSE(r.ok()) << "prefix of " << len << " bytes decoded";
  }
}

TEST(ProtocolCodec, PayloadLengthMustMatch) {
  std::vector<uint8_t> frame = EncodeFrame(OkReply{1}, 0);
  PutU32(frame, 8, 1000);
  Result<Message> r = DecodeFrame(frame, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("payload_len 1000"));
}

TEST(ProtocolCodec, OversizedStringLengthNamesTheField) {
  ReadFileRequest req{1, "/x", 0, 10};
  std::vector<uint8_t> frame = EncodeFrame(req, 0);
  PutU32(frame, 12 + 8, 1u << 30);  // the path's length prefix
  Result<Message> r = DecodeFrame(frame, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("ReadFileRequest.path"));
  EXPECT_THAT(r.error().message, HasSubstr("exceeds cap"));

  PutU32(frame, 12 + 8, 100);  // under the cap but past the end
  r = DecodeFrame(frame, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("runs past the end"));
}

TEST(ProtocolCodec, OversizedCountsAreRejectedBeforeAllocating) {
  std::vector<uint8_t> frame = EncodeFrame(SampleExec(), 4);
  PutU32(frame, 12 + 8, kMaxArgs + 1);  // argv count
  Result<Message> r = DecodeFrame(frame, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("ExecRequest.argv: count 4097 exceeds cap"));
  PutU32(frame, 12 + 8, 4000);  // under the cap, but more items than bytes left
  r = DecodeFrame(frame, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("runs past the end"));
}

TEST(ProtocolCodec, BadTypesMagicTrailingBytesAndFlags) {
  std::vector<uint8_t> frame = EncodeFrame(OkReply{1}, 0);
  std::vector<uint8_t> bad = frame;
  bad[4] = 0;
  bad[5] = 0;
  EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("unknown message type 0"));
  bad[4] = 200;
  EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("unknown message type 200"));
  bad = frame;
  bad[0] ^= 0xff;
  EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("bad magic"));
  bad = frame;
  bad.push_back(0);
  PutU32(bad, 8, static_cast<uint32_t>(bad.size() - 12));
  EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("1 trailing bytes"));

  ExecRequest no_bool = SampleExec();
  no_bool.report_start = 2;
  EXPECT_THAT(DecodeFrame(EncodeFrame(no_bool, 4), 4).error().message,
              HasSubstr("ExecRequest.report_start: must be 0 or 1"));
  bad = EncodeFrame(ExecExited{1, 2, 0, 0, 0, 0, 0}, 0);
  EXPECT_THAT(DecodeFrame(bad, 0).error().message,
              HasSubstr("ExecExited.signaled: must be 0 or 1"));
  bad = EncodeFrame(StatReply{1, {static_cast<FileType>(9), 0, 0, 0, 0, 0, 0}}, 0);
  EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("unknown file type 9"));
  for (const std::string& name :
       std::vector<std::string>{"..", "a/b", std::string("a\0b", 3), ""}) {
    bad = EncodeFrame(ListDirReply{1, {{name, {}}}, 0}, 0);
    EXPECT_THAT(DecodeFrame(bad, 0).error().message, HasSubstr("invalid file name")) << name;
  }
}

TEST(ProtocolCodec, FdCountMustMatchTheMessage) {
  EXPECT_THAT(DecodeFrame(EncodeFrame(SampleExec(), 0), 0).error().message,
              HasSubstr("ExecRequest: needs 4 fds, got 0"));
  EXPECT_THAT(DecodeFrame(EncodeFrame(OkReply{1}, 1), 1).error().message,
              HasSubstr("OkReply: needs 0 fds, got 1"));
  EXPECT_THAT(DecodeFrame(EncodeFrame(OkReply{1}, 1), 0).error().message,
              HasSubstr("header says 1 fds, 0 arrived"));
}

TEST(ProtocolCodec, RandomMutationsNeverCrash) {
  std::mt19937 rng(12345);
  std::vector<uint8_t> base = EncodeFrame(
      ListDirReply{1, {{"a", {}}, {"bb", {FileType::kDirectory, 0, 0, 0, 0, 0, 0}}}, 0}, 0);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> f = base;
    for (int k = 0; k < 3; ++k) f[12 + rng() % (f.size() - 12)] = static_cast<uint8_t>(rng());
    accepted += DecodeFrame(f, 0).ok();
  }
  EXPECT_LT(accepted, 20000);  // most mutations hit a length or a check
}

TEST_F(SocketPair, FdsTravelWithTheirFrame) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  int stdio_and_events[4] = {p[0], p[1], p[1], p[0]};
  ASSERT_TRUE(SendMessage(a_.get(), SampleExec(), stdio_and_events).ok());
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->fds.size(), 4u);
  ASSERT_EQ(write(r->fds[1].get(), "hi", 2), 2);  // the received write end is the pipe's
  char buf[2];
  ASSERT_EQ(read(p[0], buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
  EXPECT_NE(fcntl(r->fds[0].get(), F_GETFD) & FD_CLOEXEC, 0);  // never leak into children
  close(p[0]);
  close(p[1]);
}

TEST_F(SocketPair, TooManyFdsAreRejectedAndClosed) {
  size_t before = OpenFdCount();
  SendRaw(a_.get(), EncodeFrame(OkReply{1}, 5), 5);
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("more than 4 fds"));
  EXPECT_EQ(OpenFdCount(), before);
}

TEST_F(SocketPair, FdsOfAMalformedFrameAreClosed) {
  size_t before = OpenFdCount();
  std::vector<uint8_t> frame = EncodeFrame(SampleExec(), 4);
  frame.resize(frame.size() - 1);
  PutU32(frame, 8, static_cast<uint32_t>(frame.size() - 12));
  SendRaw(a_.get(), frame, 4);
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("ExecRequest.report_start"));
  EXPECT_EQ(OpenFdCount(), before);
}

// A TCP socket (over loopback) whose peer never reads, with unsent data and SO_LINGER set
// to `linger_s`: closing its last reference would wait up to `linger_s`.
UniqueFd LingeringTcpSocket(int linger_s, UniqueFd& listener, UniqueFd& accepted) {
  listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  (void)::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  accepted = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_GE(accepted.get(), 0);
  int small = 4096;  // fills sooner
  ::setsockopt(accepted.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string chunk(64 * 1024, 'x');
  pollfd pfd = {client.get(), POLLOUT, 0};
  while (poll(&pfd, 1, 200) > 0 && ::write(client.get(), chunk.data(), chunk.size()) > 0) {
  }
  const struct linger slow = {1, linger_s};
  EXPECT_EQ(::setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &slow, sizeof slow), 0);
  return client;
}

// A socket that comes with a frame and is not used is closed at once, even when the peer
// set SO_LINGER on it with data still unsent (a plain close() would wait out the linger
// time on the receiving thread): both when the frame is rejected and when the caller
// leaves the fds of a good frame in the Received.
TEST_F(SocketPair, AnUnusedSocketFromThePeerIsClosedWithoutLingering) {
  for (bool rejected : {true, false}) {
    UniqueFd listener, accepted;
    UniqueFd lingering = LingeringTcpSocket(30, listener, accepted);
    const int fds[1] = {lingering.get()};
    const Message message =
        rejected ? Message(OkReply{1}) : Message(Ready{{}, /*egress_listener=*/1});
    Status sent = SendMessage(a_.get(), message, fds);  // an OkReply carries no fd: rejected
    ASSERT_TRUE(sent.ok()) << sent.error().message;
    const auto start = std::chrono::steady_clock::now();
    lingering.Reset();  // the copy in flight is now the last reference
    {
      Result<Received> r = ReceiveMessage(b_.get());
      ASSERT_EQ(r.ok(), !rejected);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << (rejected ? "rejected frame" : "unused fd of a good frame");
  }
}

TEST_F(SocketPair, OversizedDatagramIsRejected) {
  std::vector<uint8_t> huge = EncodeFrame(OkReply{1}, 0);
  huge.resize(kMaxFrameBytes + 100);
  SendRaw(a_.get(), huge, 0);
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("exceeds cap"));
  // The channel stays usable: the next frame decodes.
  ASSERT_TRUE(SendMessage(a_.get(), OkReply{2}).ok());
  r = ReceiveMessage(b_.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(RequestIdOf(r->message), 2u);
}

TEST_F(SocketPair, LargestLegalFrameFits) {
  ReadFileReply big{1, kMaxFileChunkBytes, 1, std::string(kMaxFileChunkBytes, 'x')};
  ASSERT_TRUE(SendMessage(a_.get(), big).ok());
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(std::get<ReadFileReply>(r->message).data.size(), kMaxFileChunkBytes);
}

TEST_F(SocketPair, SenderRefusesOversizedMessages) {
  ExecRequest r = SampleExec();
  r.argv.assign(10, std::string(60000, 'a'));
  int fds[4] = {0, 1, 2, 0};
  Status s = SendMessage(a_.get(), r, fds);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().err, EMSGSIZE);
}

TEST_F(SocketPair, PeerCloseIsReportedAsClosed) {
  a_.Reset();
  Result<Received> r = ReceiveMessage(b_.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "control channel closed");
  EXPECT_EQ(r.error().err, 0);
}

}  // namespace
}  // namespace mcpcell::sandbox::control
