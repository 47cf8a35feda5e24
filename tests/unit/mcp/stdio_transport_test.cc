// The stdio transport over real pipes: framing, the size limit without unbounded
// buffering, EOF, ServeStdio ending on SIGTERM, and tasks adopted by the reader threads
// (the other thread reads meanwhile; a regular file as input adopts nothing).
#include "mcp/stdio_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <future>
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

// The MCP handshake over the pipes (request id 1); returns the initialize response.
Json Initialize(Pipe& in, LineReader& reader) {
  in.Write(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}})"
      "\n");
  Json response = reader.Next();
  in.Write(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
           "\n");
  return response;
}

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages;
  std::vector<RpcError> errors;
  std::vector<Json> error_ids;
  std::vector<bool> error_responses;
  bool closed = false;
  bool eof = false;

  TransportCallbacks Callbacks(bool with_eof) {
    TransportCallbacks cb;
    cb.on_message = [this](std::string m) { Add([&] { messages.push_back(std::move(m)); }); };
    cb.on_error = [this](RpcError e, jsonrpc::Peek peek) {
      Add([&] {
        errors.push_back(std::move(e));
        error_ids.push_back(std::move(peek.id));
        error_responses.push_back(peek.response);
      });
    };
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
  Collected c;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 100});
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
  Collected c;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 1024});
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
  EXPECT_NE(c.errors[0].message.find("of 8388608 bytes"), std::string::npos) << c.errors[0].message;
  EXPECT_TRUE(c.error_ids[0].is_null());  // no id in it
  EXPECT_EQ(c.messages[0], "{\"after\":true}");
}

// An oversized request is answered with its id, read from the line's first or last bytes,
// so a client waiting for that id hears of it (the TypeScript SDK writes "id" last).
TEST(StdioTransport, OversizedRequestIsAnsweredWithItsIdFromEitherEnd) {
  Pipe in, out;
  Collected c;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 1024});
  t.Start(c.Callbacks(false));
  std::thread writer([&] {
    const std::string pad(64 * 1024, 'x');
    in.Write(R"({"method":"tools/call","params":{"content":")");
    for (int i = 0; i < 40; ++i) in.Write(pad);  // 2.5 MiB, the id far past the limit
    in.Write(R"("},"jsonrpc":"2.0","id":42})"
             "\n");
    in.Write(R"({"jsonrpc":"2.0","id":"first","method":"m","params":{"p":")" + pad + "\"}}\r\n");
    // A response of the same size: recognized, so the session can drop it unanswered.
    in.Write(R"({"result":{"p":")" + pad +
             R"("},"jsonrpc":"2.0","id":1})"
             "\n");
    in.Write("{\"after\":true}\n");
    // Cut off by EOF: its last bytes prove nothing, even where they look like an id.
    in.Write(R"({"method":"m","params":{"p":")" + pad + R"(","id":5})");
    in.CloseWrite();
  });
  ASSERT_TRUE(c.WaitFor([&] { return c.closed && c.errors.size() == 4; }));
  writer.join();
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0], "{\"after\":true}");
  EXPECT_EQ(c.error_ids[0], 42);
  EXPECT_EQ(c.error_ids[1], "first");  // the \r before the newline is no obstacle
  EXPECT_EQ(c.error_ids[2], 1);        // a response's id: the session fails our request 1
  EXPECT_TRUE(c.error_ids[3].is_null());
  EXPECT_EQ(c.error_responses, (std::vector<bool>{false, false, true, false}));
}

TEST(StdioTransport, EofHalfClosesWhenAskedAndSendStillWorks) {
  Pipe in, out;
  Collected c;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 100});
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
  EXPECT_EQ(Initialize(in, reader)["result"]["protocolVersion"], "2025-06-18");
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

TEST(StdioTransport, ServeStdioEndsWhenItsStopFdBecomesReadable) {
  Server server(testing::TestOptions());
  Pipe in, out, stop;
  int rc = -1;
  std::thread serving([&] {
    rc = ServeStdio(server, {.in_fd = in.fd[0], .out_fd = out.fd[1], .stop_fd = stop.fd[0]});
  });
  LineReader reader(out.fd[0]);
  in.Write(R"({"jsonrpc":"2.0","id":"p","method":"ping"})"
           "\n");
  ASSERT_EQ(reader.Next()["id"], "p");  // serving
  stop.Write("x");                      // what an application's SIGTERM handler does
  serving.join();
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(server.Sessions().empty());
}

TEST(StdioTransport, ServeStdioInstallsNoSignalHandlers) {
  Server server(testing::TestOptions());
  Pipe in, out;
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  std::thread serving([&] { ServeStdio(server, {.in_fd = in.fd[0], .out_fd = out.fd[1]}); });
  LineReader reader(out.fd[0]);
  in.Write(R"({"jsonrpc":"2.0","id":"p","method":"ping"})"
           "\n");
  ASSERT_EQ(reader.Next()["id"], "p");  // serving
  struct sigaction during {};
  ::sigaction(SIGTERM, nullptr, &during);
  EXPECT_EQ(during.sa_handler, before.sa_handler);
  in.CloseWrite();
  serving.join();
}

// Waits until `n` of the transport's reader threads wait for input.
bool WaitForIdleReaders(const StdioTransport& t, int n) {
  for (int i = 0; i < 5000; ++i) {
    if (t.IdleReaders() == n) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// A gate that tasks wait on until the test opens it.
struct Gate {
  std::promise<void> opened;
  std::shared_future<void> future = opened.get_future().share();
  void Open() { opened.set_value(); }
  bool Wait() const { return future.wait_for(10s) == std::future_status::ready; }
};

TEST(StdioTransport, AdoptedTaskRunsOnTheReadingThreadWhileTheOtherReads) {
  Pipe in, out;
  Collected c;
  Gate gate;
  std::mutex mu;
  std::vector<bool> adopted;
  std::thread::id delivered_on, task_ran_on;
  std::promise<void> task_started;
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 1024});
  TransportCallbacks cb = c.Callbacks(false);
  cb.on_message = [&](std::string m) {
    std::function<void()> task = [] {};
    if (m == "\"first\"") {
      task = [&] {
        task_ran_on = std::this_thread::get_id();
        task_started.set_value();
        EXPECT_TRUE(gate.Wait());
      };
    }
    bool taken = t.AdoptTask(task);
    EXPECT_EQ(taken, !task);  // moved from exactly when taken
    {
      std::lock_guard lock(mu);
      if (taken && m == "\"first\"") delivered_on = std::this_thread::get_id();
      adopted.push_back(taken);
    }
    c.Add([&] { c.messages.push_back(std::move(m)); });  // a refused task is dropped
  };
  t.Start(std::move(cb));
  auto delivered = [&] {
    std::lock_guard lock(c.mu);
    return c.messages.size();
  };
  // A task is adopted only while the other reader waits for input: before it has started,
  // or right after it adopted a task itself, a task is (rightly) refused. So "first" goes
  // again until one is adopted.
  bool first_adopted = false;
  for (int i = 0; i < 200 && !first_adopted; ++i) {
    ASSERT_TRUE(WaitForIdleReaders(t, 2));
    const size_t n = delivered();
    in.Write("\"first\"\n");
    ASSERT_TRUE(c.WaitFor([&] { return c.messages.size() == n + 1; }));
    {
      std::lock_guard lock(mu);
      first_adopted = adopted.back();
      adopted.clear();
    }
    if (!first_adopted) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(first_adopted) << "no task was ever adopted";
  const size_t before = delivered() - 1;
  ASSERT_EQ(task_started.get_future().wait_for(10s), std::future_status::ready);
  {
    std::lock_guard lock(mu);
    adopted = {true};
  }
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(task_ran_on, delivered_on);  // run where it was read
  }
  EXPECT_EQ(t.IdleReaders(), 1);  // one runs the task, the other waits to read
  // The first task blocks its thread; the other reads on, and cannot adopt (nobody would
  // be left to read).
  in.Write("\"second\"\n\"third\"\n");
  ASSERT_TRUE(c.WaitFor([&] { return c.messages.size() == before + 3; }));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(adopted, (std::vector<bool>{true, false, false}));
  }
  EXPECT_FALSE(t.AdoptTask(*std::make_unique<std::function<void()>>([] {})));  // not delivering
  gate.Open();
  in.CloseWrite();
  ASSERT_TRUE(c.WaitFor([&] { return c.closed; }));
}

TEST(StdioTransport, TaskAdoptedFromTheLastLineBeforeEofStillRuns) {
  Pipe in, out;
  Collected c;
  std::atomic<int> ran{0}, taken{0};
  StdioTransport t({.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 1024});
  TransportCallbacks cb = c.Callbacks(true);
  cb.on_message = [&](std::string m) {
    std::function<void()> task = [&] { ++ran; };
    if (t.AdoptTask(task)) {
      ++taken;
    } else {
      task();
    }
    c.Add([&] { c.messages.push_back(std::move(m)); });
  };
  t.Start(std::move(cb));
  ASSERT_TRUE(WaitForIdleReaders(t, 2));
  in.Write("\"a\"\n\"b\"\n\"c\"");  // one chunk: two lines and the start of a third
  ASSERT_TRUE(c.WaitFor([&] { return c.messages.size() == 2; }));
  for (int i = 0; i < 500 && ran.load() < 2; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(taken.load(), 1);             // one task per chunk: "b" ran where it was refused
  ASSERT_TRUE(WaitForIdleReaders(t, 2));  // the adopting thread is back waiting
  in.CloseWrite();                        // "c" ends at EOF; its task is adopted and must run
  ASSERT_TRUE(c.WaitFor([&] { return c.eof && c.messages.size() == 3; }));
  for (int i = 0; i < 500 && ran.load() < 3; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(taken.load(), 2);
  EXPECT_TRUE(t.Send(Json{{"still", "writable"}}));
  t.Close();
}

TEST(StdioTransport, RegularFileAsInputIsReadWholeAndAdoptsNothing) {
  char path[] = "/tmp/mcpcell-stdio-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  std::string text = "\"one\"\n\"two\"\n\"three\"\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  Pipe out;
  Collected c;
  std::atomic<int> taken{0};
  StdioTransport t({.in_fd = fd, .out_fd = out.fd[1], .max_message_bytes = 1024});
  TransportCallbacks cb = c.Callbacks(false);
  cb.on_message = [&](std::string m) {
    std::function<void()> task = [] {};
    if (t.AdoptTask(task)) ++taken;
    c.Add([&] { c.messages.push_back(std::move(m)); });
  };
  t.Start(std::move(cb));
  ASSERT_TRUE(c.WaitFor([&] { return c.closed; }));
  EXPECT_EQ(c.messages, (std::vector<std::string>{"\"one\"", "\"two\"", "\"three\""}));
  EXPECT_EQ(taken.load(), 0);
  ::close(fd);
}

// A tool call adopted by the reader thread still hears its cancellation (the other thread
// reads it), and a second call runs at the same time as the first.
TEST(StdioTransport, AdoptedToolCallIsCancelledAndAnotherRunsBesideIt) {
  Server server(testing::TestOptions());
  Tool blocking;
  blocking.name = "block";
  blocking.input_schema = {{"type", "object"}};
  std::atomic<int> running{0};
  blocking.handler = [&](const Json&, Context& ctx) {
    ++running;
    for (int i = 0; i < 1000 && !ctx.cancelled(); ++i) std::this_thread::sleep_for(10ms);
    --running;
    return ToolResult::Text(ctx.cancelled() ? "cancelled" : "timed out");
  };
  ASSERT_TRUE(server.AddTool(blocking).ok());
  ASSERT_TRUE(server.AddTool(testing::EchoTool()).ok());
  Pipe in, out;
  auto session = server.Connect(std::make_unique<StdioTransport>(
      StdioOptions{.in_fd = in.fd[0], .out_fd = out.fd[1], .max_message_bytes = 4096}));
  LineReader reader(out.fd[0]);
  ASSERT_EQ(Initialize(in, reader)["id"], 1);
  in.Write(R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}})"
           "\n");
  for (int i = 0; i < 500 && running.load() == 0; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(running.load(), 1);
  in.Write(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"block"}})"
           "\n");
  for (int i = 0; i < 500 && running.load() < 2; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(running.load(), 2);  // both at once
  in.Write(
      R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"meanwhile"}}})"
      "\n");
  Json echo = reader.Next();
  EXPECT_EQ(echo["id"], 4);
  EXPECT_EQ(echo["result"]["content"][0]["text"], "meanwhile");
  in.Write(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}})"
           "\n");
  in.Write(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})"
           "\n");
  for (int i = 0; i < 500 && running.load() > 0; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(running.load(), 0);  // both heard their cancellation well before 10 s
  in.Write(R"({"jsonrpc":"2.0","id":5,"method":"ping"})"
           "\n");
  EXPECT_EQ(reader.Next()["id"], 5);  // cancelled requests get no response
  in.CloseWrite();
  EXPECT_TRUE(session->WaitFor(5s));
}

}  // namespace
}  // namespace mcp
