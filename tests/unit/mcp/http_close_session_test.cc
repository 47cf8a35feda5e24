// HttpServer::CloseSession: the embedder (an operator's end) closes one HTTP session, by its
// Mcp-Session-Id or its mcp::Session id. on_session_closed reports the embedder's reason
// once, the client's next request with its Mcp-Session-Id gets 404, and other sessions go
// on until closed; an unknown or already closed id is refused without effect.
#include <httplib.h>

#include <mutex>
#include <thread>
#include <vector>

#include "mcp/http_server.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

struct Closed {
  std::string id, tenant, reason;
};

Json Message(int id, const std::string& method) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
}

class HttpCloseSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<Server>(TestOptions());
    ASSERT_TRUE(server_->AddTool(EchoTool()));
    HttpOptions options;
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
    http_->Stop();
    thread_.join();
  }
  httplib::Result Post(const Json& body, const std::string& session = "") {
    httplib::Headers headers = {{"Accept", "application/json, text/event-stream"}};
    if (!session.empty()) headers.emplace("Mcp-Session-Id", session);
    return client_->Post("/mcp", headers, body.dump(), "application/json");
  }
  std::string Open() {
    Json init = Message(1, "initialize");
    init["params"] = {{"protocolVersion", "2025-06-18"},
                      {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}};
    auto r = Post(init);
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return "";
    std::string id = r->get_header_value("Mcp-Session-Id");
    EXPECT_EQ(Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, id)->status, 202);
    return id;
  }
  // The mcp::Session id of the session whose Mcp-Session-Id is `http_id`.
  std::string SessionIdOf(const std::string& http_id) {
    std::string out;
    for (const auto& s : server_->Sessions()) {
      if (!s->closed()) out = s->id();  // the one left open
    }
    (void)http_id;
    return out;
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

TEST_F(HttpCloseSessionTest, ClosedSessionsNextRequestIs404AndOthersGoOn) {
  const std::string a = Open(), b = Open();
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(http_->live_sessions(), 2u);
  EXPECT_EQ(Post(Message(2, "ping"), a)->status, 200);

  EXPECT_TRUE(http_->CloseSession(a, "ended by operator ops"));
  EXPECT_EQ(http_->live_sessions(), 1u);
  std::vector<Closed> closed = ClosedSessions();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].reason, "ended by operator ops");
  // By the mcp::Session id too (what the server's hooks know a session by).
  EXPECT_TRUE(http_->CloseSession(closed.size() == 1 ? SessionIdOf(b) : "", "by session id"));
  ASSERT_EQ(ClosedSessions().size(), 2u);
  EXPECT_EQ(ClosedSessions()[1].reason, "by session id");

  auto gone = Post(Message(3, "ping"), a);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404) << gone->body;

  EXPECT_FALSE(http_->CloseSession(a, "again"));  // already closed: nothing reported twice
  EXPECT_FALSE(http_->CloseSession("no-such-session", "x"));
  EXPECT_FALSE(http_->CloseSession("", "x"));
  EXPECT_EQ(ClosedSessions().size(), 2u);
  EXPECT_EQ(http_->live_sessions(), 0u);
  EXPECT_EQ(Post(Message(4, "ping"), b)->status, 404);
}

}  // namespace
}  // namespace mcp::testing
