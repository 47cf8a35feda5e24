// CellChannel against a scripted cell init on the other end of a real socketpair: replies
// are routed by id, exec output comes from the pipes the channel created, timeouts send
// SIGKILL to the group, and a hostile or dead init makes every call fail promptly (never a
// hang) and reports the death once.
#include "sandbox/cell_channel.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "sandbox/cell_reactor.h"

namespace mcpcell::sandbox {
namespace {

using namespace control;  // NOLINT
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Plays cell init: receives each request and lets the test answer it.
class FakeInit {
 public:
  using Handler = std::function<void(FakeInit&, Received&)>;
  FakeInit() {
    auto pair = CreateControlSocketPair();
    EXPECT_TRUE(pair.ok());
    server_end_ = std::move(pair->first);
    init_end_ = std::move(pair->second);
  }
  ~FakeInit() {
    Close();
    if (thread_.joinable()) thread_.join();
  }
  void Serve(Handler handler) {
    thread_ = std::thread([this, handler] {
      for (;;) {
        Result<Received> r = ReceiveMessage(init_end_.get());
        if (!r.ok()) return;
        handler(*this, *r);
      }
    });
  }
  void Send(const Message& m) {
    Status s = SendMessage(init_end_.get(), m);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  // On an exec's event socket (the 4th fd of its ExecRequest).
  static void SendOn(const UniqueFd& events, const Message& m) {
    Status s = SendMessage(events.get(), m);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void SendRaw(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(init_end_.get(), bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()))
        << strerror(errno);
  }
  void Close() { ::shutdown(init_end_.get(), SHUT_RDWR); }
  UniqueFd TakeServerEnd() { return std::move(server_end_); }

 private:
  UniqueFd server_end_, init_end_;
  std::thread thread_;
};

std::unique_ptr<CellChannel> Connect(FakeInit& init, CellChannel::Options options = {}) {
  return std::make_unique<CellChannel>(init.TakeServerEnd(), std::move(options));
}

TEST(CellChannel, RepliesReachTheirCallers) {
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<MkdirRequest>(&r.message)) {
      if (m->path == "bad")
        return i.Send(ErrorReply{m->request_id, EACCES, "mkdirat(\"bad\"): EACCES"});
      return i.Send(OkReply{m->request_id});
    }
    if (auto* s = std::get_if<StatRequest>(&r.message)) {
      return i.Send(StatReply{s->request_id, {FileType::kDirectory, 0755, 0, 0, 1000, 1000, 2}});
    }
  });
  auto ch = Connect(init);
  EXPECT_TRUE(ch->Mkdir("good").ok());
  Status bad = ch->Mkdir("bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().err, EACCES);
  EXPECT_THAT(bad.error().message, HasSubstr("mkdirat(\"bad\")"));
  auto st = ch->Stat("/x");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->type, FileType::kDirectory);
  // Concurrent calls from many threads each get their own answer.
  std::vector<std::future<bool>> calls;
  for (int k = 0; k < 16; ++k) {
    calls.push_back(std::async(std::launch::async,
                               [&ch, k] { return ch->Mkdir(k % 2 ? "good" : "bad").ok(); }));
  }
  for (int k = 0; k < 16; ++k) EXPECT_EQ(calls[k].get(), k % 2 == 1);
}

TEST(CellChannel, ReadFileAssemblesChunksAndDistrustsSizes) {
  const std::string content(300000, 'z');
  FakeInit init;
  init.Serve([&](FakeInit& i, Received& r) {
    auto* m = std::get_if<ReadFileRequest>(&r.message);
    if (m == nullptr) return;
    if (m->path == "liar")
      return i.Send(ReadFileReply{m->request_id, 10, 0, std::string(m->max_bytes + 1, 'x')});
    std::string chunk = content.substr(std::min<size_t>(m->offset, content.size()), m->max_bytes);
    i.Send(ReadFileReply{m->request_id, content.size(), m->offset + chunk.size() >= content.size(),
                         chunk});
  });
  auto ch = Connect(init);
  auto whole = ch->ReadFile("f", 1 << 20);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(*whole, content);
  EXPECT_THAT(ch->ReadFile("f", 1000).error().message, HasSubstr("over the limit of 1000"));
  EXPECT_EQ(ch->ReadFile("f", UINT64_MAX).value(), content);      // no overflow in the chunk size
  EXPECT_EQ(ch->ReadFile("f", content.size()).value(), content);  // exactly at the limit
  EXPECT_THAT(ch->ReadFile("liar", 100).error().message, HasSubstr("more data than asked"));
}

// A program that stops reading its stdin (exits, closes it) makes the channel's next write
// EPIPE; the SIGPIPE that comes with it must not kill the caller, which here, unlike the
// server, has not ignored it.
TEST(CellChannel, StdinToAProgramThatStoppedReadingIsNoSigpipe) {
  struct sigaction dfl {
  }, old{};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) {
    auto* m = std::get_if<ExecRequest>(&r.message);
    if (m == nullptr) return;
    UniqueFd events = std::move(r.fds[3]);
    r.fds[0].Reset();  // the "program" closes its stdin unread
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r.fds.clear();
    i.SendOn(events, ExecExited{m->request_id, 0, 0, 0, 0, 0, 0});
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  o.stdin_data = std::string(1 << 20, 'i');  // more than a pipe holds: a write meets EPIPE
  o.timeout = std::chrono::seconds(30);
  auto r = ch->Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  sigset_t pending;
  sigemptyset(&pending);
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "a SIGPIPE was left pending";
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST(CellChannel, ExecStreamsFromPipesAndBoundsWhatItKeeps) {
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) {
    auto* m = std::get_if<ExecRequest>(&r.message);
    if (m == nullptr) return;
    ASSERT_EQ(r.fds.size(), 4u);
    UniqueFd events = std::move(r.fds[3]);
    i.SendOn(events, ExecStarted{m->request_id, 7});
    char in[64] = {};
    ssize_t n = ::read(r.fds[0].get(), in, sizeof in);  // stdin the channel fed us
    std::string big(100000, 'o');
    ASSERT_EQ(::write(r.fds[1].get(), big.data(), big.size()), static_cast<ssize_t>(big.size()));
    ASSERT_EQ(::write(r.fds[2].get(), in, n), n);
    r.fds.clear();  // the "program" exits: pipes close
    i.SendOn(events, ExecExited{m->request_id, 0, 5, 0, 1000, 2000, 4096});
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  o.stdin_data = "input!";
  o.keep_bytes = 1000;
  uint64_t streamed = 0;
  o.on_output = [&](OutputStream s, std::string_view d) {
    streamed += s == OutputStream::kStdout ? d.size() : 0;
  };
  auto r = ch->Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 5);
  EXPECT_EQ(r->out.data.size(), 1000u);
  EXPECT_EQ(r->out.total, 100000u);
  EXPECT_TRUE(r->out.truncated());
  EXPECT_EQ(streamed, 100000u);
  EXPECT_EQ(r->err.data, "input!");
  EXPECT_EQ(r->user_cpu, 1000us);
  EXPECT_EQ(r->peak_memory_bytes, 4096u);
}

TEST(CellChannel, TimeoutSendsSigkillToTheGroup) {
  std::atomic<int> signalled{0};
  FakeInit init;
  std::vector<UniqueFd> held;
  UniqueFd events;
  init.Serve([&](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<ExecRequest>(&r.message)) {
      EXPECT_EQ(m->report_start, 0);  // a timeout and no on_started: no ExecStarted needed
      events = std::move(r.fds[3]);
      held = std::move(r.fds);  // a program that never exits and keeps its pipes open
      return;
    }
    if (auto* s = std::get_if<SignalRequest>(&r.message)) {
      signalled = s->signo;
      i.Send(OkReply{s->request_id});
      held.clear();
      i.SendOn(events, ExecExited{s->exec_request_id, 1, 0, SIGKILL, 0, 0, 0});
    }
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/sleep", "1000"};
  o.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = ch->Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(signalled.load(), SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// An exec with a timeout and no on_started asks for no ExecStarted: ExecExited (or an
// ErrorReply) alone ends it, and an ExecStarted that comes anyway breaks the protocol.
TEST(CellChannel, ExecWithoutAStartReport) {
  enum class Init { kExits, kFailsToStart, kSendsStartAnyway };
  std::atomic<Init> mode{Init::kExits};
  FakeInit init;
  init.Serve([&](FakeInit& i, Received& r) {
    auto* m = std::get_if<ExecRequest>(&r.message);
    if (m == nullptr) return;
    EXPECT_EQ(m->report_start, 0);
    UniqueFd events = std::move(r.fds[3]);
    r.fds.clear();
    if (mode.load() == Init::kExits)
      return i.SendOn(events, ExecExited{m->request_id, 0, 3, 0, 0, 0, 0});
    if (mode.load() == Init::kFailsToStart)
      return i.SendOn(events, ErrorReply{m->request_id, ENOENT, "execve: ENOENT"});
    i.SendOn(events, ExecStarted{m->request_id, 5});
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  o.timeout = 10s;
  auto r = ch->Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  mode = Init::kFailsToStart;
  r = ch->Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, ENOENT);
  EXPECT_TRUE(ch->alive());
  mode = Init::kSendsStartAnyway;
  r = ch->Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("the request asked for no ExecStarted"));
  EXPECT_FALSE(ch->alive());
}

TEST(CellChannel, StartErrorsAreErrors) {
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<ExecRequest>(&r.message)) {
      i.SendOn(r.fds[3], ErrorReply{m->request_id, ENOENT, "execve(\"/nope\"): ENOENT"});
    }
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/nope"};
  auto r = ch->Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, ENOENT);
  EXPECT_THAT(r.error().message, HasSubstr("exec \"/nope\": execve(\"/nope\")"));
  EXPECT_THAT(ch->Exec(ExecOptions{}).error().message, HasSubstr("argv is empty"));
}

// A hostile or broken init: every way it can misbehave kills the channel, fails the
// pending call promptly and reports the death exactly once.
void ExpectDeathFrom(std::function<void(FakeInit&, uint64_t)> misbehave, const std::string& why) {
  std::atomic<bool> done{false};  // misbehave once; later requests go unanswered
  FakeInit init;
  init.Serve([&](FakeInit& i, Received& r) {
    if (!done.exchange(true)) misbehave(i, RequestIdOf(r.message));
  });
  std::atomic<int> closed{0};
  std::string reason;
  CellChannel::Options options;
  options.on_closed = [&](const Error& e) {
    reason = e.message;
    ++closed;
  };
  auto ch = Connect(init, options);
  const auto start = std::chrono::steady_clock::now();
  Status s = ch->Mkdir("x");
  ASSERT_FALSE(s.ok()) << why;
  EXPECT_THAT(s.error().message, HasSubstr("cell init is gone")) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << why;
  EXPECT_FALSE(ch->alive()) << why;
  EXPECT_FALSE(ch->Stat("y").ok()) << why;  // later calls fail at once too
  ch.reset();
  EXPECT_EQ(closed.load(), 1) << why;
  EXPECT_THAT(reason, HasSubstr(why));
}

TEST(CellChannel, HostileInitKillsTheChannel) {
  ExpectDeathFrom([](FakeInit& i, uint64_t) { i.Close(); }, "control channel closed");
  ExpectDeathFrom([](FakeInit& i, uint64_t) { i.SendRaw({1, 2, 3}); }, "malformed frame");
  ExpectDeathFrom([](FakeInit& i, uint64_t id) { i.Send(OkReply{id + 1000}); }, "never sent");
  ExpectDeathFrom([](FakeInit& i, uint64_t) { i.Send(Ready{}); }, "sent Ready after Ready");
  ExpectDeathFrom(
      [](FakeInit& i, uint64_t id) {
        i.Send(ExecRequest{id, {"/bin/sh"}, {}, ""});
      },
      "malformed frame");  // a request type with no fds fails decoding already
}

// A stop request (the client's cancel) kills the group and ends the exec at once, also
// when it comes before ExecStarted: init serves requests in order, so the SignalRequest
// finds the exec.
TEST(CellChannel, StopRequestKillsTheGroupPromptly) {
  for (bool before_started : {false, true}) {
    std::atomic<int> signalled{0};
    std::vector<UniqueFd> held;
    UniqueFd events;
    std::promise<void> requested;
    auto requested_future = requested.get_future();
    FakeInit init;
    init.Serve([&](FakeInit& i, Received& r) {
      if (auto* m = std::get_if<ExecRequest>(&r.message)) {
        events = std::move(r.fds[3]);
        held = std::move(r.fds);
        if (before_started) {
          requested.set_value();
          return;  // ExecStarted goes out only with the SignalRequest's answer
        }
        return i.SendOn(events, ExecStarted{m->request_id, 9});
      }
      if (auto* s = std::get_if<SignalRequest>(&r.message)) {
        signalled = s->signo;
        if (before_started) i.SendOn(events, ExecStarted{s->exec_request_id, 9});
        i.Send(OkReply{s->request_id});
        held.clear();
        i.SendOn(events, ExecExited{s->exec_request_id, 1, 0, SIGKILL, 0, 0, 0});
      }
    });
    auto ch = Connect(init);
    std::stop_source stop;
    ExecOptions o;
    o.argv = {"/bin/sleep", "1000"};
    o.stop = stop.get_token();
    if (!before_started) o.on_started = [&](uint64_t, pid_t) { requested.set_value(); };
    std::thread canceller([&] {
      requested_future.wait();
      std::this_thread::sleep_for(50ms);
      stop.request_stop();
    });
    const auto start = std::chrono::steady_clock::now();
    auto r = ch->Exec(o);
    canceller.join();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->cancelled) << before_started;
    EXPECT_TRUE(r->signaled);
    EXPECT_EQ(signalled.load(), SIGKILL);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);  // not the 1 s poll period
    EXPECT_TRUE(ch->alive());
  }
}

// Closing the channel (the session ends) fails an exec in progress at once, even when
// init never answers again.
TEST(CellChannel, CloseFailsARunningExecPromptly) {
  std::vector<UniqueFd> held;
  std::promise<void> started;
  FakeInit init;
  init.Serve([&](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<ExecRequest>(&r.message)) {
      held = std::move(r.fds);
      i.SendOn(held[3], ExecStarted{m->request_id, 9});
    }
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/sleep", "1000"};
  o.on_started = [&](uint64_t, pid_t) { started.set_value(); };
  std::thread closer([&] {
    started.get_future().wait();
    std::this_thread::sleep_for(50ms);
    ch->Close();
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = ch->Exec(o);
  closer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("closed by the server"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
}

// Init closes its copies of the program's stdio as soon as the program has started (cell
// init does); the server's own copies of the output ends keep the pipes from hanging up
// before ExecExited, and the output written before is all there. And an ExecExited that
// comes with an fd is a broken frame: the exec fails, the fd is not kept.
// How many fds of this process (the fake init runs in it too) refer to the pipe of `fd`.
int FdsOnTheSamePipe(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return -1;
  const std::string want = "pipe:[" + std::to_string(st.st_ino) + "]";
  int count = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string() == want) ++count;
  }
  return count;
}

TEST(CellChannel, OutputIsCompleteWhenInitClosesItsCopiesFirst) {
  std::atomic<int> stdout_fds_after_init_let_go{-1};
  FakeInit init;
  init.Serve([&](FakeInit&, Received& r) {
    auto* m = std::get_if<ExecRequest>(&r.message);
    if (m == nullptr) return;
    ASSERT_EQ(::write(r.fds[1].get(), "hi", 2), 2);
    ASSERT_EQ(::write(r.fds[2].get(), "err", 3), 3);
    UniqueFd events = std::move(r.fds[3]);
    UniqueFd probe(::fcntl(r.fds[1].get(), F_DUPFD_CLOEXEC, 0));
    r.fds.clear();  // init's (and the program's) copies of stdin, stdout and stderr
    // Left on the stdout pipe: the probe, the server's read end and its held write end.
    // Without the hold the pipe would have hung up here, before ExecExited.
    stdout_fds_after_init_let_go = FdsOnTheSamePipe(probe.get());
    probe.Reset();
    std::this_thread::sleep_for(100ms);
    FakeInit::SendOn(events, ExecExited{m->request_id, 0, 4, 0, 0, 0, 0});
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  o.timeout = 10s;
  o.keep_bytes = 100;
  auto r = ch->Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out.data, "hi");
  EXPECT_EQ(r->err.data, "err");
  EXPECT_EQ(stdout_fds_after_init_let_go.load(), 3)
      << "the server does not hold the program's stdout write end until ExecExited";
}

TEST(CellChannel, AnExecExitedWithAnFdIsRefusedAndTheFdNotKept) {
  int extra[2];
  ASSERT_EQ(::pipe2(extra, O_CLOEXEC), 0);
  UniqueFd extra_read(extra[0]), extra_write(extra[1]);
  FakeInit init;
  init.Serve([&](FakeInit&, Received& r) {
    auto* m = std::get_if<ExecRequest>(&r.message);
    if (m == nullptr) return;
    const int fds[1] = {extra_write.get()};
    Status s = SendMessage(r.fds[3].get(), ExecExited{m->request_id, 0, 0, 0, 0, 0, 0}, fds);
    ASSERT_TRUE(s.ok()) << s.error().message;
    extra_write.Reset();
    r.fds.clear();
  });
  auto ch = Connect(init);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  o.timeout = 10s;
  auto r = ch->Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("needs 0 fds"));
  char byte;
  EXPECT_EQ(::read(extra_read.get(), &byte, 1), 0) << "the channel kept the fd of ExecExited";
}

// Every way init can break an exec's event socket fails that exec promptly with an error
// that says init is gone, kills the channel and reports the death once.
void ExpectExecDeathFrom(std::function<void(FakeInit&, uint64_t, std::vector<UniqueFd>&)> misbehave,
                         const std::string& why) {
  std::atomic<bool> done{false};
  std::vector<UniqueFd> held;
  FakeInit init;
  init.Serve([&](FakeInit& i, Received& r) {
    if (std::holds_alternative<ExecRequest>(r.message) && !done.exchange(true)) {
      held = std::move(r.fds);
      misbehave(i, RequestIdOf(r.message), held);
    }
  });
  std::atomic<int> closed{0};
  std::string reason;
  CellChannel::Options options;
  options.on_closed = [&](const Error& e) {
    reason = e.message;
    ++closed;
  };
  auto ch = Connect(init, options);
  ExecOptions o;
  o.argv = {"/bin/prog"};
  const auto start = std::chrono::steady_clock::now();
  auto r = ch->Exec(o);
  ASSERT_FALSE(r.ok()) << why;
  EXPECT_THAT(r.error().message, HasSubstr("cell init is gone")) << why;
  EXPECT_THAT(r.error().message, HasSubstr(why));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << why;
  EXPECT_FALSE(ch->alive()) << why;
  EXPECT_FALSE(ch->Exec(o).ok()) << why;  // later calls fail at once too
  held.clear();
  ch.reset();
  EXPECT_EQ(closed.load(), 1) << why;
  EXPECT_THAT(reason, HasSubstr(why));
}

TEST(CellChannel, HostileInitOnTheExecEventSocketKillsTheChannel) {
  ExpectExecDeathFrom([](FakeInit&, uint64_t, std::vector<UniqueFd>& fds) { fds[3].Reset(); },
                      "closed the exec's event socket before it reported the program's start");
  ExpectExecDeathFrom(
      [](FakeInit&, uint64_t id, std::vector<UniqueFd>& fds) {
        FakeInit::SendOn(fds[3], ExecStarted{id, 5});
        fds.clear();  // pipes and events close without an ExecExited
      },
      "closed the exec's event socket before it reported the program's exit");
  ExpectExecDeathFrom(
      [](FakeInit&, uint64_t id, std::vector<UniqueFd>& fds) {
        FakeInit::SendOn(fds[3], ExecStarted{id + 1, 5});
      },
      "on the event socket of exec");
  ExpectExecDeathFrom(
      [](FakeInit&, uint64_t id, std::vector<UniqueFd>& fds) {
        FakeInit::SendOn(fds[3], ExecExited{id, 0, 0, 0, 0, 0, 0});  // before ExecStarted
      },
      "sent ExecExited for request");
  ExpectExecDeathFrom(
      [](FakeInit&, uint64_t id, std::vector<UniqueFd>& fds) {
        FakeInit::SendOn(fds[3], ExecStarted{id, 5});
        FakeInit::SendOn(fds[3], ExecStarted{id, 5});
      },
      "after ExecStarted");
  ExpectExecDeathFrom(
      [](FakeInit&, uint64_t, std::vector<UniqueFd>& fds) {
        ASSERT_EQ(::send(fds[3].get(), "junk", 4, 0), 4);
      },
      "malformed frame from cell init on the exec's event socket");
  ExpectExecDeathFrom(
      [](FakeInit& i, uint64_t id, std::vector<UniqueFd>&) {
        i.Send(ExecStarted{id, 5});
      },
      "on the control socket");
}

TEST(CellChannel, ListDirThatMakesNoProgressIsAnError) {
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<ListDirRequest>(&r.message)) {
      i.Send(ListDirReply{m->request_id, {}, 5});  // "more to come" but nothing, forever
    }
  });
  auto ch = Connect(init);
  EXPECT_THAT(ch->ListDir("/").error().message, HasSubstr("makes no progress"));
}

// ---- ExecAsync (issue 29): the exec's steps on a reactor ----

// Plays init for execs that run until killed: ExecStarted at once; a SignalRequest is
// answered and ends the exec with ExecExited by that signal.
void ServeKillableExecs(FakeInit& init, std::mutex& mu, std::map<uint64_t, UniqueFd>& events,
                        std::atomic<int>& signalled) {
  init.Serve([&](FakeInit& i, Received& r) {
    if (auto* m = std::get_if<ExecRequest>(&r.message)) {
      std::lock_guard lock(mu);
      FakeInit::SendOn(r.fds[3], ExecStarted{m->request_id, 9});
      events[m->request_id] = std::move(r.fds[3]);
      return;
    }
    if (auto* s = std::get_if<SignalRequest>(&r.message)) {
      signalled = s->signo;
      i.Send(OkReply{s->request_id});
      std::lock_guard lock(mu);
      FakeInit::SendOn(events[s->exec_request_id],
                       ExecExited{s->exec_request_id, 1, 0, s->signo, 0, 0, 0});
    }
  });
}

TEST(CellChannel, ExecAsyncCompletesOnTheReactorAndCancelKillsTheGroup) {
  std::mutex mu;
  std::map<uint64_t, UniqueFd> events;
  std::atomic<int> signalled{0};
  FakeInit init;
  ServeKillableExecs(init, mu, events, signalled);
  CellReactor reactor(1);
  auto ch = Connect(init);
  std::promise<void> started;
  std::promise<std::pair<Result<ExecResult>, bool>> done;
  ExecOptions o;
  o.argv = {"/bin/sleep", "1000"};
  o.on_started = [&](uint64_t, pid_t pid) {
    EXPECT_EQ(pid, 9);
    EXPECT_TRUE(reactor.on_reactor_thread());
    started.set_value();
  };
  CellChannel::ExecHandle handle =
      ch->ExecAsync(reactor.context(), std::move(o), [&](Result<ExecResult> r) {
        done.set_value({std::move(r), reactor.on_reactor_thread()});
      });
  ASSERT_NE(handle.exec_id(), 0u);
  ASSERT_EQ(started.get_future().wait_for(5s), std::future_status::ready);
  auto outcome = done.get_future();
  EXPECT_EQ(outcome.wait_for(100ms), std::future_status::timeout);  // it waits, unheld
  const auto start = std::chrono::steady_clock::now();
  handle.Cancel();
  ASSERT_EQ(outcome.wait_for(5s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
  auto [r, on_reactor] = outcome.get();
  EXPECT_TRUE(on_reactor);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cancelled);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(signalled.load(), SIGKILL);
  EXPECT_TRUE(ch->alive());
}

TEST(CellChannel, ExecAsyncStartErrorsComeThroughTheCallback) {
  FakeInit init;
  CellReactor reactor(1);
  auto ch = Connect(init);
  std::promise<Result<ExecResult>> empty_argv, detached;
  ch->ExecAsync(reactor.context(), ExecOptions{},
                [&](Result<ExecResult> r) { empty_argv.set_value(std::move(r)); });
  ExecOptions d;
  d.argv = {"/bin/true"};
  d.detached_output = "/tmp/out";
  ch->ExecAsync(reactor.context(), std::move(d),
                [&](Result<ExecResult> r) { detached.set_value(std::move(r)); });
  auto a = empty_argv.get_future().get();
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.error().message, HasSubstr("argv is empty"));
  auto b = detached.get_future().get();
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("detached"));
}

// The channel's destructor ends its execs itself: it neither waits for the reactor (busy
// here) nor leaves an exec that would touch the channel later; each callback comes once.
TEST(CellChannel, DestroyingTheChannelCompletesItsAsyncExecsOnceWithoutTheReactor) {
  constexpr int kExecs = 3;
  std::mutex mu;
  std::map<uint64_t, UniqueFd> events;
  std::atomic<int> signalled{0};
  FakeInit init;
  ServeKillableExecs(init, mu, events, signalled);
  CellReactor reactor(1);
  auto ch = Connect(init);
  std::atomic<int> started{0};
  std::mutex results_mu;
  std::vector<std::string> errors;
  std::vector<int> calls(kExecs);
  for (int i = 0; i < kExecs; ++i) {
    ExecOptions o;
    o.argv = {"/bin/sleep", "1000"};
    o.on_started = [&](uint64_t, pid_t) { ++started; };
    ch->ExecAsync(reactor.context(), std::move(o), [&, i](Result<ExecResult> r) {
      std::lock_guard lock(results_mu);
      ++calls[i];
      errors.push_back(r.ok() ? "ok" : r.error().message);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (started.load() < kExecs && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(started.load(), kExecs);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  boost::asio::post(reactor.context(), [open] { open.wait(); });  // the reactor is busy
  const auto start = std::chrono::steady_clock::now();
  ch.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  gate.set_value();
  const auto until = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    {
      std::lock_guard lock(results_mu);
      if (static_cast<int>(errors.size()) == kExecs) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "callbacks missing";
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(100ms);  // a second call would come by now
  std::lock_guard lock(results_mu);
  for (int i = 0; i < kExecs; ++i) EXPECT_EQ(calls[i], 1) << i;
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("cell channel destroyed"));
    EXPECT_THAT(e, HasSubstr("exec \"/bin/sleep\""));
  }
}

// ---- The control socket on a reactor (issue 29): no thread per channel ----

int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// This thread plays init for many channels at once: each request is answered after the
// call is made, so the reply can only reach the caller through the reactor's read.
TEST(CellChannel, ChannelsStartNoThreadAndTheReactorHandsEachItsReply) {
  constexpr int kChannels = 100;
  std::vector<UniqueFd> init_ends;
  std::vector<std::unique_ptr<CellChannel>> channels;
  auto add = [&](CellChannel::Options options) {
    auto pair = CreateControlSocketPair();
    ASSERT_TRUE(pair.ok());
    init_ends.push_back(std::move(pair->second));
    channels.push_back(std::make_unique<CellChannel>(std::move(pair->first), std::move(options)));
  };
  CellReactor reactor(1);
  CellChannel::Options on_reactor;
  on_reactor.io = &reactor.context();
  add(on_reactor);
  add({});  // the process's default reactor starts here, once
  const int threads = ThreadCount();
  for (int i = 2; i < kChannels; ++i) add(i % 2 ? CellChannel::Options{} : on_reactor);
  EXPECT_EQ(ThreadCount(), threads);
  std::thread caller([&] {  // one thread makes every call, in turn
    for (int i = 0; i < kChannels; ++i) {
      Status s = channels[i]->Mkdir("/d" + std::to_string(i));
      EXPECT_TRUE(s.ok()) << i << ": " << s.error().message;
    }
  });
  for (int i = 0; i < kChannels; ++i) {
    Result<Received> r = ReceiveMessage(init_ends[i].get());
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto* m = std::get_if<MkdirRequest>(&r->message);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->path, "/d" + std::to_string(i));
    ASSERT_TRUE(SendMessage(init_ends[i].get(), OkReply{m->request_id}).ok());
  }
  caller.join();
  channels.clear();  // before the reactor
}

// A blocking call on the thread that reads the control socket would wait for itself: it
// fails at once instead, saying why.
TEST(CellChannel, ABlockingCallOnTheReactorFailsAtOnce) {
  FakeInit init;
  init.Serve([](FakeInit& i, Received& r) { i.Send(OkReply{RequestIdOf(r.message)}); });
  CellReactor reactor(1);
  CellChannel::Options options;
  options.io = &reactor.context();
  options.name = "cell c-42";
  auto ch = Connect(init, options);
  std::promise<Status> on_reactor;
  boost::asio::post(reactor.context(), [&] { on_reactor.set_value(ch->Mkdir("x")); });
  auto f = on_reactor.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  Status s = f.get();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("cell c-42"));
  EXPECT_THAT(s.error().message, HasSubstr("would have to read"));
  EXPECT_TRUE(ch->Mkdir("y").ok());  // from another thread it works
  ch.reset();
}

// on_closed runs on the reactor inside the control socket's handler; the owner may end the
// channel there (the handler touches nothing of it afterwards; ASan would see it).
TEST(CellChannel, OnClosedMayDestroyTheChannelFromTheReactor) {
  FakeInit init;
  std::unique_ptr<CellChannel> ch;
  std::promise<std::string> gone;
  CellChannel::Options options;
  options.name = "cell c-7";
  options.on_closed = [&](const Error& e) {
    ch.reset();
    gone.set_value(e.message);
  };
  ch = Connect(init, options);
  init.Close();
  auto f = gone.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  std::string why = f.get();
  EXPECT_THAT(why, HasSubstr("cell c-7: cell init is gone: control channel closed"));
}

}  // namespace
}  // namespace mcpcell::sandbox
