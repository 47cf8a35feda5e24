// HttpOptions::revive_session and on_session_opened over real loopback sockets: a request
// naming an id the server does not hold asks the hook (with the tenant the session would
// have); a granted id gets an initialized session under that same id (the recorded protocol
// version, or the request's MCP-Protocol-Version) that serves the request; a refused one is
// 404 word for word as an unknown id; a DELETE of a revivable id ends it (on_session_closed).
#include <httplib.h>

#include <mutex>
#include <thread>
#include <vector>

#include "mcp/http_server.h"
#include "mcp/session.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

const char* kAccept = "application/json, text/event-stream";
const std::string kKept(32, 'a');

Json EchoCall(int id) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"method", "tools/call"},
          {"params", {{"name", "echo"}, {"arguments", {{"text", "revived"}}}}}};
}

class HttpReviveTest : public ::testing::Test {
 protected:
  void Start(HttpOptions options) {
    server_ = std::make_unique<Server>(TestOptions());
    ASSERT_TRUE(server_->AddTool(EchoTool()));
    options.revive_session =
        [this](const std::string& id,
               const std::string& tenant) -> std::optional<HttpOptions::RevivedSession> {
      std::lock_guard lock(mu_);
      asked_.push_back(id + "/" + tenant);
      if (id != kKept || tenant != kept_tenant_) return std::nullopt;
      return HttpOptions::RevivedSession{.protocol_version = "2025-03-26",
                                         .client_info = {{"name", "kept"}, {"version", "1"}},
                                         .client_capabilities = Json::object()};
    };
    options.on_session_opened = [this](const std::string& id, const Session& s) {
      std::lock_guard lock(mu_);
      opened_.push_back(id + " " + s.protocol_version() + " " + s.client_info().value("name", ""));
    };
    options.on_session_closed = [this](const std::string&, const std::string&,
                                       const std::string& reason) {
      std::lock_guard lock(mu_);
      closed_.push_back(reason);
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
  httplib::Result Post(const Json& body, httplib::Headers headers) {
    headers.emplace("Accept", kAccept);
    return client_->Post("/mcp", headers, body.dump(), "application/json");
  }
  std::vector<std::string> Opened() {
    std::lock_guard lock(mu_);
    return opened_;
  }

  std::string kept_tenant_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
  std::mutex mu_;
  std::vector<std::string> asked_, opened_, closed_;
};

TEST_F(HttpReviveTest, AKeptIdIsServedInAnInitializedSessionUnderTheSameId) {
  Start({});
  auto r = Post(EchoCall(5), {{"Mcp-Session-Id", kKept}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("revived"), std::string::npos) << r->body;
  EXPECT_EQ(http_->live_sessions(), 1u);
  EXPECT_EQ(Opened(), std::vector<std::string>{kKept + " 2025-03-26 kept"});
  // Now live: a second request is served without asking again.
  auto again = Post(EchoCall(6), {{"Mcp-Session-Id", kKept}});
  EXPECT_EQ(again->status, 200);
  std::lock_guard lock(mu_);
  EXPECT_EQ(asked_, std::vector<std::string>{kKept + "/"});
}

TEST_F(HttpReviveTest, TheRequestsProtocolVersionWinsOverTheRecordedOne) {
  Start({});
  auto r = Post(EchoCall(5), {{"Mcp-Session-Id", kKept}, {"MCP-Protocol-Version", "2025-06-18"}});
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Opened(), std::vector<std::string>{kKept + " 2025-06-18 kept"});
}

TEST_F(HttpReviveTest, ARefusedIdIsExactlyAnUnknownOne) {
  HttpOptions o;
  o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
    return HttpTenant{.name = token};
  };
  Start(o);
  kept_tenant_ = "alice";
  auto foreign = Post(EchoCall(5), {{"Authorization", "Bearer bob"}, {"Mcp-Session-Id", kKept}});
  auto unknown = Post(EchoCall(5),
                      {{"Authorization", "Bearer bob"}, {"Mcp-Session-Id", std::string(32, 'b')}});
  EXPECT_EQ(foreign->status, 404);
  EXPECT_EQ(foreign->body, unknown->body);
  EXPECT_TRUE(Opened().empty());
  auto own = Post(EchoCall(5), {{"Authorization", "Bearer alice"}, {"Mcp-Session-Id", kKept}});
  EXPECT_EQ(own->status, 200) << own->body;
  std::lock_guard lock(mu_);
  EXPECT_EQ(asked_.front(), kKept + "/bob");
}

TEST_F(HttpReviveTest, DeleteOfAKeptIdEndsIt) {
  Start({});
  auto d = client_->Delete("/mcp", {{"Mcp-Session-Id", kKept}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200);
  EXPECT_EQ(http_->live_sessions(), 0u);
  std::lock_guard lock(mu_);
  EXPECT_EQ(closed_, std::vector<std::string>{"deleted by the client"});
}

TEST_F(HttpReviveTest, ATenantAtItsSessionLimitGets429NotTheSession) {
  HttpOptions o;
  o.authenticate = [](const std::string& token) -> std::optional<HttpTenant> {
    return HttpTenant{.name = token, .max_sessions = 1};
  };
  Start(o);
  kept_tenant_ = "alice";
  auto init = Post({{"jsonrpc", "2.0"},
                    {"id", 1},
                    {"method", "initialize"},
                    {"params",
                     {{"protocolVersion", "2025-06-18"},
                      {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                   {{"Authorization", "Bearer alice"}});
  ASSERT_EQ(init->status, 200) << init->body;
  auto r = Post(EchoCall(5), {{"Authorization", "Bearer alice"}, {"Mcp-Session-Id", kKept}});
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_NE(r->body.find("limit of 1 live sessions"), std::string::npos) << r->body;
  EXPECT_EQ(http_->live_sessions(), 1u);
}

}  // namespace
}  // namespace mcp::testing
