// The live proxy on loopback: a listening socket made here stands for the one cell init
// passes in, upstream HTTP and TLS servers run on 127.0.0.1, and names resolve through an
// injected resolver. Loopback is refused by the address rules unless the test's allowlist
// names 127.0.0.1 explicitly, which is how the upstreams are reached at all.
#include "egress/proxy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>

#include "loopback_servers.h"

namespace mcpcell::egress {
namespace {

using namespace std::chrono_literals;
using testing::ConnectLoopback;
using testing::LoopbackServer;
using testing::ReadAll;
using testing::ReadHead;
using testing::SendAll;

// Upstream HTTP: /hello answers "hello"; /stream sends until the peer goes away; /wait
// answers nothing and waits for the peer to close. Records
// every request head it receives.
class HttpUpstream {
 public:
  HttpUpstream()
      : server_([this](int fd) {
          std::string head = ReadHead(fd);
          {
            std::lock_guard lock(mu_);
            heads_.push_back(head);
          }
          if (head.find(" /wait ") != std::string::npos) {
            ReadAll(fd);  // until the proxy closes (or the socket timeout)
            return;
          }
          if (head.find(" /trickle ") != std::string::npos) {  // a byte every 50 ms
            SendAll(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            while (SendAll(fd, ".")) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            return;
          }
          if (head.find(" /stream ") != std::string::npos) {
            SendAll(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            std::string chunk(64 * 1024, 'x');
            while (SendAll(fd, chunk)) {
            }
            return;
          }
          SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        }) {}
  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> heads_;
  LoopbackServer server_;
};

// Upstream TLS: completes the handshake, reads one line and answers "tls-ok <sni>\n".
class TlsUpstream {
 public:
  TlsUpstream()
      : ctx_(testing::SelfSignedServerContext("tls.test"), SSL_CTX_free), server_([this](int fd) {
          SSL* ssl = SSL_new(ctx_.get());
          SSL_set_fd(ssl, fd);
          if (SSL_accept(ssl) == 1) {
            char line[256];
            int n = SSL_read(ssl, line, sizeof line);
            const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
            std::string reply = "tls-ok " + std::string(sni ? sni : "-") + "\n";
            if (n > 0) SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
            SSL_shutdown(ssl);
          }
          SSL_free(ssl);
        }) {}
  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }

 private:
  // Declared before server_, so freed only after server_ has joined its workers.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_;
  LoopbackServer server_;
};

struct Response {
  int status = 0;
  std::string head, body;
  std::string Header(const std::string& name) const {
    size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return "";
    at += name.size() + 4;
    return head.substr(at, head.find("\r\n", at) - at);
  }
};

Response ParseResponse(const std::string& raw) {
  Response r;
  size_t end = raw.find("\r\n\r\n");
  r.head = raw.substr(0, end == std::string::npos ? raw.size() : end + 2);
  r.body = end == std::string::npos ? "" : raw.substr(end + 4);
  if (raw.size() > 12) r.status = std::atoi(raw.substr(9, 3).c_str());
  return r;
}

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { signal(SIGPIPE, SIG_IGN); }
  // The proxy goes first: its destructor still emits audit events into events_.
  void TearDown() override { proxy_.reset(); }

  // Starts the proxy with the test resolver and a collecting audit sink.
  void StartProxy(EgressProxyOptions options = {}) {
    options.resolver = [this](const std::string& host, ResolveDone done) {
      resolver_calls_++;
      auto it = names_.find(host);
      if (it == names_.end()) return done(Error::Msg("Host not found"));
      std::vector<IpAddress> out;
      for (const std::string& a : it->second) out.push_back(*IpAddress::Parse(a));
      done(out);
    };
    options.audit = [this](const nlohmann::json& event) {
      std::lock_guard lock(mu_);
      events_.push_back(event);
      cv_.notify_all();
    };
    options.host_addresses = std::vector<IpAddress>{};
    proxy_ = std::make_unique<EgressProxy>(std::move(options));
  }

  EgressCellId AddCell(const std::vector<std::string>& allow, uint32_t max_connections = 8,
                       std::chrono::milliseconds idle = 10s) {
    auto list = Allowlist::Parse(allow);
    EXPECT_TRUE(list.ok()) << list.error().message;
    CellEgress cfg;
    cfg.session_id = "s-1";
    cfg.tenant = "acme";
    cfg.allowlist = list.value();
    cfg.max_connections = max_connections;
    cfg.connect_timeout = 2s;
    cfg.idle_timeout = idle;
    int fd = testing::ListenLoopback(&proxy_port_);
    auto id = proxy_->AddCell(fd, std::move(cfg));
    EXPECT_TRUE(id.ok()) << id.error().message;
    return id.value();
  }

  int Connect() {
    int fd = ConnectLoopback(proxy_port_);
    EXPECT_GE(fd, 0);
    return fd;
  }

  Response Request(const std::string& raw) {
    int fd = Connect();
    SendAll(fd, raw);
    Response r = ParseResponse(ReadAll(fd));
    close(fd);
    return r;
  }

  // Waits for the n-th audit event (connections end asynchronously).
  nlohmann::json Event(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return events_.size() > n; });
    return events_.size() > n ? events_[n] : nlohmann::json();
  }
  size_t EventCount() {
    std::lock_guard lock(mu_);
    return events_.size();
  }

  std::map<std::string, std::vector<std::string>> names_ = {
      {"up.test", {"127.0.0.1"}},
      {"tls.test", {"127.0.0.1"}},
      {"metadata.internal", {"169.254.169.254"}},
      {"mixed.test", {"169.254.169.254", "127.0.0.1"}},
  };
  std::atomic<int> resolver_calls_{0};
  std::unique_ptr<EgressProxy> proxy_;
  uint16_t proxy_port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> events_;
};

std::string Get(const std::string& host, uint16_t port, const std::string& path = "/hello") {
  std::string authority = host + ":" + std::to_string(port);
  return "GET http://" + authority + path + " HTTP/1.1\r\nHost: " + authority +
         "\r\nProxy-Authorization: Basic c2VjcmV0\r\nAccept: */*\r\n\r\n";
}

TEST_F(ProxyTest, PlainHttpThroughTheProxy) {
  HttpUpstream up;
  StartProxy();
  std::string p = std::to_string(up.port());
  EgressCellId cell = AddCell({"up.test:" + p, "127.0.0.1:" + p});
  Response r = Request(Get("up.test", up.port()));
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "hello");
  ASSERT_EQ(up.heads().size(), 1u);
  std::string forwarded =
      "GET /hello HTTP/1.1\r\nHost: up.test:" + p + "\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(up.heads()[0], forwarded);  // origin-form, no Proxy-Authorization

  nlohmann::json e = Event(0);
  EXPECT_EQ(e["session"], "s-1");
  EXPECT_EQ(e["tenant"], "acme");
  EXPECT_EQ(e["method"], "GET");
  EXPECT_EQ(e["host"], "up.test");
  EXPECT_EQ(e["port"], up.port());
  EXPECT_EQ(e["address"], "127.0.0.1");
  EXPECT_EQ(e["decision"], "allow");
  EXPECT_EQ(e["reason"], "allowed by up.test:" + p);
  EXPECT_EQ(e["bytes_up"], forwarded.size());
  size_t down =
      std::string("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello").size();
  EXPECT_EQ(e["bytes_down"], down);
  EXPECT_TRUE(e["time"].get<std::string>().ends_with("Z"));
  EXPECT_GE(e["duration_ms"].get<double>(), 0.0);

  auto stats = proxy_->Stats(cell);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->bytes_up, forwarded.size());
  EXPECT_EQ(stats->bytes_down, down);
  EXPECT_EQ(stats->connections_total, 1u);
  EXPECT_EQ(stats->connections_active, 0u);
  EXPECT_EQ(stats->connections_refused, 0u);
}

// A request body the proxy does not scan (the cell has no secrets) is relayed through a
// kernel pipe: upstream gets exactly Content-Length bytes, in whatever pieces the client
// sent them, nothing after them, and the counters hold the exact byte count.
TEST_F(ProxyTest, PlainHttpBodyIsForwardedExactlyAndCounted) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string got_head, got_body, got_after;
  LoopbackServer up([&](int fd) {
    std::string head = ReadHead(fd);
    size_t at = head.find("Content-Length: ");
    size_t want = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
    std::string body;
    char buf[65536];
    while (body.size() < want) {
      ssize_t n = recv(fd, buf, std::min(sizeof buf, want - body.size()), 0);
      if (n <= 0) break;
      body.append(buf, static_cast<size_t>(n));
    }
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    shutdown(fd, SHUT_WR);
    std::string after = ReadAll(fd);  // until the proxy closes: must stay empty
    std::lock_guard lock(mu);
    got_head = head;
    got_body = body;
    got_after = after;
    done = true;
    cv.notify_all();
  });
  StartProxy();
  std::string p = std::to_string(up.port());
  EgressCellId cell = AddCell({"up.test:" + p, "127.0.0.1:" + p});
  std::string body(3 * 1024 * 1024 + 7, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  std::string authority = "up.test:" + p;
  int fd = Connect();
  ASSERT_TRUE(SendAll(fd, "POST http://" + authority + "/upload HTTP/1.1\r\nHost: " + authority +
                              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                              body.substr(0, 1000)));
  std::this_thread::sleep_for(50ms);  // the rest comes later, as a second piece
  ASSERT_TRUE(SendAll(fd, body.substr(1000) + "EXTRA BYTES NOT IN THE BODY"));
  Response r = ParseResponse(ReadAll(fd));
  close(fd);
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "ok");
  nlohmann::json e = Event(0);
  std::unique_lock lock(mu);
  // The upstream's handler records after the proxy closed its side, as the event is sent.
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return done; }));
  EXPECT_EQ(got_body.size(), body.size());
  EXPECT_TRUE(got_body == body);
  EXPECT_EQ(got_after, "");
  EXPECT_EQ(e["bytes_up"], got_head.size() + body.size());
  auto stats = proxy_->Stats(cell);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->bytes_up, got_head.size() + body.size());
}

// The server's own services (the package index) are reached by name whatever the cell's
// allowlist says, at the operator's address (loopback here, which the address rules would
// refuse otherwise), with identity headers only the proxy can set.
TEST_F(ProxyTest, InternalRouteReachesTheServersServiceWithTrustedHeaders) {
  HttpUpstream up;
  EgressProxyOptions options;
  options.internal_routes = {
      {"packages.mcpcell.internal", *IpAddress::Parse("127.0.0.1"), up.port()}};
  StartProxy(std::move(options));
  EgressCellId cell = AddCell({});  // an empty allowlist: everything else is refused
  Response r = Request(
      "GET http://Packages.Mcpcell.Internal/pypi/simple/x/ HTTP/1.1\r\n"
      "Host: Packages.Mcpcell.Internal\r\nX-Mcpcell-Session: forged\r\n"
      "x-mcpcell-tenant: forged\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "hello");
  ASSERT_EQ(up.heads().size(), 1u);
  EXPECT_EQ(up.heads()[0],
            "GET /pypi/simple/x/ HTTP/1.1\r\nHost: Packages.Mcpcell.Internal\r\nAccept: */*\r\n"
            "X-Mcpcell-Session: s-1\r\nX-Mcpcell-Tenant: acme\r\nConnection: close\r\n\r\n");
  nlohmann::json e = Event(0);
  EXPECT_EQ(e["decision"], "allow");
  EXPECT_EQ(e["host"], "packages.mcpcell.internal");  // names are compared lowercased
  EXPECT_EQ(e["address"], "127.0.0.1");
  EXPECT_EQ(e["reason"], "the server's own service packages.mcpcell.internal");
  EXPECT_EQ(resolver_calls_.load(), 0);

  // Only plain http:// on port 80: a tunnel could carry anything past the service.
  Response c = Request(
      "CONNECT packages.mcpcell.internal:443 HTTP/1.1\r\nHost: "
      "packages.mcpcell.internal:443\r\n\r\n");
  EXPECT_EQ(c.status, 403);
  EXPECT_NE(c.body.find("reached with plain http:// (port 80)"), std::string::npos) << c.body;
  Response p = Request(
      "GET http://packages.mcpcell.internal:8080/ HTTP/1.1\r\nHost: "
      "packages.mcpcell.internal:8080\r\n\r\n");
  EXPECT_EQ(p.status, 403);
  // Other names still follow the allowlist.
  Response o = Request(Get("up.test", up.port()));
  EXPECT_EQ(o.status, 403);
  EXPECT_EQ(up.heads().size(), 1u);
  auto stats = proxy_->Stats(cell);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->connections_refused, 3u);
}

TEST_F(ProxyTest, HostNotInAllowlistIsRefusedWithoutResolving) {
  StartProxy();
  EgressCellId cell = AddCell({"pypi.org"});
  Response r = Request(Get("evil.test", 80));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "mcpcell: egress to evil.test:80 denied: not in the policy's allowlist\n");
  EXPECT_EQ(r.Header("X-Mcpcell-Reason"),
            "mcpcell: egress to evil.test:80 denied: not in the policy's allowlist");
  // The status line carries the reason too (Python quotes only that for a refused CONNECT).
  EXPECT_EQ(r.head.substr(0, r.head.find("\r\n")),
            "HTTP/1.1 403 Forbidden (mcpcell: egress to evil.test:80 denied: not in the policy's "
            "allowlist)");
  EXPECT_EQ(resolver_calls_.load(), 0);
  nlohmann::json e = Event(0);
  EXPECT_EQ(e["decision"], "deny");
  EXPECT_EQ(e["reason"], "not in the policy's allowlist");
  EXPECT_TRUE(e["address"].is_null());
  EXPECT_EQ(proxy_->Stats(cell)->connections_refused, 1u);
}

TEST_F(ProxyTest, AllowlistedNameResolvingToMetadataIsRefused) {
  StartProxy();
  AddCell({"metadata.internal"});
  Response r = Request(
      "GET http://metadata.internal/latest/meta-data/ HTTP/1.1\r\n"
      "Host: metadata.internal\r\n\r\n");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body,
            "mcpcell: egress to metadata.internal:80 denied: resolves to 169.254.169.254 "
            "(link-local)\n");
  nlohmann::json e = Event(0);
  EXPECT_EQ(e["decision"], "deny");
  EXPECT_EQ(e["address"], "169.254.169.254");
  EXPECT_EQ(e["reason"], "resolves to 169.254.169.254 (link-local)");
}

TEST_F(ProxyTest, LoopbackNeedsAnExplicitAddressEntry) {
  HttpUpstream up;
  StartProxy();
  AddCell({"up.test:" + std::to_string(up.port())});
  Response r = Request(Get("up.test", up.port()));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "mcpcell: egress to up.test:" + std::to_string(up.port()) +
                        " denied: resolves to 127.0.0.1 (loopback)\n");
  EXPECT_EQ(up.accepted(), 0);
}

// `serve --egress-hosts`: a pinned name is used before the resolver, and its addresses go
// through the same address rules.
TEST_F(ProxyTest, HostsTableComesFirstAndIsCheckedLikeDns) {
  HttpUpstream up;
  EgressProxyOptions options;
  std::string p = std::to_string(up.port());
  auto hosts = ParseHostsFile("127.0.0.1 pinned.test\n169.254.169.254 up.test\n", "hosts");
  ASSERT_TRUE(hosts.ok()) << hosts.error().message;
  options.hosts = *hosts;
  StartProxy(std::move(options));
  AddCell({"pinned.test:" + p, "127.0.0.1:" + p, "up.test:" + p});
  Response pinned = Request(Get("pinned.test", up.port()));
  EXPECT_EQ(pinned.status, 200) << pinned.body;
  // up.test would resolve to 127.0.0.1 (allowed by the address entry); the table wins.
  Response overridden = Request(Get("up.test", up.port()));
  EXPECT_EQ(overridden.status, 403);
  EXPECT_EQ(overridden.body, "mcpcell: egress to up.test:" + p +
                                 " denied: resolves to 169.254.169.254 (link-local)\n");
  EXPECT_EQ(resolver_calls_.load(), 0);
}

TEST_F(ProxyTest, OnlyAcceptableAddressesAreTried) {
  HttpUpstream up;
  StartProxy();
  std::string p = std::to_string(up.port());
  AddCell({"mixed.test:" + p, "127.0.0.1:" + p});
  Response r = Request(Get("mixed.test", up.port()));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Event(0)["address"], "127.0.0.1");
}

TEST_F(ProxyTest, BadRequestsGet400) {
  StartProxy();
  AddCell({"up.test"});
  Response missing = Request("GET http://up.test/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body, "mcpcell: bad proxy request: missing Host header\n");
  Response mismatch = Request("GET http://up.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_EQ(mismatch.body,
            "mcpcell: bad proxy request: Host header \"other.test\" does not match the URL's "
            "host up.test:80\n");
  Response https = Request("GET https://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n");
  EXPECT_EQ(https.status, 400);
  Response huge = Request("GET http://up.test/ HTTP/1.1\r\nX: " + std::string(20000, 'a'));
  EXPECT_EQ(huge.status, 400);
  EXPECT_EQ(huge.body, "mcpcell: bad proxy request: request head larger than 16384 bytes\n");
  EXPECT_EQ(Event(3)["decision"], "deny");
}

TEST_F(ProxyTest, UpstreamConnectFailureIs502) {
  uint16_t dead_port;
  close(testing::ListenLoopback(&dead_port));  // nothing listens there any more
  StartProxy();
  std::string p = std::to_string(dead_port);
  AddCell({"up.test:" + p, "127.0.0.1:" + p});
  Response r = Request(Get("up.test", dead_port));
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.body, "mcpcell: egress to up.test:" + p +
                        " failed: connect to 127.0.0.1: Connection refused\n");
  Response unknown = Request("GET http://nowhere.test:" + p +
                             "/ HTTP/1.1\r\nHost: nowhere.test:" + p + "\r\n\r\n");
  EXPECT_EQ(unknown.status, 403);  // not allowlisted: never resolved
}

// The client side of a CONNECT tunnel followed by TLS with `sni`.
struct TlsClientResult {
  int connect_status = 0;
  bool handshake_ok = false;
  std::string reply;
};

TlsClientResult ConnectTls(uint16_t proxy_port, const std::string& connect_target,
                           const std::string& sni) {
  TlsClientResult out;
  int fd = ConnectLoopback(proxy_port);
  SendAll(fd, "CONNECT " + connect_target + " HTTP/1.1\r\nHost: " + connect_target + "\r\n\r\n");
  Response head = ParseResponse(ReadHead(fd));
  out.connect_status = head.status;
  if (head.status != 200) {
    close(fd);
    return out;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl, sni.c_str());
  if (SSL_connect(ssl) == 1) {  // self-signed: not verified, the test is about routing
    out.handshake_ok = true;
    SSL_write(ssl, "ping\n", 5);
    char buf[256];
    int n = SSL_read(ssl, buf, sizeof buf);
    if (n > 0) out.reply.assign(buf, static_cast<size_t>(n));
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return out;
}

TEST_F(ProxyTest, ConnectWithMatchingSni) {
  TlsUpstream tls;
  StartProxy();
  std::string p = std::to_string(tls.port());
  EgressCellId cell = AddCell({"tls.test:" + p, "127.0.0.0/8:" + p});
  TlsClientResult r = ConnectTls(proxy_port_, "tls.test:" + p, "TLS.test");
  EXPECT_EQ(r.connect_status, 200);
  EXPECT_TRUE(r.handshake_ok);
  EXPECT_EQ(r.reply, "tls-ok TLS.test\n");
  nlohmann::json e = Event(0);
  EXPECT_EQ(e["method"], "CONNECT");
  EXPECT_EQ(e["decision"], "allow");
  EXPECT_GT(e["bytes_up"].get<uint64_t>(), 100u);
  EXPECT_GT(e["bytes_down"].get<uint64_t>(), 100u);
  auto stats = proxy_->Stats(cell);
  EXPECT_EQ(stats->bytes_up, e["bytes_up"].get<uint64_t>());
  EXPECT_EQ(stats->bytes_down, e["bytes_down"].get<uint64_t>());
}

TEST_F(ProxyTest, ConnectWithOtherSniIsClosed) {
  TlsUpstream tls;
  StartProxy();
  std::string p = std::to_string(tls.port());
  EgressCellId cell = AddCell({"tls.test:" + p, "127.0.0.1:" + p});
  TlsClientResult r = ConnectTls(proxy_port_, "tls.test:" + p, "other.test");
  EXPECT_EQ(r.connect_status, 200);
  EXPECT_FALSE(r.handshake_ok);
  nlohmann::json e = Event(0);
  EXPECT_EQ(e["decision"], "deny");
  EXPECT_EQ(e["reason"], "SNI other.test does not match CONNECT host tls.test");
  EXPECT_EQ(e["bytes_up"], 0);  // the ClientHello never went upstream
  EXPECT_EQ(proxy_->Stats(cell)->connections_refused, 1u);
  EXPECT_EQ(proxy_->Stats(cell)->connections_active, 0u);
}

// The server shows refusals in the tool result of the call that caused them: the sink hears
// each one, with the session, before the client sees the answer.
TEST_F(ProxyTest, RefusalSinkHearsEveryRefusalBeforeTheClient) {
  TlsUpstream tls;
  std::mutex mu;
  std::vector<std::string> heard;
  EgressProxyOptions options;
  options.on_refusal = [&](const std::string& session, const std::string& line) {
    std::lock_guard lock(mu);
    heard.push_back(session + " " + line);
  };
  StartProxy(std::move(options));
  std::string p = std::to_string(tls.port());
  AddCell({"tls.test:" + p, "127.0.0.1:" + p});
  Response r = Request(Get("evil.test", 80));
  EXPECT_EQ(r.status, 403);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(heard.size(), 1u);  // already there when the answer was read
    EXPECT_EQ(heard[0],
              "s-1 mcpcell: egress to evil.test:80 denied: not in the policy's allowlist");
  }
  TlsClientResult cut = ConnectTls(proxy_port_, "tls.test:" + p, "other.test");
  EXPECT_FALSE(cut.handshake_ok);
  Event(1);
  std::lock_guard lock(mu);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[1], "s-1 mcpcell: egress to tls.test:" + p +
                          " denied: SNI other.test does not match CONNECT host tls.test");
}

TEST_F(ProxyTest, ConnectWithoutSniToANameIsClosed) {
  TlsUpstream tls;
  StartProxy();
  std::string p = std::to_string(tls.port());
  AddCell({"tls.test:" + p, "127.0.0.1:" + p});
  EXPECT_FALSE(ConnectTls(proxy_port_, "tls.test:" + p, "").handshake_ok);
  EXPECT_EQ(Event(0)["reason"], "no SNI in the TLS ClientHello for CONNECT host tls.test");
}

TEST_F(ProxyTest, ConnectToAllowedIpLiteralNeedsNoSni) {
  TlsUpstream tls;
  StartProxy();
  std::string p = std::to_string(tls.port());
  AddCell({"127.0.0.1:" + p});
  TlsClientResult r = ConnectTls(proxy_port_, "127.0.0.1:" + p, "");
  EXPECT_TRUE(r.handshake_ok);
  EXPECT_EQ(r.reply, "tls-ok -\n");
}

TEST_F(ProxyTest, ConnectCarryingSomethingElseThanTlsIsClosed) {
  TlsUpstream tls;
  StartProxy();
  std::string p = std::to_string(tls.port());
  AddCell({"tls.test:" + p, "127.0.0.1:" + p});
  int fd = Connect();
  SendAll(fd, "CONNECT tls.test:" + p + " HTTP/1.1\r\n\r\nSSH-2.0-OpenSSH_9.2\r\n");
  EXPECT_EQ(ParseResponse(ReadHead(fd)).status, 200);
  EXPECT_EQ(ReadAll(fd), "");  // closed, nothing relayed
  close(fd);
  EXPECT_EQ(Event(0)["reason"],
            "TLS ClientHello expected after CONNECT: not a TLS handshake (first bytes 0x53 0x53 "
            "at offset 0)");
}

TEST_F(ProxyTest, ConnectionLimit) {
  TlsUpstream tls;
  HttpUpstream up;
  StartProxy();
  std::string tp = std::to_string(tls.port()), hp = std::to_string(up.port());
  EgressCellId cell =
      AddCell({"tls.test:" + tp, "up.test:" + hp, "127.0.0.1:" + tp, "127.0.0.1:" + hp},
              /*max_connections=*/1);
  int held = Connect();  // a tunnel that stays open (no ClientHello yet)
  SendAll(held, "CONNECT tls.test:" + tp + " HTTP/1.1\r\n\r\n");
  ASSERT_EQ(ParseResponse(ReadHead(held)).status, 200);
  EXPECT_EQ(proxy_->Stats(cell)->connections_active, 1u);
  Response r = Request(Get("up.test", up.port()));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "mcpcell: egress to up.test:" + hp +
                        " denied: the cell has 1 connections open (limit 1)\n");
  close(held);
  Event(1);  // the held tunnel has ended
  EXPECT_EQ(proxy_->Stats(cell)->connections_active, 0u);
  EXPECT_EQ(Request(Get("up.test", up.port())).status, 200);
}

TEST_F(ProxyTest, IdleConnectionIsClosed) {
  HttpUpstream up;
  StartProxy();
  std::string hp = std::to_string(up.port());
  AddCell({"up.test:" + hp, "127.0.0.1:" + hp}, 8, /*idle=*/300ms);
  int fd = Connect();
  // The upstream never answers and the client sends nothing more: the proxy times out.
  SendAll(fd, Get("up.test", up.port(), "/wait"));
  auto t0 = std::chrono::steady_clock::now();
  ReadAll(fd);
  close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  nlohmann::json e = Event(0);
  EXPECT_NE(e["reason"].get<std::string>().find("idle timeout"), std::string::npos) << e;
}

// A frozen cell reads nothing: what its upstream keeps sending must not hold the
// connection open. Trickling keeps a running cell's connection alive past its idle time;
// once the cell is paused it closes about idle_timeout later, as an idle timeout.
TEST_F(ProxyTest, APausedCellsConnectionClosesAtItsIdleTimeoutWhateverTheUpstreamSends) {
  HttpUpstream up;
  StartProxy();
  std::string hp = std::to_string(up.port());
  EgressCellId cell = AddCell({"up.test:" + hp, "127.0.0.1:" + hp}, 8, /*idle=*/1s);
  int fd = Connect();
  SendAll(fd, Get("up.test", up.port(), "/trickle"));
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  // Running: bytes keep arriving for three idle periods.
  size_t got = 0;
  char buf[4096];
  for (auto until = std::chrono::steady_clock::now() + 3s;
       std::chrono::steady_clock::now() < until;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << "closed while the cell ran and its upstream sent";
    got += static_cast<size_t>(n);
  }
  EXPECT_GT(got, 0u);
  EXPECT_EQ(EventCount(), 0u);
  ASSERT_TRUE(proxy_->SetCellPaused(cell, true));
  const auto paused_at = std::chrono::steady_clock::now();
  ReadAll(fd);  // until the proxy closes its side
  close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - paused_at, 8s);
  nlohmann::json e = Event(0);  // waits for it: written as the connection ends
  EXPECT_NE(e.value("reason", std::string()).find("idle timeout"), std::string::npos) << e;
  EXPECT_EQ(EventCount(), 1u);
  EXPECT_FALSE(proxy_->SetCellPaused(cell + 1000, true));  // unknown cell
}

TEST_F(ProxyTest, RemoveCellDuringTransfer) {
  HttpUpstream up;
  StartProxy();
  std::string p = std::to_string(up.port());
  uint16_t port;
  EgressCellId cell = AddCell({"up.test:" + p, "127.0.0.1:" + p});
  port = proxy_port_;
  int fd = Connect();
  SendAll(fd, Get("up.test", up.port(), "/stream"));
  std::string got;
  char buf[65536];
  while (got.size() < (1u << 20)) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  std::optional<EgressStats> final_stats = proxy_->RemoveCell(cell);
  ASSERT_TRUE(final_stats.has_value());
  // Counters count completed writes; the one cut short by RemoveCell is not in them.
  EXPECT_GE(final_stats->bytes_down + 64 * 1024, got.size() - 64 * 1024);
  EXPECT_EQ(final_stats->connections_active, 0u);
  // Every audit event was emitted before RemoveCell returned.
  ASSERT_EQ(EventCount(), 1u);
  nlohmann::json e = Event(0);
  EXPECT_NE(e["reason"].get<std::string>().find("the cell was removed"), std::string::npos) << e;
  EXPECT_EQ(e["bytes_down"], final_stats->bytes_down);
  ReadAll(fd);  // ends: the proxy closed its side
  close(fd);
  EXPECT_EQ(ConnectLoopback(port), -1);  // the listener is closed
  EXPECT_FALSE(proxy_->Stats(cell).has_value());
  EXPECT_FALSE(proxy_->RemoveCell(cell).has_value());
}

TEST_F(ProxyTest, AddCellRefusesWhatIsNotAListeningSocket) {
  StartProxy();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto id = proxy_->AddCell(fd, CellEgress{});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().message,
            "egress: fd " + std::to_string(fd) + " is not a listening TCP socket");
  int pipes[2];
  ASSERT_EQ(pipe2(pipes, O_CLOEXEC), 0);
  close(pipes[1]);
  auto bad = proxy_->AddCell(pipes[0], CellEgress{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("ENOTSOCK"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace mcpcell::egress
