// The stdio transport over real pipes: framing, the size limit without unbounded
// buffering, EOF, and ServeStdio ending on SIGTERM.
#include "mcp/stdio_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using namespace std::chrono_literals;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe2(fd, O_CLOEXEC), 0); }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  void CloseRead() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void CloseWrite() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
  void Write(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = ::write(fd[1], s.data() + done, s.size() - done);
      ASSERT_GT(n, 0);
      done += static_cast<size_t>(n);
    }
  }
};

// Reads newline-delimited messages from a pipe (with a deadline).
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) { ::fcntl(fd, F_SETFL, O_NONBLOCK); }
  Json Next(std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return Json::parse(line);
      }
      if (std::chrono::steady_clock::now() > deadline) return nullptr;
      char tmp[4096];
      ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n > 0) {
        buf_.append(tmp, static_cast<size_t>(n));
      } else {
        std::this_thread::sleep_for(2ms);
      }
    }
  }

 private:
  int fd_;
  std::string buf_;
};

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  std::vector<RpcError> errors;
  bool closed = false;
  bool eof = false;

  TransportCallbacks Callbacks(bool with_eof) {
    TransportCallbacks cb;
    cb.on_message = [this](std::string m) { Add([&] { messages.push_back(std::move(m)); }); };
    cb.on_error = [this](RpcError e) { Add([&] { errors.push_back(std::move(e)); }); };
    cb.on_close = [this] { Add([&] { closed = true; }); };
    if (with_eof) cb.on_eof = [this] { Add([&] { eof = true; }); };
    return cb;
  }
  template <typename F>
  void Add(F f) {
    std::lock_guard lock(mu);
    f();
    cv.notify_all();
  }
  template <typename P>
  bool WaitFor(P p) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 5s, p);
  }
};

TEST(StdioTransport, SplitsLinesAndSkipsBlankOnes) {
  Pipe in, out;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 100});
  Collected c;
  t.Start(c.Callbacks(false));
  in.Write("{\"a\":1}\n\n  \r\n{\"b\":");
  in.Write("2}\r\n{\"c\":3}");
  in.CloseWrite();
  ASSERT_TRUE(c.WaitFor([&] { return c.closed; }));
  EXPECT_EQ(c.messages, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "{\"c\":3}"}));
  EXPECT_FALSE(t.Send(Json{{"x", 1}}));  // closed after EOF without on_eof
}

TEST(StdioTransport, OversizedLineIsDiscardedWithOneErrorAndReadingGoesOn) {
  Pipe in, out;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 1024});
  Collected c;
  t.Start(c.Callbacks(false));
  // 8 MiB on one line, written in pieces: the reader must not keep it.
  std::thread writer([&] {
    std::string piece(64 * 1024, 'x');
    for (int i = 0; i < 128; ++i) in.Write(piece);
    in.Write("\n{\"after\":true}\n");
  });
  ASSERT_TRUE(c.WaitFor([&] { return c.messages.size() == 1; }));
  writer.join();
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0].code, kInvalidRequest);
  EXPECT_NE(c.errors[0].message.find("1024 bytes"), std::string::npos) << c.errors[0].message;
  EXPECT_EQ(c.messages[0], "{\"after\":true}");
}

TEST(StdioTransport, EofHalfClosesWhenAskedAndSendStillWorks) {
  Pipe in, out;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 100});
  Collected c;
  t.Start(c.Callbacks(true));
  in.CloseWrite();
  ASSERT_TRUE(c.WaitFor([&] { return c.eof; }));
  EXPECT_FALSE(c.closed);
  EXPECT_TRUE(t.Send(Json{{"late", "reply"}}));
  LineReader reader(out.fd[0]);
  EXPECT_EQ(reader.Next(), Json({{"late", "reply"}}));
  t.Close();
  EXPECT_FALSE(t.Send(Json{{"x", 1}}));
}

TEST(StdioTransport, ServerOverPipesAnswersAndEndsAtEof) {
  ServerOptions o = testing::TestOptions();
  o.max_message_bytes = 4096;
  Server server(o);
  ASSERT_TRUE(server.AddTool(testing::EchoTool()).ok());
  Pipe in, out;
  auto session = server.Connect(std::make_unique<StdioTransport>(
      StdioOptions{.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 4096}));
  LineReader reader(out.fd[0]);
  in.Write(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}})"
      "\n");
  EXPECT_EQ(reader.Next()["result"]["protocolVersion"], "2025-06-18");
  in.Write(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
           "\n");
  in.Write(std::string(10000, ' ') + "x\n");  // oversized
  Json e = reader.Next();
  EXPECT_EQ(e["error"]["code"], kInvalidRequest);
  EXPECT_TRUE(e["id"].is_null());
  in.Write("not json\n");
  EXPECT_EQ(reader.Next()["error"]["code"], kParseError);
  // A request followed at once by EOF still gets its answer (the session drains).
  in.Write(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bye"}}})"
      "\n");
  in.CloseWrite();
  Json r = reader.Next();
  EXPECT_EQ(r["id"], 2);
  EXPECT_EQ(r["result"]["content"][0]["text"], "bye");
  EXPECT_TRUE(session->WaitFor(5s));
  EXPECT_TRUE(session->closed());
}

TEST(StdioTransport, ServeStdioEndsOnSigterm) {
  Server server(testing::TestOptions());
  Pipe in, out;
  int rc = -1;
  std::thread serving([&] { rc = ServeStdio(server, {.in_fd = in.fd[0], .out_fd = out.fd[1]}); });
  LineReader reader(out.fd[0]);
  in.Write(R"({"jsonrpc":"2.0","id":"p","method":"ping"})"
           "\n");
  ASSERT_EQ(reader.Next()["id"], "p");  // serving, so the handler is installed
  ::kill(::getpid(), SIGTERM);
  serving.join();
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(server.Sessions().empty());
}

}  // namespace
}  // namespace mcp
