// mcp::HttpServer's event-driven transport over raw loopback sockets: what a well-behaved
// client library never does. Pipelined requests, a half-closed connection, a slow writer,
// a body trickled in (cut off by the time limit), a client that never reads its SSE
// stream (dropped, memory bounded), a thousand connections opened and dropped (fds come
// back), and 200 open GET streams on a bounded number of threads.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mcp/http_server.h"
#include "tests/unit/mcp/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define MCPCELL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MCPCELL_TEST_ASAN 1
#endif
#endif
#ifdef MCPCELL_TEST_ASAN
// The sanitizer runtime's live heap bytes (GCC ships no header declaring it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace mcp::testing {
namespace {

using std::chrono::milliseconds;

// ---- a minimal HTTP/1.1 client on a raw socket ----

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads more into `buf`; false at EOF, error or after `wait` without data.
bool ReadMore(int fd, std::string& buf, milliseconds wait = milliseconds(10000)) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char chunk[16384];
  ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buf.append(chunk, static_cast<size_t>(n));
  return true;
}

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// One response from `buf` (reading more from `fd` as needed), removed from `buf`.
// `headers_only`: stop after the header (an SSE stream that stays open).
std::optional<RawResponse> ReadResponse(int fd, std::string& buf, bool headers_only = false) {
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (!ReadMore(fd, buf)) return std::nullopt;
  }
  RawResponse r;
  std::string head = buf.substr(0, end);
  buf.erase(0, end + 4);
  r.status = std::atoi(head.substr(9, 3).c_str());
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos < head.size()) {
    size_t next = head.find("\r\n", pos + 2);
    std::string line =
        head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    pos = next;
  }
  if (headers_only) return r;
  if (r.headers["transfer-encoding"] == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buf.find("\r\n")) == std::string::npos) {
        if (!ReadMore(fd, buf)) return std::nullopt;
      }
      size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
      while (buf.size() < eol + 2 + size + 2) {
        if (!ReadMore(fd, buf)) return std::nullopt;
      }
      r.body += buf.substr(eol + 2, size);
      buf.erase(0, eol + 2 + size + 2);
      if (size == 0) return r;
    }
  }
  size_t length = std::stoul(r.headers.count("content-length") ? r.headers["content-length"] : "0");
  while (buf.size() < length) {
    if (!ReadMore(fd, buf)) return std::nullopt;
  }
  r.body = buf.substr(0, length);
  buf.erase(0, length);
  return r;
}

std::string PostRequest(const std::string& body, const std::string& session = "",
                        bool close = false) {
  std::string req =
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\n"
      "Accept: application/json, text/event-stream\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n";
  if (!session.empty()) req += "Mcp-Session-Id: " + session + "\r\n";
  if (close) req += "Connection: close\r\n";
  return req + "\r\n" + body;
}

std::string InitJson() {
  return R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":)"
         R"("2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
}

std::string PingJson(int id) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"ping"})";
}

// True once the server has closed `fd` (EOF or reset), reading and discarding what came;
// false if it is still open after `limit`.
bool ClosedByServerWithin(int fd, milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

size_t CountEntries(const char* dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

size_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoul(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// Memory the process holds for its data: under AddressSanitizer the allocator's live bytes
// (its quarantine keeps freed blocks resident, so RSS only grows), else the RSS.
size_t MemoryInUseKiB() {
#ifdef MCPCELL_TEST_ASAN
  if (size_t live = __sanitizer_get_current_allocated_bytes(); live > 0) return live / 1024;
#endif
  return RssKiB();
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void Start(HttpOptions options = {}) {
    server_ = std::make_unique<Server>(TestOptions());
    ASSERT_TRUE(server_->AddTool(EchoTool()));
    if (options.threads == 0) options.threads = 2;
    http_ = std::make_unique<HttpServer>(*server_, options);
    Status st = http_->Bind();
    ASSERT_TRUE(st) << st.message();
    thread_ = std::thread([this] { http_->Run(); });
  }
  void TearDown() override {
    for (int fd : fds_) ::close(fd);
    if (http_) http_->Stop();
    if (thread_.joinable()) thread_.join();
    http_.reset();
    server_.reset();
  }
  int Conn() {
    int fd = Connect(http_->port());
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  // A new initialized session; returns its id.
  std::string Open() {
    int fd = Connect(http_->port());
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    std::string buf;
    EXPECT_TRUE(SendAll(fd, PostRequest(InitJson())));
    auto r = ReadResponse(fd, buf);
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return "";
    std::string id = r->headers["mcp-session-id"];
    EXPECT_TRUE(
        SendAll(fd, PostRequest(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", id)));
    auto n = ReadResponse(fd, buf);
    EXPECT_TRUE(n && n->status == 202);
    return id;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::vector<int> fds_;
};

// Three requests in one write on one connection: three answers, in order.
TEST_F(HttpTransportTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  std::string id = Open();
  int fd = Conn();
  ASSERT_TRUE(SendAll(fd, PostRequest(PingJson(11), id) + PostRequest(PingJson(12), id) +
                              PostRequest(PingJson(13), id)));
  std::string buf;
  for (int want : {11, 12, 13}) {
    auto r = ReadResponse(fd, buf);
    ASSERT_TRUE(r) << "no answer to ping " << want;
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->body.find("\"id\":" + std::to_string(want) + ","), std::string::npos) << r->body;
  }
}

// The client sends its request and shuts down its sending side: the answer still comes,
// then the server closes.
TEST_F(HttpTransportTest, AHalfClosedConnectionStillGetsItsAnswer) {
  Start();
  int fd = Conn();
  ASSERT_TRUE(SendAll(fd, PostRequest(InitJson())));
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  std::string buf;
  auto r = ReadResponse(fd, buf);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["mcp-session-id"].size(), 32u);
  EXPECT_TRUE(ClosedByServerWithin(fd, milliseconds(10000)));
}

// A request written a few bytes at a time (within the time limits) is served like any.
TEST_F(HttpTransportTest, ASlowWriterIsServed) {
  Start();
  int fd = Conn();
  std::string req = PostRequest(InitJson());
  for (size_t off = 0; off < req.size(); off += 16) {
    ASSERT_TRUE(SendAll(fd, req.substr(off, 16)));
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::string buf;
  auto r = ReadResponse(fd, buf);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// A body trickled in one byte a second never completes: the request's time limit closes
// the connection, and the server goes on serving.
TEST_F(HttpTransportTest, ABodyTrickledInIsCutOffByTheTimeLimit) {
  HttpOptions o;
  o.request_timeout = milliseconds(2000);
  Start(o);
  int fd = Conn();
  std::string body(40, ' ');
  std::string req = PostRequest(body);
  ASSERT_TRUE(SendAll(fd, req.substr(0, req.size() - body.size())));
  size_t sent = 0;
  bool closed = false;
  for (; sent < body.size() && !closed; ++sent) {
    if (!SendAll(fd, " ")) break;
    closed = ClosedByServerWithin(fd, milliseconds(1000));
  }
  EXPECT_TRUE(closed || sent < body.size()) << "the whole trickled body was taken";
  EXPECT_LT(sent, body.size());
  EXPECT_FALSE(Open().empty());
}

// A client that opens its GET stream and never reads it: the server keeps only the
// stream's newest events, and drops the connection once a write is not taken within the
// time limit (the session then takes a new GET stream: 200, where a second one next to a
// live stream is 409).
TEST_F(HttpTransportTest, AClientThatNeverReadsItsStreamIsDroppedWithBoundedMemory) {
  HttpOptions o;
  o.request_timeout = milliseconds(1500);
  Start(o);
  std::string id = Open();
  const std::string get =
      "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
      "Mcp-Session-Id: " +
      id + "\r\n\r\n";
  int fd = Conn();
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(SendAll(fd, get));
  // Another GET stream while this one is attached is refused: the stream is live.
  auto second_get = [&] {
    int other = Connect(http_->port());
    std::string buf;
    SendAll(other, get);
    auto r = ReadResponse(other, buf, /*headers_only=*/true);
    ::close(other);
    return r ? r->status : 0;
  };
  int status = 0;
  for (int i = 0; i < 100 && (status = second_get()) != 409; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(status, 409) << "the never-read stream did not attach";
  size_t in_use_before = MemoryInUseKiB();
  const std::string pad(64 * 1024, 'x');
  for (int i = 0; i < 2000; ++i) server_->Broadcast("notifications/custom", {{"pad", pad}});
  size_t in_use_after = MemoryInUseKiB();
  // 2000 events of 64 KiB are 125 MiB; the stream keeps at most kMaxBytesPerStream.
  EXPECT_LT(in_use_after, in_use_before + 48 * 1024)
      << "memory in use grew from " << in_use_before << " KiB";
  for (int i = 0; i < 200 && (status = second_get()) == 409; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(status, 200) << "the stream that is never read was not dropped";
  EXPECT_FALSE(Open().empty());
}

// 1,000 connections (some mid-request) opened and dropped: the server's fds come back to
// where they were and it goes on serving.
TEST_F(HttpTransportTest, AThousandDroppedConnectionsLeaveNoFdsBehind) {
  Start();
  EXPECT_FALSE(Open().empty());
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  std::this_thread::sleep_for(milliseconds(200));
  size_t baseline = CountEntries("/proc/self/fd");
  for (int round = 0; round < 4; ++round) {
    std::vector<int> batch;
    for (int i = 0; i < 250; ++i) {
      int fd = Connect(http_->port());
      ASSERT_GE(fd, 0);
      if (i % 3 == 1) SendAll(fd, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
      if (i % 3 == 2) SendAll(fd, PostRequest("{", "", false).substr(0, 100));
      batch.push_back(fd);
    }
    for (int fd : batch) ::close(fd);
  }
  size_t now = 0;
  for (int i = 0; i < 100; ++i) {
    now = CountEntries("/proc/self/fd");
    if (now <= baseline) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_LE(now, baseline);
  EXPECT_FALSE(Open().empty());
}

// 200 sessions, each with its GET stream open: the server's thread count stays bounded
// (no thread per connection), and the streams are live.
TEST_F(HttpTransportTest, TwoHundredOpenStreamsHoldNoThreadEach) {
  HttpOptions o;
  o.threads = 2;
  o.handler_threads = 8;
  Start(o);
  EXPECT_FALSE(Open().empty());  // the pools are up
  size_t threads_before = CountEntries("/proc/self/task");
  std::vector<int> streams;
  for (int i = 0; i < 200; ++i) {
    std::string id = Open();
    int fd = Conn();
    ASSERT_TRUE(SendAll(fd,
                        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                        "Mcp-Session-Id: " +
                            id + "\r\n\r\n"));
    std::string buf;
    auto r = ReadResponse(fd, buf, /*headers_only=*/true);
    ASSERT_TRUE(r) << "stream " << i << " got no answer";
    ASSERT_EQ(r->status, 200);
    streams.push_back(fd);
  }
  size_t threads_after = CountEntries("/proc/self/task");
  // Handler threads may have grown to their bound (8); nothing grows with the streams.
  EXPECT_LE(threads_after, threads_before + 8)
      << threads_before << " threads before, " << threads_after << " with 200 streams open";
  server_->Broadcast("notifications/custom", {{"n", 1}});
  for (int fd : {streams.front(), streams[100], streams.back()}) {
    std::string buf;
    while (buf.find("notifications/custom") == std::string::npos) {
      ASSERT_TRUE(ReadMore(fd, buf)) << "a stream did not get the broadcast: " << buf;
    }
  }
}

}  // namespace
}  // namespace mcp::testing
