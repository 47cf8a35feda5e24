// mcp::HttpServer over real loopback sockets, driven by cpp-httplib's client: the session
// lifecycle (initialize -> Mcp-Session-Id -> SSE answers with event ids -> DELETE -> 404),
// bearer-token tenants and their isolation, the standalone GET stream, idle expiry, and
// the bad-input answers.
#include "mcp/http_server.h"

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "mcp/session.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

const char* kAccept = "application/json, text/event-stream";

Json InitBody() {
  return {{"jsonrpc", "2.0"},
          {"id", 1},
          {"method", "initialize"},
          {"params",
           {{"protocolVersion", "2025-06-18"},
            {"capabilities", Json::object()},
            {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
}

struct Closed {
  std::string id, tenant, reason;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpOptions options, ServerOptions server_options = TestOptions()) {
    server_ = std::make_unique<Server>(server_options);
    ASSERT_TRUE(server_->AddTool(EchoTool()));
    options.on_session_closed = [this](const std::string& id, const std::string& tenant,
                                       const std::string& reason) {
      std::lock_guard lock(mu_);
      closed_.push_back({id, tenant, reason});
    };
    http_ = std::make_unique<HttpServer>(*server_, options);
    Status st = http_->Bind();
    ASSERT_TRUE(st) << st.message();
    thread_ = std::thread([this] { http_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    if (http_) http_->Stop();
    if (thread_.joinable()) thread_.join();
    http_.reset();
    server_.reset();
  }
  httplib::Result Post(const Json& body, httplib::Headers headers = {}) {
    headers.emplace("Accept", kAccept);
    return client_->Post("/mcp", headers, body.dump(), "application/json");
  }
  // initialize + notifications/initialized; returns the session id.
  std::string Open(httplib::Headers auth = {}) {
    auto r = Post(InitBody(), auth);
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    std::string id = r->get_header_value("Mcp-Session-Id");
    auth.emplace("Mcp-Session-Id", id);
    auto n = Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, auth);
    EXPECT_EQ(n->status, 202);
    return id;
  }
  std::vector<Closed> ClosedSessions() {
    std::lock_guard lock(mu_);
    return closed_;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
  std::mutex mu_;
  std::vector<Closed> closed_;
};

TEST_F(HttpServerTest, SessionLifecycleWithSseAnswersAndDelete) {
  Start({});
  std::string id = Open();
  ASSERT_EQ(id.size(), 32u);
  auto r = Post({{"jsonrpc", "2.0"},
                 {"id", 2},
                 {"method", "tools/call"},
                 {"params", {{"name", "echo"}, {"arguments", {{"text", "over http"}}}}}},
                {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2025-06-18"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(r->body.find("id: "), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("over http"), std::string::npos) << r->body;
  EXPECT_EQ(http_->live_sessions(), 1u);

  auto d = client_->Delete("/mcp", {{"Mcp-Session-Id", id}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200);
  EXPECT_EQ(http_->live_sessions(), 0u);
  auto closed = ClosedSessions();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].reason, "deleted by the client");
  EXPECT_EQ(closed[0].tenant, "default");

  auto again = Post({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}}, {{"Mcp-Session-Id", id}});
  EXPECT_EQ(again->status, 404);
}

TEST_F(HttpServerTest, TokensTenantsAndIsolation) {
  HttpOptions o;
  o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
    if (token == "ta") return HttpTenant{.name = "a"};
    if (token == "tb") return HttpTenant{.name = "b", .max_sessions = 1};
    return std::nullopt;
  };
  Start(o);
  auto none = Post(InitBody());
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate").rfind("Bearer", 0), 0u);
  auto wrong = Post(InitBody(), {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong->status, 401);
  EXPECT_NE(wrong->get_header_value("WWW-Authenticate").find("invalid_token"), std::string::npos);

  std::string a = Open({{"Authorization", "Bearer ta"}});
  std::string b = Open({{"Authorization", "Bearer tb"}});
  auto cross = Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}},
                    {{"Authorization", "Bearer tb"}, {"Mcp-Session-Id", a}});
  EXPECT_EQ(cross->status, 404);
  auto quota = Post(InitBody(), {{"Authorization", "Bearer tb"}});
  EXPECT_EQ(quota->status, 429);
  EXPECT_NE(quota->body.find("limit of 1 live sessions"), std::string::npos) << quota->body;
  EXPECT_FALSE(quota->get_header_value("Retry-After").empty());
  auto own = Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}},
                  {{"Authorization", "Bearer ta"}, {"Mcp-Session-Id", a}});
  EXPECT_EQ(own->status, 200);
}

// The authenticated tenant reaches mcp::Session::tenant() (so a per-session tool filter
// can tell tenants apart), and a tenant's own idle timeout overrides the server's.
TEST_F(HttpServerTest, TenantReachesTheSessionAndHasItsOwnIdleTimeout) {
  HttpOptions o;
  o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
    if (token == "ta") return HttpTenant{.name = "a"};
    if (token == "tb")
      return HttpTenant{.name = "b", .idle_timeout = std::chrono::milliseconds(200)};
    return std::nullopt;
  };
  ServerOptions so = TestOptions();
  so.tool_filter = [](const Session& session, const std::string&) {
    return session.tenant() == "a";
  };
  Start(o, so);
  std::string a = Open({{"Authorization", "Bearer ta"}});
  std::string b = Open({{"Authorization", "Bearer tb"}});
  Json list = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}};
  auto la = Post(list, {{"Authorization", "Bearer ta"}, {"Mcp-Session-Id", a}});
  auto lb = Post(list, {{"Authorization", "Bearer tb"}, {"Mcp-Session-Id", b}});
  EXPECT_NE(la->body.find("\"echo\""), std::string::npos) << la->body;
  EXPECT_EQ(lb->body.find("\"echo\""), std::string::npos) << lb->body;
  for (int i = 0; i < 50 && http_->live_sessions() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(http_->live_sessions(), 1u);  // b expired, a (the server's 15 min) did not
  auto closed = ClosedSessions();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].tenant, "b");
  EXPECT_NE(closed[0].reason.find("idle"), std::string::npos) << closed[0].reason;
}

TEST_F(HttpServerTest, WithoutAuthenticationSessionsHaveNoTenant) {
  ServerOptions so = TestOptions();
  so.tool_filter = [](const Session& session, const std::string&) {
    return session.tenant().empty();
  };
  Start({}, so);
  std::string id = Open();
  auto r =
      Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}}, {{"Mcp-Session-Id", id}});
  EXPECT_NE(r->body.find("\"echo\""), std::string::npos) << r->body;
}

TEST_F(HttpServerTest, StandaloneGetStreamReceivesServerNotifications) {
  Start({});
  std::string id = Open();
  std::string received;
  std::atomic<bool> got{false};
  httplib::Client get_client("127.0.0.1", http_->port());
  get_client.set_read_timeout(10, 0);
  std::thread reader([&] {
    get_client.Get("/mcp", {{"Mcp-Session-Id", id}, {"Accept", "text/event-stream"}},
                   [&](const char* data, size_t n) {
                     received.append(data, n);
                     if (received.find("notifications/custom") != std::string::npos) {
                       got = true;
                       return false;  // stop reading
                     }
                     return true;
                   });
  });
  for (int i = 0; i < 100 && !got; ++i) {
    server_->Broadcast("notifications/custom", {{"n", i}});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader.join();
  EXPECT_TRUE(got) << received;
  // A second GET stream while one is attached would be 409; after it ended, a new one is OK.
}

// A log line a tool call writes goes out with that call (its POST's SSE stream), not on
// the standalone GET stream, even while one is open (Streamable HTTP: the GET stream is for
// messages unrelated to any client request).
TEST_F(HttpServerTest, LogsOfACallGoOnTheCallsStreamNotTheGetStream) {
  server_ = nullptr;
  ServerOptions options = TestOptions();
  server_ = std::make_unique<Server>(options);
  Tool logger;
  logger.name = "logger";
  logger.input_schema = {{"type", "object"}};
  logger.handler = [](const Json&, Context& ctx) {
    ctx.Log(LogLevel::kError, "from the call");
    return ToolResult::Text("done");
  };
  ASSERT_TRUE(server_->AddTool(logger));
  http_ = std::make_unique<HttpServer>(*server_, HttpOptions{});
  Status st = http_->Bind();
  ASSERT_TRUE(st) << st.message();
  thread_ = std::thread([this] { http_->Run(); });
  client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
  client_->set_read_timeout(10, 0);
  std::string id = Open();

  std::mutex mu;
  std::string on_get;
  std::atomic<bool> attached{false};
  httplib::Client get_client("127.0.0.1", http_->port());
  get_client.set_read_timeout(10, 0);
  std::thread reader([&] {
    get_client.Get("/mcp", {{"Mcp-Session-Id", id}, {"Accept", "text/event-stream"}},
                   [&](const char* data, size_t n) {
                     std::lock_guard lock(mu);
                     on_get.append(data, n);
                     if (on_get.find("notifications/attached") != std::string::npos)
                       attached = true;
                     return on_get.find("notifications/stop") == std::string::npos;
                   });
  });
  for (int i = 0; i < 100 && !attached; ++i) {
    server_->Broadcast("notifications/attached", Json::object());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(attached);
  auto r = Post({{"jsonrpc", "2.0"},
                 {"id", 7},
                 {"method", "tools/call"},
                 {"params", {{"name", "logger"}, {"arguments", Json::object()}}}},
                {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2025-06-18"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("from the call"), std::string::npos) << r->body;
  server_->Broadcast("notifications/stop", Json::object());
  reader.join();
  std::lock_guard lock(mu);
  EXPECT_EQ(on_get.find("from the call"), std::string::npos) << on_get;
}

TEST_F(HttpServerTest, IdleSessionsExpire) {
  HttpOptions o;
  o.idle_timeout = std::chrono::milliseconds(200);
  Start(o);
  std::string id = Open();
  for (int i = 0; i < 50 && http_->live_sessions() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(http_->live_sessions(), 0u);
  auto closed = ClosedSessions();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_NE(closed[0].reason.find("idle"), std::string::npos) << closed[0].reason;
  auto r = Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}}, {{"Mcp-Session-Id", id}});
  EXPECT_EQ(r->status, 404);
}

TEST_F(HttpServerTest, BadInputGetsTheRight4xxAndServingGoesOn) {
  HttpOptions o;
  o.default_tenant.max_body_bytes = 1000;
  Start(o);
  auto ctype = client_->Post("/mcp", {{"Accept", kAccept}}, InitBody().dump(), "text/plain");
  EXPECT_EQ(ctype->status, 415);
  auto accept = client_->Post("/mcp", {{"Accept", "application/json"}}, InitBody().dump(),
                              "application/json");
  EXPECT_EQ(accept->status, 406);
  auto garbage = client_->Post("/mcp", {{"Accept", kAccept}}, "{nope", "application/json");
  EXPECT_EQ(garbage->status, 400);
  EXPECT_NE(garbage->body.find("not valid JSON"), std::string::npos);
  Json big = InitBody();
  big["params"]["pad"] = std::string(5000, 'x');
  auto large = Post(big);
  EXPECT_EQ(large->status, 413);
  EXPECT_NE(large->body.find("limit of 1000 bytes"), std::string::npos) << large->body;
  auto origin = Post(InitBody(), {{"Origin", "https://evil.example"}});
  EXPECT_EQ(origin->status, 403);
  auto host = Post(InitBody(), {{"Host", "evil.example:80"}});
  EXPECT_EQ(host->status, 403);
  auto local_origin = Post(InitBody(), {{"Origin", "http://localhost:3000"}});
  EXPECT_EQ(local_origin->status, 200);
  std::string id = Open();
  auto version = Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}},
                      {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2000-01-01"}});
  EXPECT_EQ(version->status, 400);
  auto resume = client_->Get(
      "/mcp",
      {{"Mcp-Session-Id", id}, {"Accept", "text/event-stream"}, {"Last-Event-ID", "garbage"}});
  EXPECT_EQ(resume->status, 400);
  auto ok = Post({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}}, {{"Mcp-Session-Id", id}});
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("\"result\""), std::string::npos);
}

TEST_F(HttpServerTest, ServesTlsWithCertificateAndKey) {
  char dir[] = "/tmp/mcp-http-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string d = dir;
  std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-keyout " +
      d + "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
  HttpOptions o;
  o.tls_cert_file = d + "/cert.pem";
  o.tls_key_file = d + "/key.pem";
  Start(o);
  EXPECT_EQ(http_->url().rfind("https://", 0), 0u) << http_->url();
  httplib::SSLClient tls("127.0.0.1", http_->port());
  tls.enable_server_certificate_verification(false);
  auto r = tls.Post("/mcp", {{"Accept", kAccept}}, InitBody().dump(), "application/json");
  ASSERT_TRUE(r) << "TLS request failed";
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->get_header_value("Mcp-Session-Id").empty());
  auto plain = Post(InitBody());  // plain HTTP to a TLS port gets no answer
  EXPECT_FALSE(plain && plain->status == 200);
  std::system(("rm -rf " + d).c_str());
}

TEST(HttpTls, MissingKeyIsRefusedAtBind) {
  Server server(TestOptions());
  HttpOptions o;
  o.tls_cert_file = "/nonexistent/cert.pem";
  HttpServer http(server, o);
  Status st = http.Bind();
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("both a certificate and a key"), std::string::npos);
  o.tls_key_file = "/nonexistent/key.pem";
  HttpServer http2(server, o);
  Status st2 = http2.Bind();
  ASSERT_FALSE(st2);
  EXPECT_NE(st2.message().find("cannot load the TLS certificate"), std::string::npos);
}

TEST(HttpLoopback, RecognizesLoopbackNames) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

}  // namespace
}  // namespace mcp::testing
