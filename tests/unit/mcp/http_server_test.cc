// mcp::HttpServer over real loopback sockets, driven by cpp-httplib's client: the session
// lifecycle (initialize -> Mcp-Session-Id -> SSE answers with event ids -> DELETE -> 404),
// bearer-token tenants and their isolation, the standalone GET stream, idle expiry, and
// the bad-input answers; more open streams than a fixed pool would serve, and the
// cancellation of a call whose client dropped its connection.
#include "mcp/http_server.h"

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
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
  // Nested deeper than the limit: refused before it is parsed and copied (400 levels
  // fit in the body limit; 100,000 overflowed a thread's stack when copied).
  auto deep = client_->Post("/mcp", {{"Accept", kAccept}},
                            R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":)" +
                                std::string(400, '[') + std::string(400, ']') + "}}",
                            "application/json");
  EXPECT_EQ(deep->status, 400);
  EXPECT_NE(deep->body.find("nested deeper than 256 levels"), std::string::npos) << deep->body;
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

// An application route shares the listener and the Host/Origin checks, gets the token,
// peer and query; every 401/403 (MCP's and the route's) reaches on_auth_refused.
TEST_F(HttpServerTest, ExtraRoutesAndRefusalsAreReported) {
  HttpOptions o;
  o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
    if (token == "good") return HttpTenant{};
    return std::nullopt;
  };
  std::vector<HttpRefusal> refusals;
  std::mutex refusals_mu;
  o.on_auth_refused = [&](const HttpRefusal& r) {
    std::lock_guard lock(refusals_mu);
    refusals.push_back(r);
  };
  HttpRouteRequest seen;
  o.routes.push_back({"/admin", [&seen](const HttpRouteRequest& in) {
                        seen = in;
                        HttpRouteResponse out;
                        if (in.bearer_token != "ops") {
                          out.status = 401;
                          out.refusal_reason = "not an operator";
                          return out;
                        }
                        out.content_type = "text/plain";
                        out.body = "ok " + in.path;
                        out.headers.emplace_back("X-Route", "yes");
                        return out;
                      }});
  Start(o);
  auto ok = client_->Get("/admin/audit?tenant=a&limit=2", {{"Authorization", "Bearer ops"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok /admin/audit");
  EXPECT_EQ(ok->get_header_value("X-Route"), "yes");
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.bearer_token, "ops");
  EXPECT_EQ(seen.params.size(), 2u);
  EXPECT_EQ(seen.peer.rfind("127.0.0.1:", 0), 0u) << seen.peer;
  EXPECT_EQ(client_->Get("/adminx")->status, 404);  // a prefix is a path segment
  EXPECT_EQ(client_->Get("/admin/audit", {{"Authorization", "Bearer good"}})->status, 401);
  EXPECT_EQ(client_->Get("/admin", {{"Host", "evil.example"}})->status, 403);
  EXPECT_EQ(Post(InitBody(), {{"Authorization", "Bearer ops"}})->status, 401);
  std::lock_guard lock(refusals_mu);
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_EQ(refusals[0].status, 401);
  EXPECT_EQ(refusals[0].path, "/admin/audit");
  EXPECT_EQ(refusals[0].reason, "not an operator");
  EXPECT_EQ(refusals[1].status, 403);
  EXPECT_EQ(refusals[2].path, "/mcp");
  EXPECT_EQ(refusals[2].reason, "invalid bearer token");
  EXPECT_EQ(refusals[2].peer.rfind("127.0.0.1:", 0), 0u);
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

// Issue 24: with SO_REUSEPORT both servers listened and the kernel spread the connections
// over them, so a session's requests reached a server that did not know it.
TEST_F(HttpServerTest, ASecondServerOnTheSamePortFailsToBindSayingTheAddressIsInUse) {
  Start(HttpOptions{});
  HttpOptions same;
  same.port = http_->port();
  HttpServer second(*server_, same);
  Status st = second.Bind();
  ASSERT_FALSE(st) << "a second server bound 127.0.0.1:" << same.port;
  const std::string address = "127.0.0.1:" + std::to_string(same.port);
  EXPECT_NE(st.message().find("cannot listen on " + address + ": address already in use"),
            std::string::npos)
      << st.message();
  // The first one still serves every connection.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Open().empty());
}

TEST(HttpBind, AHostThatIsNotOursIsNamedInTheError) {
  Server server(TestOptions());
  HttpOptions o;
  o.host = "192.0.2.1";  // TEST-NET-1: never an address of this host
  o.port = 1;
  HttpServer http(server, o);
  Status st = http.Bind();
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("cannot listen on 192.0.2.1:1: address not available"),
            std::string::npos)
      << st.message();
}

TEST(HttpLoopback, RecognizesLoopbackNames) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

// The fault tests' HTTP transport fixes (tests/faults): streams beyond a fixed thread pool,
// and calls whose client went away.
class HttpServerFaultTest : public HttpServerTest {
 protected:
  // A server whose "gate" tool counts its callers and waits (up to 20 s) until `want` of
  // them run at once, and whose "block" tool runs until cancelled.
  void StartWithTools(HttpOptions options, int want) {
    server_ = std::make_unique<Server>(TestOptions());
    Tool gate;
    gate.name = "gate";
    gate.input_schema = {{"type", "object"}};
    gate.handler = [this, want](const Json&, Context&) {
      std::unique_lock lock(gate_mu_);
      ++inside_;
      gate_cv_.notify_all();
      bool all = gate_cv_.wait_for(lock, std::chrono::seconds(20), [&] { return inside_ >= want; });
      return ToolResult::Text(all ? "all inside" : "only " + std::to_string(inside_) + " inside");
    };
    ASSERT_TRUE(server_->AddTool(gate));
    Tool block;
    block.name = "block";
    block.input_schema = {{"type", "object"}};
    block.handler = [this](const Json&, Context& ctx) {
      // Registered before gate_mu_ is taken: a call cancelled already runs the callback
      // right here, and it takes gate_mu_ itself.
      ctx.OnCancel([this] {
        std::lock_guard l(gate_mu_);
        ++cancelled_;
        gate_cv_.notify_all();
      });
      std::unique_lock lock(gate_mu_);
      ++blocked_;
      gate_cv_.notify_all();
      gate_cv_.wait_for(lock, std::chrono::seconds(30), [&] { return ctx.cancelled(); });
      return ToolResult::Text("unblocked");
    };
    ASSERT_TRUE(server_->AddTool(block));
    http_ = std::make_unique<HttpServer>(*server_, options);
    Status st = http_->Bind();
    ASSERT_TRUE(st) << st.message();
    thread_ = std::thread([this] { http_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(30, 0);
  }
  Json Call(int id, const std::string& tool) {
    return {{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params", {{"name", tool}, {"arguments", Json::object()}}}};
  }

  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int inside_ = 0;
  int blocked_ = 0;
  int cancelled_ = 0;
};

// Every open stream holds a connection thread; with a fixed pool of 64 the 65th call never
// started (and every other session stalled). 100 calls in flight at once (10 sessions of 10:
// a session runs at most ServerOptions::max_session_tasks at once), all answered.
TEST_F(HttpServerFaultTest, MoreStreamsThanAFixedPoolAreAllServed) {
  constexpr int kSessions = 10;
  constexpr int kCalls = 100;
  StartWithTools({}, kCalls);
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) ids.push_back(Open());
  std::vector<std::string> bodies(kCalls);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", http_->port());
      c.set_read_timeout(60, 0);
      auto r =
          c.Post("/mcp",
                 {{"Accept", kAccept}, {"Mcp-Session-Id", ids[static_cast<size_t>(i % kSessions)]}},
                 Call(100 + i, "gate").dump(), "application/json");
      bodies[static_cast<size_t>(i)] = r ? r->body : "no answer";
    });
  }
  for (auto& t : callers) t.join();
  for (const std::string& body : bodies) {
    EXPECT_NE(body.find("all inside"), std::string::npos)
        << body.substr(body.size() > 300 ? body.size() - 300 : 0);
  }
}

// A client that drops its connection mid-call and does not resume the stream within the
// grace gets its call cancelled; one that is still connected does not.
TEST_F(HttpServerFaultTest, ADroppedCallIsCancelledAfterTheResumeGrace) {
  HttpOptions o;
  o.resume_grace = std::chrono::milliseconds(300);
  StartWithTools(o, 1);
  std::string id = Open();
  {
    // The client gives up (closes the connection) once the call runs, not after a fixed
    // time: under load the call could start late, and a call cancelled before it started
    // never reaches the tool's cancel callback.
    httplib::Client quitter("127.0.0.1", http_->port());
    quitter.set_read_timeout(30, 0);
    bool answered = true;
    std::thread post([&] {
      answered =
          static_cast<bool>(quitter.Post("/mcp", {{"Accept", kAccept}, {"Mcp-Session-Id", id}},
                                         Call(7, "block").dump(), "application/json"));
    });
    {
      std::unique_lock lock(gate_mu_);
      EXPECT_TRUE(gate_cv_.wait_for(lock, std::chrono::seconds(20), [&] { return blocked_ == 1; }))
          << "the call did not start";
    }
    quitter.stop();
    post.join();
    EXPECT_FALSE(answered);
  }
  std::unique_lock lock(gate_mu_);
  EXPECT_TRUE(gate_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return cancelled_ == 1; }))
      << "blocked " << blocked_ << ", cancelled " << cancelled_;
  lock.unlock();
  // The session still serves, and a connected caller's call runs until it is answered.
  auto r = Post({{"jsonrpc", "2.0"}, {"id", 8}, {"method", "ping"}}, {{"Mcp-Session-Id", id}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("\"result\""), std::string::npos) << r->body;
}

// A request whose id the session cannot echo, or whose id is already in flight, is refused at
// once: its answer could never be routed to its stream, and the POST would wait forever.
TEST_F(HttpServerFaultTest, UnroutableRequestIdsAreRefusedNotLeftWaiting) {
  StartWithTools({}, 1);
  std::string id = Open();
  httplib::Headers h = {{"Mcp-Session-Id", id}};
  for (const char* bad : {R"({"a":1})", "1.5", "null", "true", "[1]"}) {
    Json call = Call(0, "gate");
    call["id"] = Json::parse(bad);
    auto r = Post(call, h);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
    EXPECT_NE(r->body.find("request id must be a string or an integer"), std::string::npos)
        << r->body;
  }
  // Id 9 in flight (blocking), then again: 409.
  std::string first;
  std::thread holder([&] {
    httplib::Client c("127.0.0.1", http_->port());
    c.set_read_timeout(30, 0);
    auto r = c.Post("/mcp", {{"Accept", kAccept}, {"Mcp-Session-Id", id}}, Call(9, "block").dump(),
                    "application/json");
    first = r ? r->body : "no answer";
  });
  {
    std::unique_lock lock(gate_mu_);
    ASSERT_TRUE(gate_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_ == 1; }));
  }
  auto dup = Post(Call(9, "gate"), h);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 409) << dup->body;
  EXPECT_NE(dup->body.find("already in use"), std::string::npos) << dup->body;
  auto cancel = Post(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 9}}}},
      h);
  EXPECT_EQ(cancel->status, 202);
  // A cancelled request gets no response, and its POST stream ends instead of waiting.
  holder.join();
  EXPECT_NE(first, "no answer");
  EXPECT_EQ(first.find("\"result\""), std::string::npos) << first;
}

}  // namespace
}  // namespace mcp::testing
