// TLS interception for placeholder secrets, live on loopback with real TLS on both sides:
// an HTTPS upstream on 127.0.0.1 whose certificate comes from a test CA (passed to the proxy
// as its extra upstream CA file), a test client that CONNECTs through the proxy and trusts
// only the proxy's CA, names resolved by an injected resolver. The upstream echoes each
// request it receives, so a test sees both what went upstream and what came back masked.
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>

#include "base/base64.h"
#include "egress/proxy.h"
#include "egress/tls_ca.h"
#include "loopback_servers.h"

namespace mcpcell::egress {
namespace {

using namespace std::chrono_literals;
using testing::ConnectLoopback;
using testing::LoopbackServer;
using testing::ReadHead;
using testing::SendAll;

const std::string kPh = "mcpcell-secret-5e5e5e5e5e5e5e5e";
const std::string kOtherPh = "mcpcell-secret-7a7a7a7a7a7a7a7a";

// Reads from an SSL connection into a buffer; helpers take whole heads and bodies.
class SslReader {
 public:
  explicit SslReader(SSL* ssl) : ssl_(ssl) {}
  bool Fill() {
    char b[16384];
    int n = SSL_read(ssl_, b, sizeof b);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  std::optional<std::string> Take(size_t n) {
    while (buf_.size() < n)
      if (!Fill()) return std::nullopt;
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }
  std::optional<std::string> Line(const char* end = "\r\n") {
    size_t at;
    while ((at = buf_.find(end)) == std::string::npos)
      if (!Fill()) return std::nullopt;
    return Take(at + std::strlen(end));
  }
  std::string Rest() {
    while (Fill()) {
    }
    return std::exchange(buf_, "");
  }

 private:
  SSL* ssl_;
  std::string buf_;
};

std::string HeaderValue(const std::string& head, const std::string& name) {
  std::string lower = head, key = "\r\n" + name + ":";
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t at = lower.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  while (head[at] == ' ') ++at;
  return head.substr(at, head.find("\r\n", at) - at);
}

// HTTPS upstream: answers every request (keep-alive) with 200, an X-Echo-Authorization
// header, and the request as it arrived (head and body) as the body. Records the requests.
// close_after_each: closes after each answer without saying so (like a server's idle
// timeout on a kept-alive connection).
class EchoUpstream {
 public:
  EchoUpstream(CertificateAuthority& ca, const std::string& name, bool close_after_each = false)
      : close_after_each_(close_after_each),
        ctx_(SSL_CTX_new(TLS_server_method()), SSL_CTX_free),
        server_([this](int fd) { Serve(fd); }) {
    auto leaf = ca.LeafFor(name).value();
    SSL_CTX_use_certificate(ctx_.get(), leaf->cert.get());
    SSL_CTX_use_PrivateKey(ctx_.get(), leaf->key.get());
  }
  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Serve(int fd) {
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      SslReader in(ssl);
      while (std::optional<std::string> head = in.Line("\r\n\r\n")) {
        std::string length = HeaderValue(*head, "Content-Length");
        std::optional<std::string> body = in.Take(length.empty() ? 0 : std::stoul(length));
        if (!body) break;
        {
          std::lock_guard lock(mu_);
          requests_.push_back(*head + *body);
        }
        std::string echo = *head + *body;
        std::string reply =
            "HTTP/1.1 200 OK\r\nX-Echo-Authorization: " + HeaderValue(*head, "Authorization") +
            "\r\nContent-Length: " + std::to_string(echo.size()) + "\r\n\r\n" + echo;
        SSL_write(ssl, reply.data(), static_cast<int>(reply.size()));
        if (close_after_each_) break;
      }
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
  }

  const bool close_after_each_;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  LoopbackServer server_;  // last: joined before the context is freed
};

struct Reply {
  int status = 0;
  std::string head, body;
};

// A client inside the cell: CONNECT through the proxy, then TLS trusting only the proxy's CA
// and checking the host name.
class CellClient {
 public:
  // sni: the name sent in the ClientHello (empty: host); the certificate is checked for host.
  CellClient(uint16_t proxy_port, const std::string& host, uint16_t port, const std::string& ca_pem,
             const std::string& sni = "")
      : ctx_(SSL_CTX_new(TLS_client_method()), SSL_CTX_free) {
    fd_ = ConnectLoopback(proxy_port);
    std::string authority = host + ":" + std::to_string(port);
    SendAll(fd_, "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    connect_reply_ = ReadHead(fd_);
    if (connect_reply_.find(" 200 ") == std::string::npos) return;
    BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_.get()), ca);
    X509_free(ca);
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_.get());
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, (sni.empty() ? host : sni).c_str());
    SSL_set1_host(ssl_, host.c_str());
    handshake_ok_ = SSL_connect(ssl_) == 1;
  }
  ~CellClient() {
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) close(fd_);
  }
  bool ready() const { return handshake_ok_; }
  const std::string& connect_reply() const { return connect_reply_; }

  Reply Send(const std::string& request) {
    SSL_write(ssl_, request.data(), static_cast<int>(request.size()));
    SslReader& in = Reader();
    Reply r;
    std::optional<std::string> head = in.Line("\r\n\r\n");
    if (!head) return r;
    r.head = *head;
    r.status = std::atoi(head->substr(9, 3).c_str());
    if (HeaderValue(*head, "Transfer-Encoding") == "chunked") {
      while (std::optional<std::string> size = in.Line()) {
        size_t n = std::stoul(*size, nullptr, 16);
        std::optional<std::string> data = in.Take(n + 2);
        if (!data || n == 0) break;
        r.body += data->substr(0, n);
      }
    } else if (std::string length = HeaderValue(*head, "Content-Length"); !length.empty()) {
      r.body = in.Take(std::stoul(length)).value_or("");
    } else {
      r.body = in.Rest();
    }
    return r;
  }

 private:
  SslReader& Reader() {
    if (!reader_) reader_ = std::make_unique<SslReader>(ssl_);
    return *reader_;
  }
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::unique_ptr<SslReader> reader_;
  std::string connect_reply_;
  bool handshake_ok_ = false;
};

class InterceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    upstream_ca_ = CertificateAuthority::Create("test upstream CA").value();
    dir_ = std::filesystem::temp_directory_path() /
           ("mcpcell-intercept-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    ca_file_ = (dir_ / "upstream-ca.pem").string();
    std::ofstream(ca_file_) << upstream_ca_->certificate_pem();
    api_ = std::make_unique<EchoUpstream>(*upstream_ca_, "api.test");
    other_ = std::make_unique<EchoUpstream>(*upstream_ca_, "other.test");
  }
  void TearDown() override {
    proxy_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartProxy(bool trust_upstream_ca = true) {
    EgressProxyOptions options;
    options.resolver = [](const std::string& host, ResolveDone done) {
      if (host == "api.test" || host == "other.test" || host == "plain.test")
        return done(std::vector<IpAddress>{*IpAddress::Parse("127.0.0.1")});
      done(Error::Msg("Host not found"));
    };
    options.host_addresses = std::vector<IpAddress>{};
    if (trust_upstream_ca) options.upstream_ca_file = ca_file_;
    options.on_secret = [this](const SecretEvent& e) {
      std::lock_guard lock(mu_);
      secret_events_.push_back(e);
    };
    options.on_refusal = [this](const std::string&, const std::string& line) {
      std::lock_guard lock(mu_);
      refusals_.push_back(line);
    };
    proxy_ = std::make_unique<EgressProxy>(std::move(options));
    ASSERT_TRUE(proxy_->InterceptionReady()) << proxy_->InterceptionReady().error().message;
  }

  SecretGrant Grant(std::string name, std::string placeholder, const std::string& host) {
    SecretGrant g;
    g.name = std::move(name);
    g.placeholder = std::move(placeholder);
    g.value = [this]() -> Result<std::string> {
      std::lock_guard lock(mu_);
      return value_;
    };
    g.hosts = Allowlist::Parse({host}).value();
    return g;
  }

  void AddCell(std::vector<SecretGrant> grants, std::vector<std::string> extra_allow = {}) {
    std::string a = std::to_string(api_->port()), o = std::to_string(other_->port());
    std::vector<std::string> allow{"api.test:" + a, "other.test:" + o, "127.0.0.1:" + a,
                                   "127.0.0.1:" + o};
    for (std::string& e : extra_allow) allow.push_back(std::move(e));
    CellEgress cfg;
    cfg.session_id = "s-9";
    cfg.allowlist = Allowlist::Parse(allow).value();
    cfg.connect_timeout = 2s;
    cfg.idle_timeout = 10s;
    cfg.secrets = std::move(grants);
    int fd = testing::ListenLoopback(&proxy_port_);
    ASSERT_TRUE(proxy_->AddCell(fd, std::move(cfg)).ok());
  }

  std::unique_ptr<CellClient> Client(const std::string& host, uint16_t port) {
    return std::make_unique<CellClient>(proxy_port_, host, port, proxy_->InterceptionCaPem());
  }

  std::vector<SecretEvent> SecretEvents() {
    std::lock_guard lock(mu_);
    return secret_events_;
  }

  std::shared_ptr<CertificateAuthority> upstream_ca_;
  std::filesystem::path dir_;
  std::string ca_file_;
  std::unique_ptr<EchoUpstream> api_, other_;
  std::unique_ptr<EgressProxy> proxy_;
  uint16_t proxy_port_ = 0;
  std::mutex mu_;
  std::string value_ = "ghp_theRealValue123";  // mu_
  std::vector<SecretEvent> secret_events_;     // mu_
  std::vector<std::string> refusals_;          // mu_
};

std::string ApiGet(uint16_t port, const std::string& target, const std::string& headers) {
  return "GET " + target + " HTTP/1.1\r\nHost: api.test:" + std::to_string(port) + "\r\n" +
         headers + "\r\n";
}

TEST_F(InterceptTest, HeaderAndQueryCarryTheRealValueUpstreamAndTheEchoComesBackMasked) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("GITHUB_TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready()) << client->connect_reply();
  Reply r =
      client->Send(ApiGet(port, "/user?token=" + kPh, "Authorization: Bearer " + kPh + "\r\n"));
  ASSERT_EQ(r.status, 200) << r.head << r.body;
  ASSERT_EQ(api_->requests().size(), 1u);
  std::string upstream = api_->requests()[0];
  EXPECT_NE(upstream.find("GET /user?token=ghp_theRealValue123 HTTP/1.1"), std::string::npos);
  EXPECT_NE(upstream.find("Authorization: Bearer ghp_theRealValue123"), std::string::npos);
  EXPECT_EQ(upstream.find(kPh), std::string::npos);
  EXPECT_EQ(HeaderValue(upstream, "Accept-Encoding"), "identity");
  // The echo (header and body) reaches the cell with the placeholder in place of the value.
  EXPECT_EQ(HeaderValue(r.head, "X-Echo-Authorization"), "Bearer " + kPh);
  EXPECT_NE(r.body.find("Authorization: Bearer " + kPh), std::string::npos);
  EXPECT_EQ((r.head + r.body).find("ghp_theRealValue123"), std::string::npos);
  std::vector<SecretEvent> events = SecretEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].secret, "GITHUB_TOKEN");
  EXPECT_EQ(events[0].decision, "substituted");
  EXPECT_EQ(events[0].session_id, "s-9");
}

TEST_F(InterceptTest, BasicAuthIsSubstitutedInsideTheCredentials) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send(
      ApiGet(port, "/", "Authorization: Basic " + Base64Encode("x-access-token:" + kPh) + "\r\n"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(HeaderValue(api_->requests().at(0), "Authorization"),
            "Basic " + Base64Encode("x-access-token:ghp_theRealValue123"));
}

TEST_F(InterceptTest, JsonBodyWhenAllowedAndRefusedWhenNot) {
  StartProxy();
  uint16_t port = api_->port();
  SecretGrant g = Grant("TOKEN", kPh, "api.test:" + std::to_string(port));
  g.surfaces.body = true;
  AddCell({g});
  std::string body = "{\"token\":\"" + kPh + "\"}";
  std::string post =
      "POST /t HTTP/1.1\r\nHost: api.test:" + std::to_string(port) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send(post);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(api_->requests().at(0).find("{\"token\":\"ghp_theRealValue123\"}"), std::string::npos);
  EXPECT_EQ(HeaderValue(api_->requests().at(0), "Content-Length"),
            std::to_string(body.size() - kPh.size() + 19));
  EXPECT_NE(r.body.find(body), std::string::npos);  // the echoed body, masked
}

TEST_F(InterceptTest, SurfaceNotAllowedIsRefusedWithA403AndNothingGoesUpstream) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("GITHUB_TOKEN", kPh, "api.test:" + std::to_string(port))});
  std::string body = "{\"token\":\"" + kPh + "\"}";
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send("POST / HTTP/1.1\r\nHost: api.test:" + std::to_string(port) +
                         "\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
  const std::string line =
      "mcpcell: secret GITHUB_TOKEN refused: its placeholder was in the request body, which is "
      "not an allowed surface for it";
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, line + "\n");
  EXPECT_EQ(HeaderValue(r.head, "X-Mcpcell-Reason"), line);
  EXPECT_TRUE(api_->requests().empty());
  std::vector<SecretEvent> events = SecretEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].decision, "refused");
  EXPECT_EQ(events[0].surface, "body");
  std::lock_guard lock(mu_);
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0], line);
}

TEST_F(InterceptTest, PlaceholderOfOneHostSentToAnotherSecretsHostIsRefused) {
  StartProxy();
  std::string a = std::to_string(api_->port()), o = std::to_string(other_->port());
  SecretGrant g = Grant("A_TOKEN", kPh, "api.test:" + a);
  g.end_session_on_violation = true;
  AddCell({g, Grant("O_TOKEN", kOtherPh, "other.test:" + o)});
  auto client = Client("other.test", other_->port());
  ASSERT_TRUE(client->ready());
  Reply r =
      client->Send("GET / HTTP/1.1\r\nHost: other.test:" + o + "\r\nX-Key: " + kPh + "\r\n\r\n");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("secret A_TOKEN refused: its placeholder was in a request to other.test:" +
                        o + ", which is not one of its hosts"),
            std::string::npos);
  EXPECT_TRUE(other_->requests().empty());
  std::vector<SecretEvent> events = SecretEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].end_session);
}

TEST_F(InterceptTest, HostHeaderOtherThanTheTlsHostIsRefused) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send("GET / HTTP/1.1\r\nHost: other.test\r\nX-Key: " + kPh + "\r\n\r\n");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("is not the TLS host api.test"), std::string::npos);
  EXPECT_TRUE(api_->requests().empty());
}

TEST_F(InterceptTest, RotatedValueIsUsedOnTheNextRequestOfTheSameConnection) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  ASSERT_EQ(client->Send(ApiGet(port, "/1", "X-Key: " + kPh + "\r\n")).status, 200);
  {
    std::lock_guard lock(mu_);
    value_ = "rotated-value-2";
  }
  Reply second = client->Send(ApiGet(port, "/2", "X-Key: " + kPh + "\r\n"));
  ASSERT_EQ(second.status, 200);
  ASSERT_EQ(api_->requests().size(), 2u);
  EXPECT_EQ(HeaderValue(api_->requests()[0], "X-Key"), "ghp_theRealValue123");
  EXPECT_EQ(HeaderValue(api_->requests()[1], "X-Key"), "rotated-value-2");
  EXPECT_EQ(second.body.find("rotated-value-2"), std::string::npos);
}

TEST_F(InterceptTest, LargeAnswerStreamsInManyPiecesWholeAndInOrderThenTheConnectionGoesOn) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  // Several of the proxy's body pieces, each line numbered so a lost or reordered piece shows.
  std::string body;
  for (int line = 0; body.size() < 600 * 1024; ++line) body += std::to_string(line) + " abcdefgh\n";
  std::string request = "POST /big HTTP/1.1\r\nHost: api.test:" + std::to_string(port) +
                        "\r\nX-Key: " + kPh + "\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  Reply r = client->Send(request);
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(HeaderValue(r.head, "Transfer-Encoding"), "chunked");
  ASSERT_GT(r.body.size(), body.size());
  EXPECT_TRUE(r.body.ends_with("\r\n\r\n" + body));  // the echoed head, then the body whole
  EXPECT_NE(r.body.find("X-Key: " + kPh), std::string::npos);
  EXPECT_EQ(r.body.find("ghp_theRealValue123"), std::string::npos);
  Reply next = client->Send(ApiGet(port, "/after", "X-Key: " + kPh + "\r\n"));
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(api_->requests().size(), 2u);
}

TEST_F(InterceptTest, UpstreamThatClosedAKeptAliveConnectionIsReconnectedOnce) {
  api_ = std::make_unique<EchoUpstream>(*upstream_ca_, "api.test", /*close_after_each=*/true);
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  ASSERT_EQ(client->Send(ApiGet(port, "/1", "X-Key: " + kPh + "\r\n")).status, 200);
  Reply second = client->Send(ApiGet(port, "/2", "X-Key: " + kPh + "\r\n"));
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(api_->accepted(), 2);
  ASSERT_EQ(api_->requests().size(), 2u);
  EXPECT_NE(api_->requests()[1].find("GET /2 "), std::string::npos);
}

TEST_F(InterceptTest, SniOtherThanTheConnectHostIsCutBeforeAnyRequest) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  CellClient client(proxy_port_, "api.test", port, proxy_->InterceptionCaPem(), "other.test");
  ASSERT_TRUE(client.ready());  // the proxy's leaf is valid for api.test, which it checks
  Reply r = client.Send(ApiGet(port, "/", "X-Key: " + kPh + "\r\n"));
  EXPECT_EQ(r.status, 0);  // closed without an answer
  EXPECT_TRUE(api_->requests().empty());
  std::lock_guard lock(mu_);
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0], "mcpcell: egress to api.test:" + std::to_string(port) +
                              " denied: SNI other.test does not match CONNECT host api.test");
}

TEST_F(InterceptTest, Http10ClientGetsTheMaskedBodyFramedByTheClose) {
  StartProxy();
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send("GET /old HTTP/1.0\r\nHost: api.test:" + std::to_string(port) +
                         "\r\nX-Key: " + kPh + "\r\n\r\n");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(HeaderValue(r.head, "Transfer-Encoding"), "");
  EXPECT_EQ(HeaderValue(r.head, "Connection"), "close");
  EXPECT_NE(r.body.find("X-Key: " + kPh), std::string::npos);
  EXPECT_EQ(r.body.find("ghp_theRealValue123"), std::string::npos);
  EXPECT_EQ(HeaderValue(api_->requests().at(0), "X-Key"), "ghp_theRealValue123");
}

TEST_F(InterceptTest, ExpiredSecretIsRefused) {
  StartProxy();
  uint16_t port = api_->port();
  SecretGrant g = Grant("TOKEN", kPh, "api.test:" + std::to_string(port));
  g.expires = std::chrono::steady_clock::now();
  AddCell({g});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send(ApiGet(port, "/", "X-Key: " + kPh + "\r\n"));
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("after the secret expired"), std::string::npos);
  EXPECT_TRUE(api_->requests().empty());
}

TEST_F(InterceptTest, UntrustedUpstreamGetsA502AndNoRequest) {
  StartProxy(/*trust_upstream_ca=*/false);
  uint16_t port = api_->port();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(port))});
  auto client = Client("api.test", port);
  ASSERT_TRUE(client->ready());
  Reply r = client->Send(ApiGet(port, "/", "X-Key: " + kPh + "\r\n"));
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("certificate"), std::string::npos) << r.body;
  EXPECT_TRUE(api_->requests().empty());
}

TEST_F(InterceptTest, HostsWithoutGrantsKeepTheBlindTunnel) {
  StartProxy();
  AddCell({Grant("TOKEN", kPh, "api.test:" + std::to_string(api_->port()))});
  // The client trusts only the proxy's CA: the real upstream certificate fails its check,
  // which shows the tunnel was not intercepted.
  auto client = Client("other.test", other_->port());
  EXPECT_NE(client->connect_reply().find(" 200 "), std::string::npos);
  EXPECT_FALSE(client->ready());
}

TEST_F(InterceptTest, PlainHttpWithAPlaceholderIsRefusedBeforeAnyConnection) {
  std::atomic<int> accepted{0};
  LoopbackServer plain([&](int) { accepted++; });
  StartProxy();
  std::string p = std::to_string(plain.port());
  AddCell({Grant("TOKEN", kPh, "plain.test:" + p)}, {"plain.test:" + p, "127.0.0.1:" + p});
  int fd = ConnectLoopback(proxy_port_);
  SendAll(fd, "GET http://plain.test:" + p + "/?k=" + kPh + " HTTP/1.1\r\nHost: plain.test:" + p +
                  "\r\n\r\n");
  std::string reply = testing::ReadAll(fd);
  close(fd);
  EXPECT_NE(reply.find("HTTP/1.1 403"), std::string::npos);
  EXPECT_NE(reply.find("mcpcell: secret TOKEN refused: its placeholder was in a plain-HTTP "
                       "request to plain.test:" +
                       p + "; a secret is only sent over TLS"),
            std::string::npos);
  EXPECT_EQ(accepted.load(), 0);
}

TEST_F(InterceptTest, PlainHttpBodyWithAPlaceholderIsCutBeforeItGoesUpstream) {
  std::mutex got_mu;
  std::string got;
  auto plain = std::make_unique<LoopbackServer>([&](int fd) {
    std::string all = testing::ReadAll(fd);
    std::lock_guard lock(got_mu);
    got = all;
  });
  StartProxy();
  std::string p = std::to_string(plain->port());
  AddCell({Grant("TOKEN", kPh, "plain.test:" + p)}, {"plain.test:" + p, "127.0.0.1:" + p});
  std::string body = "data=" + std::string(100, 'x') + kPh;
  int fd = ConnectLoopback(proxy_port_);
  SendAll(fd, "POST http://plain.test:" + p + "/ HTTP/1.1\r\nHost: plain.test:" + p +
                  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  // The head has gone upstream before the body is sent.
  for (int i = 0; i < 1000 && plain->accepted() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(plain->accepted(), 1);
  SendAll(fd, body.substr(0, 110));
  SendAll(fd, body.substr(110));
  testing::ReadAll(fd);  // the proxy cuts the connection
  close(fd);
  proxy_.reset();  // every connection closed
  std::vector<SecretEvent> events = SecretEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].surface, "plain_http");
  EXPECT_EQ(events[0].decision, "refused");
  plain.reset();  // joins its handler
  std::lock_guard lock(got_mu);
  EXPECT_NE(got.find("POST / HTTP/1.1"), std::string::npos);
  EXPECT_EQ(got.find(kPh.substr(0, 8)), std::string::npos) << got;
}

}  // namespace
}  // namespace mcpcell::egress
