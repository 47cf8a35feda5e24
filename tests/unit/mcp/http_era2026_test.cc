// 2026-07-28 requests over real loopback HTTP beside today's sessions on one HttpServer: no
// session id, JSON answers with the spec's statuses (400 for the request's own faults, 404
// for unknown methods), the header rules (MCP-Protocol-Version, Mcp-Method, Mcp-Name,
// Mcp-Param-* from x-mcp-header arguments) and progress on an SSE answer.
#include <httplib.h>

#include <thread>

#include "mcp/era2026.h"
#include "mcp/http_server.h"
#include "tests/unit/mcp/test_util.h"

namespace mcp::testing {
namespace {

const char* kAccept = "application/json, text/event-stream";

Json Meta(const std::string& version = "2026-07-28") {
  return {{"io.modelcontextprotocol/protocolVersion", version},
          {"io.modelcontextprotocol/clientCapabilities", Json::object()}};
}

Json Request(int id, const std::string& method, Json params, Json meta = Meta()) {
  if (!meta.is_null()) params["_meta"] = std::move(meta);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

// The headers a 2026-07-28 client sends for `body`.
httplib::Headers HeadersFor(const Json& body) {
  httplib::Headers h = {{"MCP-Protocol-Version", "2026-07-28"},
                        {"Mcp-Method", body["method"].get<std::string>()}};
  const Json& params = body["params"];
  if (params.contains("name")) h.emplace("Mcp-Name", params["name"].get<std::string>());
  return h;
}

class HttpEra2026Test : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<Server>(TestOptions());
    ASSERT_TRUE(server_->AddTool(EchoTool()));
    Tool routed;
    routed.name = "routed";
    routed.input_schema = {
        {"type", "object"},
        {"properties", {{"region", {{"type", "string"}, {"x-mcp-header", "Region"}}}}}};
    routed.handler = [](const Json& args, Context&) {
      return ToolResult::Text(args.value("region", "none"));
    };
    ASSERT_TRUE(server_->AddTool(routed));
    Tool slow;
    slow.name = "progress";
    slow.input_schema = {{"type", "object"}};
    slow.handler = [](const Json&, Context& ctx) {
      ctx.Progress(1, 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return ToolResult::Text("done");
    };
    ASSERT_TRUE(server_->AddTool(slow));
    http_ = std::make_unique<HttpServer>(*server_, HttpOptions{});
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
  // Posts `body` with the headers a client sends, after `change` edits them.
  httplib::Result PostEdited(const Json& body,
                             const std::function<void(httplib::Headers&)>& change) {
    httplib::Headers h = HeadersFor(body);
    change(h);
    return Post(body, h);
  }
  static void Drop(httplib::Headers& h, const std::string& name) { h.erase(name); }

  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

// Status and JSON body of an answer.
std::pair<int, Json> Answer(const httplib::Result& r) {
  if (!r) return {0, Json()};
  return {r->status, Json::parse(r->body, nullptr, false)};
}

TEST_F(HttpEra2026Test, AStatelessCallIsAnsweredAsJsonWithoutASession) {
  Json body = Request(7, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "hi"}}}});
  auto r = Post(body, HeadersFor(body));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(r->has_header("Mcp-Session-Id"));
  Json answer = Json::parse(r->body);
  EXPECT_EQ(answer["id"], 7);
  EXPECT_EQ(answer["result"]["resultType"], "complete");
  EXPECT_EQ(answer["result"]["content"][0]["text"], "hi");
  EXPECT_TRUE(server_->Sessions().empty()) << "the request's session ends with its answer";
}

TEST_F(HttpEra2026Test, TheRequestsOwnFaultsAre400AndUnknownMethods404WithTheirIds) {
  Json list = Request(1, "tools/list", Json::object());
  auto [status, body] = Answer(PostEdited(list, [](auto& h) { Drop(h, "MCP-Protocol-Version"); }));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], era2026::kHeaderMismatch);
  EXPECT_EQ(body["id"], 1);

  Json no_meta = Request(2, "tools/list", Json::object(), nullptr);
  std::tie(status, body) = Answer(Post(no_meta, HeadersFor(no_meta)));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], kInvalidParams);

  Json other_version = Request(3, "tools/list", Json::object(), Meta("2027-01-01"));
  std::tie(status, body) = Answer(PostEdited(other_version, [](auto& h) {
    Drop(h, "MCP-Protocol-Version");
    h.emplace("MCP-Protocol-Version", "2027-01-01");
  }));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], era2026::kUnsupportedProtocolVersion);
  EXPECT_EQ(body["error"]["data"]["requested"], "2027-01-01");

  Json mismatched = Request(4, "tools/list", Json::object(), Meta("2027-01-01"));
  std::tie(status, body) = Answer(Post(mismatched, HeadersFor(mismatched)));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], era2026::kHeaderMismatch) << "header and _meta disagree";

  Json unknown = Request(5, "no/such/method", Json::object());
  std::tie(status, body) = Answer(Post(unknown, HeadersFor(unknown)));
  EXPECT_EQ(status, 404);
  EXPECT_EQ(body["error"]["code"], kMethodNotFound);
  EXPECT_EQ(body["id"], 5);
}

TEST_F(HttpEra2026Test, MethodAndNameHeadersMustMatchTheBody) {
  Json call = Request(1, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "x"}}}});
  auto [status, body] = Answer(PostEdited(call, [](auto& h) {
    Drop(h, "Mcp-Method");
    h.emplace("Mcp-Method", "tools/list");
  }));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], era2026::kHeaderMismatch);
  std::tie(status, body) = Answer(PostEdited(call, [](auto& h) {
    Drop(h, "Mcp-Name");
    h.emplace("Mcp-Name", "routed");
  }));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["code"], era2026::kHeaderMismatch);
  std::tie(status, body) = Answer(PostEdited(call, [](auto& h) { Drop(h, "Mcp-Name"); }));
  EXPECT_EQ(status, 400);
}

TEST_F(HttpEra2026Test, AnXMcpHeaderArgumentMustBeMirroredInItsParamHeader) {
  Json call = Request(1, "tools/call", {{"name", "routed"}, {"arguments", {{"region", "eu"}}}});
  auto [status, body] = Answer(Post(call, HeadersFor(call)));
  EXPECT_EQ(status, 400) << "the header is missing";
  EXPECT_EQ(body["error"]["code"], era2026::kHeaderMismatch);
  std::tie(status, body) =
      Answer(PostEdited(call, [](auto& h) { h.emplace("Mcp-Param-Region", "us"); }));
  EXPECT_EQ(status, 400) << "the header disagrees";
  std::tie(status, body) =
      Answer(PostEdited(call, [](auto& h) { h.emplace("Mcp-Param-Region", "eu"); }));
  EXPECT_EQ(status, 200) << body.dump();
  std::tie(status, body) =  // "eu" in base64
      Answer(PostEdited(call, [](auto& h) { h.emplace("Mcp-Param-Region", "=?base64?ZXU=?="); }));
  EXPECT_EQ(status, 200) << body.dump();
  std::tie(status, body) =
      Answer(PostEdited(call, [](auto& h) { h.emplace("Mcp-Param-Region", "=?base64?ZXU?="); }));
  EXPECT_EQ(status, 400) << "bad base64 padding";
}

TEST_F(HttpEra2026Test, ProgressMakesTheAnswerAnSseStream) {
  Json meta = Meta();
  meta["progressToken"] = "p1";
  Json call = Request(9, "tools/call", {{"name", "progress"}, {"arguments", Json::object()}}, meta);
  auto r = Post(call, HeadersFor(call));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  EXPECT_NE(r->body.find("notifications/progress"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\"resultType\":\"complete\""), std::string::npos) << r->body;
}

TEST_F(HttpEra2026Test, TodaysSessionsStillWorkOnTheSameServer) {
  Json init = {{"jsonrpc", "2.0"},
               {"id", 1},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", "2025-11-25"},
                 {"capabilities", Json::object()},
                 {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  auto r = Post(init, {});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(r->get_header_value("Mcp-Session-Id").empty());
  Json list = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}};
  auto without_session = Post(list, {{"MCP-Protocol-Version", "2025-11-25"}});
  ASSERT_TRUE(without_session);
  EXPECT_EQ(without_session->status, 400) << "today's versions still need their session";
}

}  // namespace
}  // namespace mcp::testing
