// JSON-RPC framing and the MCP lifecycle, through the in-memory transport: every kind of
// bad input gets the right error and the connection keeps working.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <thread>

#include "mcp/jsonrpc.h"
#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using testing::ErrorCode;
using testing::ErrorMessage;
using testing::TestOptions;

// After the bad input, the connection still answers.
void ExpectStillServing(MemoryClient& client) {
  Json r = client.Request("ping");
  ASSERT_TRUE(r.is_object()) << "no answer to ping";
  EXPECT_EQ(r["result"], Json::object());
}

// The one error response (id null) that a broken message produced.
Json NextUnmatched(MemoryClient& client, size_t n) {
  auto got = client.Unmatched(n);
  EXPECT_GE(got.size(), n);
  return got.size() >= n ? got[n - 1] : Json();
}

TEST(Jsonrpc, ClassifiesMessages) {
  auto req = jsonrpc::Classify(Json::parse(R"({"jsonrpc":"2.0","id":"a","method":"m"})"));
  ASSERT_TRUE(std::holds_alternative<jsonrpc::Request>(req));
  auto note = jsonrpc::Classify(Json::parse(R"({"jsonrpc":"2.0","method":"m","params":[1]})"));
  ASSERT_TRUE(std::holds_alternative<jsonrpc::Notification>(note));
  auto resp = jsonrpc::Classify(Json::parse(R"({"jsonrpc":"2.0","id":3,"result":{}})"));
  ASSERT_TRUE(std::holds_alternative<jsonrpc::Response>(resp));
  auto err = jsonrpc::Classify(
      Json::parse(R"({"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}})"));
  ASSERT_TRUE(std::get<jsonrpc::Response>(err).error.has_value());
  for (const char* bad :
       {R"([])", R"(5)", R"({"id":1,"method":"m"})", R"({"jsonrpc":"1.0","id":1,"method":"m"})",
        R"({"jsonrpc":"2.0","id":1.5,"method":"m"})", R"({"jsonrpc":"2.0","id":null,"method":"m"})",
        R"({"jsonrpc":"2.0","id":{},"method":"m"})", R"({"jsonrpc":"2.0","id":1,"method":7})",
        R"({"jsonrpc":"2.0","id":1,"method":"m","params":"x"})", R"({"jsonrpc":"2.0","id":1})",
        R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})"}) {
    auto m = jsonrpc::Classify(Json::parse(bad));
    ASSERT_TRUE(std::holds_alternative<jsonrpc::Invalid>(m)) << bad;
    EXPECT_EQ(std::get<jsonrpc::Invalid>(m).error.code, kInvalidRequest) << bad;
  }
}

// The id of a message too big to parse, from its two ends. Each row: head, tail, the id
// expected (null: none can be read safely).
TEST(Jsonrpc, PeekMessageReadsOnlyATopLevelIdFromEitherEnd) {
  struct Row {
    std::string head, tail;
    Json id;
  };
  const std::string pad(100, 'x');
  const std::vector<Row> rows = {
      // The envelope first (Python SDK, hand-written clients): found from the start.
      {R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":")" + pad, pad, 7},
      {R"( { "id" : "req-1" , "method":")" + pad, pad, "req-1"},
      // Nested "id" members before the top-level one are stepped over.
      {R"({"params":{"id":1,"b":[{"id":2}]},"id":3,"x":")" + pad, pad, 3},
      // An id that is an object: no id, and its members are not the message's.
      {R"({"id":{"a":1,"id":2},"method":"m","p":")" + pad, pad, nullptr},
      // A key that only ends in id, and "id" inside a string value, are not the id.
      {R"({"xid":5,"s":""id":6","params":")" + pad, pad, nullptr},
      // The TypeScript SDK writes the id last: found at the end.
      {R"({"method":"tools/call","params":{"content":")" + pad,
       pad + R"("},"jsonrpc":"2.0","id":42})" + "\r", 42},
      {R"({"method":"m","params":")" + pad, pad + R"(", "id" : "a-b" } )", "a-b"},
      // At the end but nested (the last '}' closes a nested object) or not a member.
      {R"({"method":"m","params":")" + pad, pad + R"("},"p":{"id":9}})", nullptr},
      {R"({"method":"m","params":")" + pad, pad + R"(x"id":9})", nullptr},
      // Cut off: a number that may go on past the head, a line with no end.
      {R"({"id":12)", "", nullptr},
      {R"({"method":"m","params":")" + pad, pad, nullptr},
      // Not valid ids: fractions, objects, strings with escapes at the end.
      {R"({"id":1.5,"m":")" + pad, pad, nullptr},
      {R"({"id":{"a":1},"m":")" + pad, pad, nullptr},
      {R"({"m":")" + pad, pad + R"(","id":"a"b"})", nullptr},
      {"", "", nullptr},
      {"[1,2]", "[1,2]", nullptr},
  };
  for (const Row& r : rows) {
    jsonrpc::Peek peek = jsonrpc::PeekMessage(r.head, r.tail);
    EXPECT_EQ(peek.id, r.id) << r.head << " ... " << r.tail;
    EXPECT_FALSE(peek.response) << r.head;
  }
  // A text cut off (EOF in the middle of the line) has no end to read the id from.
  EXPECT_TRUE(jsonrpc::PeekMessage(R"({"method":"m","params":")" + pad, "").id.is_null());
}

// A response is recognized from its head, in either SDK's order, with its id (to fail the
// request of ours it answers; it is never answered itself).
TEST(Jsonrpc, PeekMessageRecognizesResponses) {
  const std::string pad(100, 'x');
  for (const std::string& head : {
           R"({"jsonrpc":"2.0","id":1,"result":{"content":")" + pad,
           R"({"result":{"content":")" + pad,
           R"({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":")" + pad,
       }) {
    jsonrpc::Peek peek = jsonrpc::PeekMessage(head, pad + R"("}},"jsonrpc":"2.0","id":1})");
    EXPECT_TRUE(peek.response) << head;
    EXPECT_EQ(peek.id, 1) << head;
  }
  // "result" nested in a request's params, or in an id that is an object, is not an outcome.
  EXPECT_FALSE(
      jsonrpc::PeekMessage(R"({"id":{"a":1,"result":2},"method":"m","p":")" + pad, "").response);
  jsonrpc::Peek request = jsonrpc::PeekMessage(
      R"({"method":"tools/call","params":{"result":1,"a":")" + pad, pad + R"("},"id":4})");
  EXPECT_FALSE(request.response);
  EXPECT_EQ(request.id, 4);
}

TEST(Protocol, MalformedJsonIsParseErrorWithNullIdAndConnectionSurvives) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.SendRaw(R"({"jsonrpc":"2.0","id":1,"method":)");
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kParseError);
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_NE(ErrorMessage(e).find("Parse error"), std::string::npos);
  ExpectStillServing(client);
}

TEST(Protocol, InvalidUtf8IsParseError) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.SendRaw(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}");
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kParseError);
  EXPECT_TRUE(e["id"].is_null());
  ExpectStillServing(client);
}

// A number beyond a double's range is out_of_range, not parse_error, in nlohmann: it once
// escaped the reader thread and ended the server (found by tests/fuzz/fuzz_jsonrpc).
TEST(Protocol, NumberTooLargeIsParseError) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.SendRaw(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}})");
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kParseError);
  EXPECT_TRUE(e["id"].is_null());
  ExpectStillServing(client);
}

TEST(Protocol, InvalidEnvelopesAreInvalidRequest) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  struct Case {
    const char* text;
    Json expected_id;
    const char* words;
  } cases[] = {
      {R"({"id":101,"method":"ping"})", 101, "jsonrpc"},
      {R"({"jsonrpc":"1.0","id":102,"method":"ping"})", 102, "2.0"},
      {R"({"jsonrpc":"2.0","id":true,"method":"ping"})", nullptr, "id"},
      {R"({"jsonrpc":"2.0","id":104,"method":42})", 104, "method"},
      {R"({"jsonrpc":"2.0","id":105,"method":"ping","params":3})", 105, "params"},
      {R"("just a string")", nullptr, "object"},
      {R"({"jsonrpc":"2.0","id":107})", 107, "method"},
  };
  size_t n = 0;
  for (const auto& c : cases) {
    client.SendRaw(c.text);
    Json e = NextUnmatched(client, ++n);
    EXPECT_EQ(ErrorCode(e), kInvalidRequest) << c.text;
    EXPECT_EQ(e["id"], c.expected_id) << c.text;
    EXPECT_NE(ErrorMessage(e).find(c.words), std::string::npos) << ErrorMessage(e);
  }
  ExpectStillServing(client);
}

TEST(Protocol, UnknownMethodIsMethodNotFound) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  Json r = client.Request("no/such/method");
  EXPECT_EQ(ErrorCode(r), kMethodNotFound);
  EXPECT_NE(ErrorMessage(r).find("no/such/method"), std::string::npos);
}

TEST(Protocol, ParamsOfWrongShapeAreInvalidParams) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  Json r = client.Request("tools/list", Json::array({1, 2}));
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  r = client.Request("tools/call", {{"name", 5}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  r = client.Request("logging/setLevel", {{"level", "loud"}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("loud"), std::string::npos);
}

TEST(Protocol, OversizedMessageIsRefusedNamingTheLimit) {
  ServerOptions o = TestOptions();
  o.max_message_bytes = 1000;
  Server server(o);
  MemoryClient client(server);
  client.Initialize();
  client.Request("ping");
  std::string big = R"({"jsonrpc":"2.0","id":77,"method":"ping","params":{"pad":")" +
                    std::string(5000, 'x') + "\"}}";
  // An oversized response (to a request of the server's, id 1 like the client's own
  // first request) is dropped: an error under its id would fail the client's call 1.
  client.SendRaw(R"({"jsonrpc":"2.0","id":1,"result":{"pad":")" + std::string(5000, 'x') + "\"}}");
  client.SendRaw(big);
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kInvalidRequest);
  EXPECT_EQ(e["id"], 77);  // read from the start of the text, so the caller stops waiting
  EXPECT_NE(ErrorMessage(e).find("1000 bytes"), std::string::npos) << ErrorMessage(e);
  // Without an id that can be read, the error goes out with id null.
  client.SendRaw(R"({"jsonrpc":"2.0","params":{"pad":")" + std::string(5000, 'x') + "\"}}");
  e = NextUnmatched(client, 2);
  EXPECT_EQ(ErrorCode(e), kInvalidRequest);
  EXPECT_TRUE(e["id"].is_null());
  ExpectStillServing(client);
}

TEST(Protocol, RequestsBeforeInitializeAreRefusedButPingWorks) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(testing::EchoTool()).ok());
  MemoryClient client(server);
  Json r = client.Request("tools/list");
  EXPECT_EQ(ErrorCode(r), kInvalidRequest);
  EXPECT_NE(ErrorMessage(r).find("not initialized"), std::string::npos);
  r = client.Request("ping");
  EXPECT_EQ(r["result"], Json::object());
  client.Initialize();
  r = client.Request("tools/list");
  EXPECT_EQ(r["result"]["tools"].size(), 1u);
}

TEST(Protocol, SecondInitializeIsRefused) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  Json r = client.Initialize();
  EXPECT_EQ(ErrorCode(r), kInvalidRequest);
}

TEST(Protocol, InitializeNeedsItsParams) {
  Server server(TestOptions());
  MemoryClient client(server);
  Json r = client.Request("initialize", {{"capabilities", Json::object()}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("protocolVersion"), std::string::npos);
  EXPECT_FALSE(client.session()->initialized());
}

class VersionNegotiation : public ::testing::TestWithParam<std::string> {};

TEST_P(VersionNegotiation, SupportedVersionIsEchoed) {
  Server server(TestOptions());
  MemoryClient client(server);
  Json r = client.Initialize(GetParam());
  EXPECT_EQ(r["result"]["protocolVersion"], GetParam());
  EXPECT_EQ(client.session()->protocol_version(), GetParam());
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "test-server");
  EXPECT_EQ(r["result"]["serverInfo"]["version"], "9.9.9");
}

INSTANTIATE_TEST_SUITE_P(AllVersions, VersionNegotiation,
                         ::testing::Values("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"));

TEST(Protocol, UnknownVersionGetsTheLatest) {
  Server server(TestOptions());
  MemoryClient client(server);
  Json r = client.Initialize("1999-01-01");
  EXPECT_EQ(r["result"]["protocolVersion"], kLatestProtocolVersion);
}

TEST(Protocol, CapabilitiesFollowWhatIsRegistered) {
  ServerOptions o = TestOptions();
  o.instructions = "Use the tools.";
  o.title = "Test";
  {
    Server server(o);
    MemoryClient client(server);
    Json r = client.Initialize()["result"];
    EXPECT_EQ(r["capabilities"], Json({{"logging", Json::object()}}));
    EXPECT_EQ(r["instructions"], "Use the tools.");
    EXPECT_EQ(r["serverInfo"]["title"], "Test");
  }
  Server server(o);
  ASSERT_TRUE(server.AddTool(testing::EchoTool()).ok());
  ASSERT_TRUE(
      server
          .AddPrompt({.name = "p", .handler = [](const auto&, Context&) { return PromptResult{}; }})
          .ok());
  ASSERT_TRUE(server
                  .AddResource({.uri = "mem://a",
                                .name = "a",
                                .read = [](const std::string&, const auto&,
                                           Context&) { return std::vector<ResourceContents>{}; }})
                  .ok());
  server.SetCompletionHandler(
      [](const CompletionRequest&, Context&) { return CompletionResult{}; });
  MemoryClient client(server);
  Json caps = client.Initialize()["result"]["capabilities"];
  EXPECT_EQ(caps["tools"], Json({{"listChanged", true}}));
  EXPECT_EQ(caps["prompts"], Json({{"listChanged", true}}));
  EXPECT_EQ(caps["resources"], Json({{"subscribe", true}, {"listChanged", true}}));
  EXPECT_EQ(caps["completions"], Json::object());
  EXPECT_EQ(caps["logging"], Json::object());
}

TEST(Protocol, DuplicateIdOfRequestInFlightIsRefused) {
  Server server(TestOptions());
  std::promise<void> release;
  auto released = release.get_future().share();
  Tool slow = testing::EchoTool();
  slow.name = "slow";
  slow.handler = [released](const Json& args, Context&) {
    released.wait();
    return ToolResult::Text(args["text"]);
  };
  ASSERT_TRUE(server.AddTool(slow).ok());
  MemoryClient client(server);
  client.Initialize();
  client.SendRequest("dup", "tools/call", {{"name", "slow"}, {"arguments", {{"text", "a"}}}});
  // Let the first one start, then reuse its id.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  client.SendRequest("dup", "ping");
  Json dup = client.WaitResponse("dup");
  EXPECT_EQ(ErrorCode(dup), kInvalidRequest);
  EXPECT_NE(ErrorMessage(dup).find("\"dup\""), std::string::npos) << ErrorMessage(dup);
  release.set_value();
  Json first = client.WaitResponse("dup");
  EXPECT_EQ(testing::FirstText(first), "a");
  // Finished, so the id may be used again.
  client.SendRequest("dup", "ping");
  EXPECT_EQ(client.WaitResponse("dup")["result"], Json::object());
}

TEST(Protocol, CancelOfUnknownIdIsIgnored) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.Notify("notifications/cancelled", {{"requestId", 12345}, {"reason", "nope"}});
  client.Notify("notifications/cancelled", {{"requestId", Json::object()}});
  client.Notify("notifications/cancelled", Json::array());
  ExpectStillServing(client);
  EXPECT_TRUE(client.Unmatched(0, std::chrono::milliseconds(0)).empty());
}

TEST(Protocol, NotificationsGetNoResponse) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.Notify("notifications/whatever");
  client.Notify("notifications/roots/list_changed");
  ExpectStillServing(client);
  EXPECT_TRUE(client.Unmatched(0, std::chrono::milliseconds(0)).empty());
}

TEST(Protocol, ResponsesWithUnknownIdsAreIgnored) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  client.SendJson({{"jsonrpc", "2.0"}, {"id", 999}, {"result", Json::object()}});
  client.SendJson({{"jsonrpc", "2.0"}, {"id", "zz"}, {"error", {{"code", 1}, {"message", "m"}}}});
  ExpectStillServing(client);
  EXPECT_TRUE(client.Unmatched(0, std::chrono::milliseconds(0)).empty());
}

// A response is never answered, even a malformed one: an error for an error could go
// back and forth with a peer that does the same. An error response with id null (the
// peer could not read the id of what it answers) is valid and matches nothing.
TEST(Protocol, MalformedResponsesAreDroppedNotAnswered) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  for (const char* text : {
           R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})",
           R"({"jsonrpc":"2.0","id":"r2","result":{},"error":{"code":1,"message":"x"}})",
           R"({"jsonrpc":"2.0","id":true,"result":{}})",
           R"({"jsonrpc":"2.0","result":{}})",
           R"({"jsonrpc":"1.0","id":5,"result":{}})",
           R"({"jsonrpc":"2.0","id":6,"error":"not an object"})",
       }) {
    client.SendRaw(text);
  }
  ExpectStillServing(client);
  EXPECT_TRUE(client.Unmatched(0, std::chrono::milliseconds(0)).empty());
}

// Deep nesting is refused before any recursive copy or dump of the tree (100,000 levels
// overflowed the reader thread's stack), with the request's id when it can be read, in a
// request's params, its id, and a batch alike.
TEST(Protocol, JsonNestedTooDeepIsRefusedAndTheServerGoesOn) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  auto nest = [](size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  const size_t deep = 100000;
  client.SendRaw(R"({"jsonrpc":"2.0","id":"d1","method":"ping","params":{"x":)" + nest(deep) +
                 "}}");
  client.SendRaw(R"({"jsonrpc":"2.0","id":)" + nest(deep) + R"(,"method":"ping"})");
  client.SendRaw("[" + std::string(R"({"jsonrpc":"2.0","id":"d3","method":"ping","params":{"x":)") +
                 nest(deep) + "}}]");
  // Nesting inside a string is only text.
  Json fine = client.Request("ping", {{"_meta", {{"note", nest(deep)}}}});
  EXPECT_EQ(fine["result"], Json::object()) << fine.dump().substr(0, 200);
  // At the limit it is parsed (and refused further on only for what it is).
  Json at_limit = client.Request("ping", {{"x", Json::parse(nest(jsonrpc::kMaxNestingDepth - 2))}});
  EXPECT_EQ(at_limit["result"], Json::object()) << at_limit.dump().substr(0, 200);
  auto errors = client.Unmatched(3);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0]["id"], "d1");
  EXPECT_TRUE(errors[1]["id"].is_null());
  EXPECT_TRUE(errors[2]["id"].is_null());  // a batch's ids are not read from its text
  // Deep but not valid JSON is a parse error (-32700, id null), as any invalid text.
  client.SendRaw(R"({"jsonrpc":"2.0","id":"d4","method":"ping","params":)" + nest(deep) +
                 R"(,"a":{"id":5})");
  Json invalid = NextUnmatched(client, 4);
  EXPECT_EQ(ErrorCode(invalid), kParseError);
  EXPECT_TRUE(invalid["id"].is_null());
  // A deep response is dropped, not answered.
  client.SendRaw(R"({"jsonrpc":"2.0","id":1,"result":)" + nest(deep) + "}");
  for (const Json& e : errors) {
    EXPECT_EQ(ErrorCode(e), kInvalidRequest);
    EXPECT_NE(ErrorMessage(e).find("nested deeper than 256 levels"), std::string::npos)
        << ErrorMessage(e);
  }
  ExpectStillServing(client);
  EXPECT_EQ(client.Unmatched(0, std::chrono::milliseconds(0)).size(), 4u);
}

TEST(Jsonrpc, NestedDeeperThanCountsOnlyStructureOutsideStrings) {
  EXPECT_FALSE(jsonrpc::NestedDeeperThan("[[1]]", 2));
  EXPECT_TRUE(jsonrpc::NestedDeeperThan("[[[1]]]", 2));
  EXPECT_TRUE(jsonrpc::NestedDeeperThan(R"({"a":{"b":{}}})", 2));
  EXPECT_FALSE(jsonrpc::NestedDeeperThan(R"(["[[[[", "\"[[[["])", 2));
  EXPECT_FALSE(jsonrpc::NestedDeeperThan("[][][][]", 1));
  EXPECT_FALSE(jsonrpc::NestedDeeperThan("", 0));
}

// ---- batches ----

Json PingBatch() {
  return Json::array({{{"jsonrpc", "2.0"}, {"id", "b1"}, {"method", "ping"}},
                      {{"jsonrpc", "2.0"}, {"method", "notifications/whatever"}},
                      {{"jsonrpc", "2.0"}, {"id", "b2"}, {"method", "nope"}},
                      {{"jsonrpc", "2.0"}, {"id", "b3"}}});
}

TEST(Batch, AcceptedIn20250326) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize("2025-03-26");
  client.SendJson(PingBatch());
  auto got = client.Unmatched(4);  // 3 elements matched one by one, then the array itself
  ASSERT_GE(got.size(), 4u);
  Json array = got.back();
  ASSERT_TRUE(array.is_array());
  ASSERT_EQ(array.size(), 3u);
  std::map<std::string, Json> by_id;
  for (const auto& r : array) by_id[r["id"].get<std::string>()] = r;
  EXPECT_EQ(by_id["b1"]["result"], Json::object());
  EXPECT_EQ(ErrorCode(by_id["b2"]), kMethodNotFound);
  EXPECT_EQ(ErrorCode(by_id["b3"]), kInvalidRequest);
}

TEST(Batch, NotificationsOnlyBatchGetsNoResponse) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize("2025-03-26");
  client.SendJson(Json::array({{{"jsonrpc", "2.0"}, {"method", "notifications/a"}}}));
  ExpectStillServing(client);
  EXPECT_TRUE(client.Unmatched(0, std::chrono::milliseconds(0)).empty());
}

class BatchRefused : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchRefused, InOtherVersions) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize(GetParam());
  client.SendJson(PingBatch());
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kInvalidRequest);
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_NE(ErrorMessage(e).find("batch"), std::string::npos);
  ExpectStillServing(client);
}

INSTANTIATE_TEST_SUITE_P(Versions, BatchRefused,
                         ::testing::Values("2024-11-05", "2025-06-18", "2025-11-25"));

TEST(Batch, RefusedBeforeInitialize) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.SendJson(PingBatch());
  EXPECT_EQ(ErrorCode(NextUnmatched(client, 1)), kInvalidRequest);
}

TEST(Batch, EmptyBatchIsInvalid) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize("2025-03-26");
  client.SendRaw("[]");
  Json e = NextUnmatched(client, 1);
  EXPECT_EQ(ErrorCode(e), kInvalidRequest);
  EXPECT_NE(ErrorMessage(e).find("empty batch"), std::string::npos);
}

TEST(Batch, InitializeInsideABatchIsRefused) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize("2025-03-26");
  client.SendJson(Json::array(
      {{{"jsonrpc", "2.0"}, {"id", "i"}, {"method", "initialize"}, {"params", Json::object()}}}));
  Json array = client.Unmatched(2).back();
  ASSERT_TRUE(array.is_array());
  EXPECT_EQ(ErrorCode(array[0]), kInvalidRequest);
}

}  // namespace
}  // namespace mcp
