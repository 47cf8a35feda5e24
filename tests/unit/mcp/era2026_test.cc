// The 2026-07-28 era beside today's on one Server, through the in-memory transport (the
// stdio path): per-request _meta, server/discover, the negotiation errors, resultType and
// the caching fields, per-request log level, the missing-capability error and
// input_required rounds with a sealed requestState.
#include "mcp/era2026.h"

#include <gtest/gtest.h>

#include <atomic>

#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using testing::ErrorCode;
using testing::ErrorMessage;
using testing::TestOptions;

Json Meta(const std::string& version = "2026-07-28", Json caps = Json::object()) {
  return {{"io.modelcontextprotocol/protocolVersion", version},
          {"io.modelcontextprotocol/clientCapabilities", std::move(caps)},
          {"io.modelcontextprotocol/clientInfo", {{"name", "t"}, {"version", "1"}}}};
}

Json WithMeta(Json params, Json meta = Meta()) {
  params["_meta"] = std::move(meta);
  return params;
}

Json Call(const std::string& tool, Json args = Json::object()) {
  return {{"name", tool}, {"arguments", std::move(args)}};
}

class Era2026Test : public ::testing::Test {
 protected:
  Era2026Test() : server_(Options()) {
    EXPECT_TRUE(server_.AddTool(testing::EchoTool()));
    Tool logs;
    logs.name = "logs";
    logs.input_schema = {{"type", "object"}};
    logs.handler = [](const Json&, Context& ctx) {
      ctx.Log(LogLevel::kInfo, "an info line");
      ctx.Log(LogLevel::kError, "an error line");
      return ToolResult::Text("logged");
    };
    EXPECT_TRUE(server_.AddTool(logs));
    Tool sampler;
    sampler.name = "sampler";
    sampler.input_schema = {{"type", "object"}};
    sampler.handler = [](const Json&, Context& ctx) {
      ctx.RequireClientCapability("sampling", "sampler asks the client's LLM");
      return ToolResult::Text("sampled");
    };
    EXPECT_TRUE(server_.AddTool(sampler));
    Tool asker;
    asker.name = "asker";
    asker.input_schema = {{"type", "object"}};
    asker.handler = [](const Json&, Context& ctx) {
      if (ctx.input_responses().is_null()) {
        ctx.RequireInput({{"q", {{"method", "roots/list"}, {"params", Json::object()}}}},
                         Json{{"round", 1}});
      }
      return ToolResult::Text("state " + ctx.request_state().dump());
    };
    EXPECT_TRUE(server_.AddTool(asker));
    Tool other = asker;
    other.name = "other_asker";
    EXPECT_TRUE(server_.AddTool(other));
  }
  ServerOptions Options() {
    ServerOptions o = TestOptions();
    o.on_session_started = [this](const Session&) {
      ++started_;
      return std::string();
    };
    return o;
  }

  Server server_;
  std::atomic<int> started_{0};
};

TEST_F(Era2026Test, ARequestWithMetaIsServedWithoutInitializeAndSaysItIsComplete) {
  MemoryClient client(server_);
  Json r = client.Request("tools/call", WithMeta(Call("echo", {{"text", "hi"}})));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["resultType"], "complete");
  EXPECT_EQ(testing::FirstText(r), "hi");
  EXPECT_EQ(client.session()->protocol_version(), "2026-07-28");
  EXPECT_FALSE(client.session()->initialized());
  EXPECT_EQ(client.session()->client_info()["name"], "t");
  EXPECT_EQ(started_.load(), 0) << "on_session_started must not run for the new era";
}

TEST_F(Era2026Test, ListResultsCarryTtlAndCacheScope) {
  MemoryClient client(server_);
  Json r = client.Request("tools/list", WithMeta(Json::object()));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["ttlMs"], 0);
  EXPECT_EQ(r["result"]["cacheScope"], "private");
  EXPECT_EQ(r["result"]["resultType"], "complete");
}

TEST_F(Era2026Test, DiscoverNamesVersionsCapabilitiesAndServer) {
  MemoryClient client(server_);
  Json r = client.Request("server/discover", WithMeta(Json::object()));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["supportedVersions"], Json::array({"2026-07-28"}));
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(r["result"]["capabilities"]["tools"]["listChanged"], true)
      << "list changes reach a new-era client through subscriptions/listen";
  EXPECT_EQ(r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "test-server");
  EXPECT_EQ(r["result"]["cacheScope"], "private");
}

TEST_F(Era2026Test, MissingMetaOrItsFieldsIsInvalidParamsNamingTheField) {
  MemoryClient client(server_);
  ASSERT_EQ(ErrorCode(client.Request("server/discover", WithMeta(Json::object()))), 0);
  Json r = client.Request("tools/list", Json::object());
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  Json meta = Meta();
  meta.erase("io.modelcontextprotocol/clientCapabilities");
  r = client.Request("tools/list", WithMeta(Json::object(), meta));
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("clientCapabilities"), std::string::npos) << ErrorMessage(r);
  meta = Meta();
  meta.erase("io.modelcontextprotocol/clientInfo");  // a SHOULD: still served
  EXPECT_EQ(ErrorCode(client.Request("tools/list", WithMeta(Json::object(), meta))), 0);
}

TEST_F(Era2026Test, AnUnknownVersionIsUnsupportedWithTheSupportedList) {
  MemoryClient client(server_);
  Json r = client.Request("tools/list", WithMeta(Json::object(), Meta("1999-01-01")));
  ASSERT_EQ(ErrorCode(r), era2026::kUnsupportedProtocolVersion) << r.dump();
  EXPECT_EQ(r["error"]["data"]["supported"], Json::array({"2026-07-28"}));
  EXPECT_EQ(r["error"]["data"]["requested"], "1999-01-01");
  EXPECT_EQ(ErrorCode(client.Request("tools/list", WithMeta(Json::object()))), 0)
      << "the connection keeps serving";
}

TEST_F(Era2026Test, RemovedMethodsAndInitializeAreMethodNotFoundInTheNewEra) {
  MemoryClient client(server_);
  for (const char* method : {"ping", "logging/setLevel", "resources/subscribe"}) {
    EXPECT_EQ(ErrorCode(client.Request(method, WithMeta(Json::object()))), kMethodNotFound)
        << method;
  }
  Json init = {{"protocolVersion", "2025-11-25"},
               {"capabilities", Json::object()},
               {"clientInfo", {{"name", "t"}, {"version", "1"}}}};
  EXPECT_EQ(ErrorCode(client.Request("initialize", init)), kMethodNotFound)
      << "one connection speaks one era";
}

TEST_F(Era2026Test, TodaysEraIsUnchangedOnTheSameServer) {
  MemoryClient old_client(server_);
  MemoryClient new_client(server_);
  ASSERT_EQ(ErrorCode(old_client.Initialize("2025-11-25")), 0);
  ASSERT_EQ(ErrorCode(new_client.Request("tools/list", WithMeta(Json::object()))), 0);
  Json r = old_client.Request("tools/list");
  ASSERT_EQ(ErrorCode(r), 0);
  EXPECT_FALSE(r["result"].contains("resultType"));
  EXPECT_FALSE(r["result"].contains("ttlMs"));
  EXPECT_EQ(ErrorCode(old_client.Request("server/discover")), kMethodNotFound);
  EXPECT_EQ(old_client.session()->protocol_version(), "2025-11-25");
  EXPECT_EQ(started_.load(), 1);
}

// server/discover is how a new-era client learns whether prompts are served: without the
// capability there, their methods are not served either; today's era keeps its empty list.
TEST(Era2026Prompts, OnlyServedToTheNewEraWhenDiscoverDeclaresThem) {
  ServerOptions o = testing::TestOptions();
  o.advertise_prompts = false;
  Server server(o);
  MemoryClient fresh(server);
  Json caps = fresh.Request("server/discover", WithMeta(Json::object()))["result"]["capabilities"];
  ASSERT_FALSE(caps.contains("prompts")) << caps.dump();
  Json r = fresh.Request("prompts/list", WithMeta(Json::object()));
  EXPECT_EQ(ErrorCode(r), kMethodNotFound) << r.dump();
  EXPECT_NE(ErrorMessage(r).find("offers no prompts"), std::string::npos) << r.dump();
  EXPECT_EQ(ErrorCode(fresh.Request("prompts/get", WithMeta({{"name", "x"}}))), kMethodNotFound);
  MemoryClient old_client(server);
  ASSERT_EQ(ErrorCode(old_client.Initialize("2025-11-25")), 0);
  r = old_client.Request("prompts/list");
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_TRUE(r["result"]["prompts"].empty());

  Prompt p;
  p.name = "hello";
  p.handler = [](const std::map<std::string, std::string>&, Context&) {
    return PromptResult::UserText("hi");
  };
  ASSERT_TRUE(server.AddPrompt(p).ok());
  MemoryClient later(server);
  caps = later.Request("server/discover", WithMeta(Json::object()))["result"]["capabilities"];
  EXPECT_TRUE(caps.contains("prompts")) << caps.dump();
  r = later.Request("prompts/list", WithMeta(Json::object()));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["prompts"][0]["name"], "hello");
}

TEST_F(Era2026Test, LogMessagesOnlyWhenTheRequestAsksForALevel) {
  MemoryClient quiet(server_);
  ASSERT_EQ(ErrorCode(quiet.Request("tools/call", WithMeta(Call("logs")))), 0);
  EXPECT_TRUE(
      quiet.Notifications("notifications/message", 0, std::chrono::milliseconds(0)).empty());
  MemoryClient loud(server_);
  Json meta = Meta();
  meta["io.modelcontextprotocol/logLevel"] = "warning";
  ASSERT_EQ(ErrorCode(loud.Request("tools/call", WithMeta(Call("logs"), meta))), 0);
  auto logs = loud.Notifications("notifications/message", 1);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["params"]["level"], "error");
  meta["io.modelcontextprotocol/logLevel"] = "loud";
  EXPECT_EQ(ErrorCode(loud.Request("tools/call", WithMeta(Call("logs"), meta))), kInvalidParams);
}

TEST_F(Era2026Test, AnUndeclaredCapabilityIsRefusedWithTheCapabilityObject) {
  MemoryClient client(server_);
  Json r = client.Request("tools/call", WithMeta(Call("sampler")));
  ASSERT_EQ(ErrorCode(r), era2026::kMissingClientCapability) << r.dump();
  EXPECT_EQ(r["error"]["data"]["requiredCapabilities"], Json({{"sampling", Json::object()}}));
  r = client.Request("tools/call",
                     WithMeta(Call("sampler"), Meta("2026-07-28", {{"sampling", Json::object()}})));
  EXPECT_EQ(ErrorCode(r), 0) << r.dump();
}

TEST_F(Era2026Test, InputRequiredRoundTripsASealedStateAndRefusesATamperedOne) {
  MemoryClient client(server_);
  Json r1 = client.Request("tools/call", WithMeta(Call("asker")));
  ASSERT_EQ(ErrorCode(r1), 0) << r1.dump();
  EXPECT_EQ(r1["result"]["resultType"], "input_required");
  EXPECT_EQ(r1["result"]["inputRequests"]["q"]["method"], "roots/list");
  std::string state = r1["result"]["requestState"];
  EXPECT_EQ(state.find("round"), std::string::npos) << "the state is not plain JSON";

  Json retry = Call("asker");
  retry["inputResponses"] = {{"q", {{"roots", Json::array()}}}};
  retry["requestState"] = state;
  Json r2 = client.Request("tools/call", WithMeta(retry));
  ASSERT_EQ(ErrorCode(r2), 0) << r2.dump();
  EXPECT_EQ(r2["result"]["resultType"], "complete");
  EXPECT_EQ(testing::FirstText(r2), "state {\"round\":1}");

  Json tampered = retry;
  tampered["requestState"] = state + "-TAMPERED";
  Json r3 = client.Request("tools/call", WithMeta(tampered));
  EXPECT_EQ(ErrorCode(r3), kInvalidParams);
  EXPECT_NE(ErrorMessage(r3).find("integrity"), std::string::npos) << ErrorMessage(r3);

  Json replayed = retry;
  replayed["name"] = "other_asker";  // a state is bound to the tool it was made for
  EXPECT_EQ(ErrorCode(client.Request("tools/call", WithMeta(replayed))), kInvalidParams);

  Json bad = Call("asker");
  bad["inputResponses"] = {{"q", 12345}};
  EXPECT_EQ(ErrorCode(client.Request("tools/call", WithMeta(bad))), kInvalidParams);
}

TEST_F(Era2026Test, InputResponsesThatAnswerNothingAskedAreRefusedNamingTheKey) {
  MemoryClient client(server_);
  Json r1 = client.Request("tools/call", WithMeta(Call("asker")));
  ASSERT_EQ(r1["result"]["resultType"], "input_required") << r1.dump();
  Json extra = Call("asker");
  extra["inputResponses"] = {{"q", {{"roots", Json::array()}}}, {"z", {{"x", 1}}}};
  extra["requestState"] = r1["result"]["requestState"];
  Json r2 = client.Request("tools/call", WithMeta(extra));
  EXPECT_EQ(ErrorCode(r2), kInvalidParams) << r2.dump();
  EXPECT_NE(ErrorMessage(r2).find("inputResponses[\"z\"] answers nothing the server asked for"),
            std::string::npos)
      << ErrorMessage(r2);
  EXPECT_NE(ErrorMessage(r2).find("[\"q\"]"), std::string::npos) << "names what was asked";

  Json unasked = Call("asker");  // no round before it: nothing was asked
  unasked["inputResponses"] = {{"q", {{"roots", Json::array()}}}};
  Json r3 = client.Request("tools/call", WithMeta(unasked));
  EXPECT_EQ(ErrorCode(r3), kInvalidParams) << r3.dump();
  EXPECT_NE(ErrorMessage(r3).find("no requestState"), std::string::npos) << ErrorMessage(r3);
}

TEST_F(Era2026Test, ServerToClientRequestsFailAtOnceInTheNewEra) {
  Tool t;
  t.name = "roots";
  t.input_schema = {{"type", "object"}};
  t.handler = [](const Json&, Context& ctx) {
    ClientResponse r = ctx.SendRequestAndWait("roots/list", Json::object());
    return ToolResult::Text(r.ok() ? "sent" : r.error->message);
  };
  ASSERT_TRUE(server_.AddTool(t));
  MemoryClient client(server_);
  Json r = client.Request("tools/call", WithMeta(Call("roots")));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_NE(testing::FirstText(r).find("no server-to-client requests"), std::string::npos);
  for (const Json& m : client.Received()) EXPECT_NE(m.value("method", ""), "roots/list");
}

}  // namespace
TEST(Era2026Off, ARequestOfTheNewEraIsUnsupportedNamingTodaysVersionsAndTodaysStillWork) {
  ServerOptions o = TestOptions();
  o.serve_2026_era = false;
  Server server(o);
  ASSERT_TRUE(server.AddTool(testing::EchoTool()));
  MemoryClient client(server);
  Json r = client.Request("tools/call", WithMeta(Call("echo", {{"text", "hi"}})));
  EXPECT_EQ(ErrorCode(r), -32022) << r.dump();
  EXPECT_EQ(r["error"]["data"]["requested"], "2026-07-28");
  EXPECT_EQ(r["error"]["data"]["supported"][0], "2024-11-05");
  EXPECT_EQ(client.session()->protocol_version(), "");
  // The connection may still speak today's era.
  client.Initialize();
  Json ok = client.Request("tools/call", Call("echo", {{"text", "hi"}}));
  EXPECT_EQ(testing::FirstText(ok), "hi");
}

}  // namespace mcp
