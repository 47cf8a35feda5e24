// HttpServer on a listening socket it is given (HttpOptions::listen_fd, the way systemd
// socket activation passes one) instead of binding its own: a listening TCP socket on the
// configured address is served (an MCP initialize through it); anything else is refused at
// Bind with a message that says what the descriptor is and what was expected, and the
// descriptor is closed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "mcp/http_server.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

// A TCP socket bound to `address`:0 (any free port), listening unless `listen` is false.
int TcpSocket(const char* address, bool listen = true, int type = SOCK_STREAM) {
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &addr.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  if (listen) {
    EXPECT_EQ(::listen(fd, 16), 0);
  }
  return fd;
}

int PortOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

// Bind's message for `fd` under options host:port.
std::string BindError(int fd, const std::string& host = "127.0.0.1", int port = 0) {
  Server server(TestOptions());
  HttpOptions options;
  options.host = host;
  options.port = port;
  options.listen_fd = fd;
  HttpServer http(server, options);
  Status st = http.Bind();
  EXPECT_FALSE(st) << "fd " << fd << " was accepted";
  EXPECT_FALSE(IsOpen(fd)) << "a refused socket must be closed (the server owns it)";
  return st ? "" : st.message();
}

TEST(HttpListenFd, ServesMcpOnTheSocketItIsGiven) {
  const int fd = TcpSocket("127.0.0.1");
  const int port = PortOf(fd);
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(EchoTool()));
  HttpOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.listen_fd = fd;
  HttpServer http(server, options);
  Status st = http.Bind();
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(http.port(), port);
  std::thread runner([&] { http.Run(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  Json init = {{"jsonrpc", "2.0"},
               {"id", 1},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", "2025-06-18"},
                 {"capabilities", Json::object()},
                 {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  auto r = client.Post("/mcp", {{"Accept", "application/json, text/event-stream"}}, init.dump(),
                       "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("test-server"), std::string::npos) << r->body;
  EXPECT_FALSE(r->get_header_value("Mcp-Session-Id").empty());
  http.Stop();
  runner.join();
}

TEST(HttpListenFd, PortZeroTakesTheSocketsPort) {
  const int fd = TcpSocket("127.0.0.1");
  const int port = PortOf(fd);
  Server server(TestOptions());
  HttpOptions options;
  options.listen_fd = fd;
  HttpServer http(server, options);
  ASSERT_TRUE(http.Bind());
  EXPECT_EQ(http.port(), port);
}

TEST(HttpListenFd, RefusesASocketOnAnotherAddress) {
  // The Host and token checks trust opts.host: a socket on every address must not pass for
  // a loopback server.
  const int fd = TcpSocket("0.0.0.0");
  const std::string port = std::to_string(PortOf(fd));
  const std::string e = BindError(fd, "127.0.0.1", 0);
  EXPECT_NE(e.find("is bound to 0.0.0.0:" + port), std::string::npos) << e;
  EXPECT_NE(e.find("configured for 127.0.0.1:<any port>"), std::string::npos) << e;
}

TEST(HttpListenFd, RefusesASocketOnAnotherPort) {
  const int fd = TcpSocket("127.0.0.1");
  const int other = PortOf(fd) == 65000 ? 65001 : 65000;
  const std::string e = BindError(fd, "127.0.0.1", other);
  EXPECT_NE(e.find("configured for 127.0.0.1:" + std::to_string(other)), std::string::npos) << e;
  EXPECT_NE(e.find("same address and port"), std::string::npos) << e;
}

TEST(HttpListenFd, RefusesATcpSocketThatIsNotListening) {
  const std::string e = BindError(TcpSocket("127.0.0.1", /*listen=*/false));
  EXPECT_NE(e.find("not listening"), std::string::npos) << e;
  EXPECT_NE(e.find("Accept=no"), std::string::npos) << e;
}

TEST(HttpListenFd, RefusesADatagramSocket) {
  const std::string e = BindError(TcpSocket("127.0.0.1", false, SOCK_DGRAM));
  EXPECT_NE(e.find("not a stream socket"), std::string::npos) << e;
}

TEST(HttpListenFd, RefusesAUnixSocket) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const std::string e = BindError(fd);
  EXPECT_NE(e.find("unix-domain socket"), std::string::npos) << e;
}

TEST(HttpListenFd, RefusesAFileAndAClosedDescriptor) {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string e = BindError(fd);
  EXPECT_NE(e.find("(fd " + std::to_string(fd) + ") is a regular file, not a socket"),
            std::string::npos)
      << e;
  // A number far above any this process uses (fds are handed out lowest first), so
  // nothing the server makes (its epoll fd) can take it.
  const int closed = 900;
  ASSERT_EQ(::fcntl(closed, F_GETFD), -1);
  e = BindError(closed);
  EXPECT_NE(e.find("(fd 900) is not an open descriptor: EBADF"), std::string::npos) << e;
}

}  // namespace
}  // namespace mcp::testing
