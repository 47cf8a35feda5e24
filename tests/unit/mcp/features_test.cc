// Tools, resources, prompts and completion through the in-memory transport: registration
// checks, pagination, argument validation, errors the model can read.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using testing::EchoTool;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::FirstText;
using testing::TestOptions;

Json CallTool(MemoryClient& client, const std::string& name, Json args) {
  return client.Request("tools/call", {{"name", name}, {"arguments", std::move(args)}});
}

TEST(Tools, RegistrationChecks) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  Status dup = server.AddTool(EchoTool());
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("already registered"), std::string::npos);

  Tool bad_name = EchoTool();
  bad_name.name = "has space";
  EXPECT_NE(server.AddTool(bad_name).message().find("^[a-zA-Z0-9_-]{1,64}$"), std::string::npos);
  bad_name.name = std::string(65, 'a');
  EXPECT_FALSE(server.AddTool(bad_name).ok());
  bad_name.name = "";
  EXPECT_FALSE(server.AddTool(bad_name).ok());

  Tool no_items = EchoTool();
  no_items.name = "no_items";
  no_items.input_schema = {{"type", "object"}, {"properties", {{"xs", {{"type", "array"}}}}}};
  Status s = server.AddTool(no_items);
  EXPECT_EQ(s.message(),
            "tool \"no_items\": inputSchema.properties.xs: an array schema needs \"items\"");

  Tool union_type = EchoTool();
  union_type.name = "union_type";
  union_type.output_schema = Json::parse(R"({"type":"object","properties":{"a":{"anyOf":[]}}})");
  EXPECT_NE(server.AddTool(union_type).message().find("outputSchema"), std::string::npos);

  Tool no_handler = EchoTool();
  no_handler.name = "no_handler";
  no_handler.handler = nullptr;
  EXPECT_NE(server.AddTool(no_handler).message().find("no handler"), std::string::npos);
}

TEST(Tools, ListIsPaginatedWithOpaqueCursors) {
  ServerOptions o = TestOptions();
  o.page_size = 2;
  Server server(o);
  for (int i = 0; i < 5; ++i) {
    Tool t = EchoTool();
    t.name = "tool_" + std::to_string(i);
    t.title = "Tool " + std::to_string(i);
    t.annotations = {{"readOnlyHint", true}};
    ASSERT_TRUE(server.AddTool(t).ok());
  }
  MemoryClient client(server);
  client.Initialize();
  std::vector<std::string> names;
  Json params = Json::object();
  int pages = 0;
  for (;;) {
    Json r = client.Request("tools/list", params)["result"];
    ++pages;
    for (const auto& t : r["tools"]) names.push_back(t["name"]);
    if (!r.contains("nextCursor")) break;
    params = {{"cursor", r["nextCursor"]}};
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"tool_0", "tool_1", "tool_2", "tool_3", "tool_4"}));

  Json first = client.Request("tools/list")["result"]["tools"][0];
  EXPECT_EQ(first["title"], "Tool 0");
  EXPECT_EQ(first["description"], "Echoes its text");
  EXPECT_EQ(first["inputSchema"]["required"], Json::array({"text"}));
  EXPECT_EQ(first["annotations"]["readOnlyHint"], true);

  for (Json bad : {Json("garbage"), Json("dG9vbHM6OTk5"), Json(12)}) {  // "tools:999"
    Json r = client.Request("tools/list", {{"cursor", bad}});
    EXPECT_EQ(ErrorCode(r), kInvalidParams) << bad;
  }
  // A resources cursor is not a tools cursor.
  Json r = client.Request("resources/list", {{"cursor", "dG9vbHM6Mg=="}});  // "tools:2"
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
}

TEST(Tools, CallRunsTheHandler) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  MemoryClient client(server);
  client.Initialize();
  Json r = CallTool(client, "echo", {{"text", "hello"}});
  EXPECT_EQ(FirstText(r), "hello");
  EXPECT_FALSE(r["result"].contains("isError"));
}

TEST(Tools, UnknownToolIsAProtocolError) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  Json r = CallTool(client, "nope", Json::object());
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("nope"), std::string::npos);
}

TEST(Tools, SessionsCarryTheirTenant) {
  Server server(TestOptions());
  MemoryClient plain(server);
  MemoryClient tenant(server, 0, "alice");
  EXPECT_EQ(plain.session()->tenant(), "");
  EXPECT_EQ(tenant.session()->tenant(), "alice");
}

// The per-session filter: a session sees and calls only the tools it lets through, and a
// refused call is answered exactly like an unknown tool.
TEST(Tools, ToolFilterHidesAndRefusesPerSession) {
  ServerOptions o = TestOptions();
  std::atomic<int> calls{0};
  o.tool_filter = [&calls](const Session& session, const std::string& name) {
    ++calls;
    return session.tenant() != "restricted" || name != "echo";
  };
  Server server(o);
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  Tool other = EchoTool();
  other.name = "other";
  ASSERT_TRUE(server.AddTool(other).ok());

  MemoryClient open(server, 0, "open");
  open.Initialize();
  MemoryClient restricted(server, 0, "restricted");
  restricted.Initialize();
  auto names = [](const Json& r) {
    std::vector<std::string> out;
    for (const auto& t : r["result"]["tools"]) out.push_back(t["name"]);
    return out;
  };
  EXPECT_EQ(names(open.Request("tools/list")), (std::vector<std::string>{"echo", "other"}));
  EXPECT_EQ(names(restricted.Request("tools/list")), (std::vector<std::string>{"other"}));

  EXPECT_EQ(FirstText(CallTool(open, "echo", {{"text", "hi"}})), "hi");
  Json refused = CallTool(restricted, "echo", {{"text", "hi"}});
  Json unknown = CallTool(restricted, "nope", {{"text", "hi"}});
  EXPECT_EQ(ErrorCode(refused), kInvalidParams);
  EXPECT_EQ(ErrorMessage(refused), "Unknown tool: echo");
  EXPECT_EQ(ErrorCode(unknown), ErrorCode(refused));
  EXPECT_EQ(FirstText(CallTool(restricted, "other", {{"text", "ok"}})), "ok");
  EXPECT_GT(calls.load(), 0);
}

// The list-only hook: a tool it hides is missing from tools/list but a call by name still
// reaches its handler (unlike tool_filter, which makes it an unknown tool); it is asked
// only about tools tool_filter lets through.
TEST(Tools, ToolListedHidesFromTheListButNotFromCalls) {
  ServerOptions o = TestOptions();
  std::vector<std::string> asked;
  std::mutex asked_mu;
  o.tool_filter = [](const Session&, const std::string& name) { return name != "secret"; };
  o.tool_listed = [&](const Session& session, const std::string& name) {
    std::lock_guard lock(asked_mu);
    asked.push_back(name);
    return session.tenant() != "quiet" || name != "echo";
  };
  Server server(o);
  for (const char* name : {"echo", "other", "secret"}) {
    Tool t = EchoTool();
    t.name = name;
    ASSERT_TRUE(server.AddTool(t).ok());
  }
  auto names = [](const Json& r) {
    std::vector<std::string> out;
    for (const auto& t : r["result"]["tools"]) out.push_back(t["name"]);
    return out;
  };
  MemoryClient loud(server, 0, "loud");
  loud.Initialize();
  MemoryClient quiet(server, 0, "quiet");
  quiet.Initialize();
  EXPECT_EQ(names(loud.Request("tools/list")), (std::vector<std::string>{"echo", "other"}));
  EXPECT_EQ(names(quiet.Request("tools/list")), (std::vector<std::string>{"other"}));
  {
    std::lock_guard lock(asked_mu);
    EXPECT_EQ(std::count(asked.begin(), asked.end(), "secret"), 0);  // filtered out first
    asked.clear();
  }
  // Not listed, still called: its handler answers.
  Json hidden = CallTool(quiet, "echo", {{"text", "still here"}});
  EXPECT_FALSE(hidden.contains("error")) << hidden.dump();
  EXPECT_EQ(FirstText(hidden), "still here");
  // tool_filter still refuses as unknown, whatever tool_listed would say.
  EXPECT_EQ(ErrorMessage(CallTool(quiet, "secret", {{"text", "x"}})), "Unknown tool: secret");
  std::lock_guard lock(asked_mu);
  EXPECT_TRUE(asked.empty()) << "tools/call consulted tool_listed";
}

TEST(Lifecycle, SessionInstructionsOverrideTheServersPerSession) {
  ServerOptions o = TestOptions();
  o.instructions = "for everyone";
  Server plain_server(o);
  MemoryClient a(plain_server, 0, "alice");
  EXPECT_EQ(a.Initialize()["result"]["instructions"], "for everyone");

  o.session_instructions = [](const Session& s) {
    return s.tenant().empty() ? std::string() : "for " + s.tenant();
  };
  Server server(o);
  MemoryClient alice(server, 0, "alice");
  EXPECT_EQ(alice.Initialize()["result"]["instructions"], "for alice");
  MemoryClient nobody(server);
  EXPECT_FALSE(nobody.Initialize()["result"].contains("instructions"));  // empty: none
}

TEST(Tools, InvalidArgumentsAreAToolErrorNamingTheField) {
  Server server(TestOptions());
  std::atomic<int> calls{0};
  Tool t;
  t.name = "run";
  t.input_schema = Json::parse(R"({"type":"object","properties":{
      "code":{"type":"string"},"timeout_s":{"type":"integer"}},
      "required":["code"],"additionalProperties":false})");
  t.handler = [&](const Json&, Context&) {
    ++calls;
    return ToolResult::Text("ran");
  };
  ASSERT_TRUE(server.AddTool(t).ok());
  MemoryClient client(server);
  client.Initialize();

  Json r = CallTool(client, "run", {{"code", "x"}, {"timeout_s", "x"}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(FirstText(r).find("arguments.timeout_s: expected integer, got string \"x\""),
            std::string::npos)
      << FirstText(r);
  r = CallTool(client, "run", {{"code", "x"}, {"bogus", 1}});
  EXPECT_NE(FirstText(r).find("arguments.bogus: unknown field"), std::string::npos);
  r = CallTool(client, "run", Json::object());
  EXPECT_NE(FirstText(r).find("arguments.code: is required"), std::string::npos);
  r = client.Request("tools/call", {{"name", "run"}, {"arguments", "text"}});
  EXPECT_NE(FirstText(r).find("arguments: expected object, got string"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
  r = client.Request("tools/call", {{"name", "run"}, {"arguments", {{"code", "x"}}}});
  EXPECT_EQ(FirstText(r), "ran");
  EXPECT_EQ(calls.load(), 1);
}

TEST(Tools, HandlerThatThrowsBecomesAnErrorResult) {
  Server server(TestOptions());
  Tool t = EchoTool();
  t.handler = [](const Json&, Context&) -> ToolResult { throw std::runtime_error("disk on fire"); };
  ASSERT_TRUE(server.AddTool(t).ok());
  Tool rpc = EchoTool();
  rpc.name = "rpc";
  rpc.handler = [](const Json&, Context&) -> ToolResult {
    throw RpcException(kInvalidParams, "specific");
  };
  ASSERT_TRUE(server.AddTool(rpc).ok());
  MemoryClient client(server);
  client.Initialize();
  Json r = CallTool(client, "echo", {{"text", "a"}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(FirstText(r).find("disk on fire"), std::string::npos);
  r = CallTool(client, "rpc", {{"text", "a"}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_EQ(ErrorMessage(r), "specific");
}

TEST(Tools, StructuredContentIsCheckedAgainstOutputSchema) {
  ServerOptions o = TestOptions();
  o.validate_tool_output = true;
  Server server(o);
  Tool t = EchoTool();
  t.name = "stats";
  t.output_schema = Json::parse(
      R"({"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]})");
  t.handler = [](const Json& args, Context&) {
    if (args["text"] == "good") return ToolResult::Structured({{"count", 3}});
    if (args["text"] == "none") return ToolResult::Text("no structure");
    return ToolResult::Structured({{"count", "three"}});
  };
  ASSERT_TRUE(server.AddTool(t).ok());

  EXPECT_TRUE(server.ValidateToolOutput("stats", {{"count", 1}}).empty());
  auto errors = server.ValidateToolOutput("stats", {{"count", "x"}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "structuredContent.count: expected integer, got string \"x\"");
  EXPECT_FALSE(server.ValidateToolOutput("missing", {}).empty());

  MemoryClient client(server);
  client.Initialize();
  Json r = CallTool(client, "stats", {{"text", "good"}});
  EXPECT_EQ(r["result"]["structuredContent"]["count"], 3);
  EXPECT_EQ(FirstText(r), R"({"count":3})");
  r = CallTool(client, "stats", {{"text", "bad"}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(FirstText(r).find("structuredContent.count"), std::string::npos);
  r = CallTool(client, "stats", {{"text", "none"}});
  EXPECT_EQ(r["result"]["isError"], true);
}

TEST(Tools, ChangesNotifyInitializedSessions) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.Initialize();
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  EXPECT_EQ(client.Notifications("notifications/tools/list_changed", 1).size(), 1u);
  EXPECT_TRUE(server.RemoveTool("echo"));
  EXPECT_EQ(client.Notifications("notifications/tools/list_changed", 2).size(), 2u);
  EXPECT_EQ(client.Request("tools/list")["result"]["tools"], Json::array());
}

// ---- resources ----

ResourceReader TextReader(std::string text) {
  return [text](const std::string& uri, const std::map<std::string, std::string>& vars, Context&) {
    std::string body = text;
    for (const auto& [k, v] : vars) body += " " + k + "=" + v;
    return std::vector<ResourceContents>{{uri, "text/plain", body, std::nullopt}};
  };
}

TEST(Resources, SessionResourcesFollowTheRegisteredOnesAcrossPages) {
  ServerOptions o = TestOptions();
  o.page_size = 2;
  std::vector<std::string> seen_cursors;
  // Five per-session files, two to a page at most; the hook's cursor is the next index.
  o.session_resources = [&](Context& ctx, const std::string& cursor, size_t limit) {
    seen_cursors.push_back(cursor);
    size_t start = cursor.empty() ? 0 : std::stoul(cursor);
    ServerOptions::SessionResourcePage page;
    for (size_t i = start; i < 5 && page.resources.size() < limit; ++i)
      page.resources.push_back({.uri = "cell:///f" + std::to_string(i) + "?" + ctx.session().id(),
                                .name = "f" + std::to_string(i)});
    size_t next = start + page.resources.size();
    if (next < 5) page.next_cursor = std::to_string(next);
    return page;
  };
  Server server(o);
  for (int i = 0; i < 3; ++i) {
    std::string n = std::to_string(i);
    ASSERT_TRUE(
        server.AddResource({.uri = "mem://doc/" + n, .name = "doc" + n, .read = TextReader("")})
            .ok());
  }
  MemoryClient client(server);
  client.Initialize();
  std::vector<std::string> names;
  Json cursor;
  for (int pages = 0; pages < 10; ++pages) {
    Json params = cursor.is_null() ? Json::object() : Json{{"cursor", cursor}};
    Json page = client.Request("resources/list", params)["result"];
    ASSERT_LE(page["resources"].size(), 2u);
    for (const auto& r : page["resources"]) names.push_back(r["name"]);
    if (!page.contains("nextCursor")) break;
    cursor = page["nextCursor"];
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"doc0", "doc1", "doc2", "f0", "f1", "f2", "f3", "f4"}));
  // The hook was first asked with one slot left (beside doc2), then with its own cursors.
  EXPECT_EQ(seen_cursors, (std::vector<std::string>{"", "1", "3"}));
  // A cursor the list did not make is still refused.
  Json bad = client.Request("resources/list", {{"cursor", "bm9wZQ=="}});  // "nope"
  EXPECT_EQ(ErrorCode(bad), kInvalidParams);
}

TEST(Resources, ListReadTemplatesAndNotFound) {
  ServerOptions o = TestOptions();
  o.page_size = 2;
  Server server(o);
  for (int i = 0; i < 3; ++i) {
    std::string n = std::to_string(i);
    ASSERT_TRUE(server
                    .AddResource({.uri = "mem://doc/" + n,
                                  .name = "doc" + n,
                                  .mime_type = "text/plain",
                                  .read = TextReader("doc " + n)})
                    .ok());
  }
  EXPECT_FALSE(
      server.AddResource({.uri = "mem://doc/0", .name = "x", .read = TextReader("")}).ok());
  ASSERT_TRUE(server
                  .AddResourceTemplate({.uri_template = "mem://logs/{name}/{+rest}",
                                        .name = "logs",
                                        .read = TextReader("log")})
                  .ok());
  MemoryClient client(server);
  client.Initialize();

  Json page1 = client.Request("resources/list")["result"];
  ASSERT_EQ(page1["resources"].size(), 2u);
  EXPECT_EQ(page1["resources"][0]["mimeType"], "text/plain");
  Json page2 = client.Request("resources/list", {{"cursor", page1["nextCursor"]}})["result"];
  EXPECT_EQ(page2["resources"].size(), 1u);
  EXPECT_FALSE(page2.contains("nextCursor"));

  Json r = client.Request("resources/read", {{"uri", "mem://doc/1"}})["result"];
  EXPECT_EQ(r["contents"][0]["text"], "doc 1");
  EXPECT_EQ(r["contents"][0]["uri"], "mem://doc/1");

  Json t = client.Request("resources/templates/list")["result"];
  EXPECT_EQ(t["resourceTemplates"][0]["uriTemplate"], "mem://logs/{name}/{+rest}");
  r = client.Request("resources/read", {{"uri", "mem://logs/web/a/b.txt"}})["result"];
  EXPECT_EQ(r["contents"][0]["text"], "log name=web rest=a/b.txt");

  r = client.Request("resources/read", {{"uri", "mem://nope"}});
  EXPECT_EQ(ErrorCode(r), kResourceNotFound);
  EXPECT_EQ(r["error"]["data"]["uri"], "mem://nope");
  EXPECT_EQ(ErrorCode(client.Request("resources/read", Json::object())), kInvalidParams);
}

TEST(Resources, SubscribersGetUpdates) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddResource({.uri = "mem://a", .name = "a", .read = TextReader("a")}).ok());
  MemoryClient subscriber(server);
  MemoryClient other(server);
  subscriber.Initialize();
  other.Initialize();
  EXPECT_EQ(subscriber.Request("resources/subscribe", {{"uri", "mem://a"}})["result"],
            Json::object());
  server.NotifyResourceUpdated("mem://a");
  auto updates = subscriber.Notifications("notifications/resources/updated", 1);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0]["params"]["uri"], "mem://a");
  EXPECT_TRUE(other.Notifications("notifications/resources/updated", 0).empty());

  subscriber.Request("resources/unsubscribe", {{"uri", "mem://a"}});
  server.NotifyResourceUpdated("mem://a");
  other.Request("ping");
  subscriber.Request("ping");
  EXPECT_EQ(subscriber.Notifications("notifications/resources/updated", 0).size(), 1u);
}

// ---- prompts ----

TEST(Prompts, ListAndGetWithArgumentChecks) {
  Server server(TestOptions());
  Prompt p;
  p.name = "review";
  p.description = "Review code";
  p.arguments = {{.name = "code", .required = true}, {.name = "style"}};
  p.handler = [](const std::map<std::string, std::string>& args, Context&) {
    PromptResult r = PromptResult::UserText("Review: " + args.at("code"));
    r.description = args.count("style") ? args.at("style") : "default";
    return r;
  };
  ASSERT_TRUE(server.AddPrompt(p).ok());
  EXPECT_FALSE(server.AddPrompt(p).ok());
  MemoryClient client(server);
  client.Initialize();

  Json list = client.Request("prompts/list")["result"]["prompts"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["arguments"][0], Json({{"name", "code"}, {"required", true}}));

  Json r = client.Request("prompts/get", {{"name", "review"}, {"arguments", {{"code", "x=1"}}}});
  EXPECT_EQ(r["result"]["messages"][0]["content"]["text"], "Review: x=1");
  EXPECT_EQ(r["result"]["description"], "default");

  r = client.Request("prompts/get", {{"name", "review"}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("\"code\""), std::string::npos);
  r = client.Request("prompts/get",
                     {{"name", "review"}, {"arguments", {{"code", "x"}, {"colour", "red"}}}});
  EXPECT_NE(ErrorMessage(r).find("\"colour\""), std::string::npos);
  r = client.Request("prompts/get", {{"name", "review"}, {"arguments", {{"code", 5}}}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  r = client.Request("prompts/get", {{"name", "nope"}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
}

// ---- completion ----

TEST(Completion, HandlerAnswersAndIsCappedAt100) {
  Server server(TestOptions());
  MemoryClient before(server);
  before.Initialize();
  EXPECT_EQ(ErrorCode(before.Request("completion/complete",
                                     {{"ref", {{"type", "ref/prompt"}, {"name", "p"}}},
                                      {"argument", {{"name", "a"}, {"value", ""}}}})),
            kMethodNotFound);

  server.SetCompletionHandler([](const CompletionRequest& req, Context&) {
    CompletionResult r;
    if (req.argument_name == "many") {
      for (int i = 0; i < 150; ++i) r.values.push_back(std::to_string(i));
      r.total = 150;
    } else {
      for (std::string v : {"python", "perl", "bash"}) {
        if (v.rfind(req.argument_value, 0) == 0) r.values.push_back(v);
      }
    }
    return r;
  });
  MemoryClient client(server);
  client.Initialize();
  Json ref = {{"type", "ref/prompt"}, {"name", "p"}};
  Json r = client.Request("completion/complete",
                          {{"ref", ref}, {"argument", {{"name", "lang"}, {"value", "p"}}}});
  EXPECT_EQ(r["result"]["completion"]["values"], Json::array({"python", "perl"}));
  EXPECT_EQ(r["result"]["completion"]["hasMore"], false);
  r = client.Request("completion/complete",
                     {{"ref", ref}, {"argument", {{"name", "many"}, {"value", ""}}}});
  EXPECT_EQ(r["result"]["completion"]["values"].size(), 100u);
  EXPECT_EQ(r["result"]["completion"]["total"], 150);
  EXPECT_EQ(r["result"]["completion"]["hasMore"], true);
  r = client.Request("completion/complete", {{"ref", {{"type", "ref/other"}}},
                                             {"argument", {{"name", "a"}, {"value", ""}}}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
}

// ---- sessions ----

TEST(Sessions, OneServerManySessionsWithTheirOwnState) {
  Server server(TestOptions());
  MemoryClient a(server);
  MemoryClient b(server);
  a.Initialize("2024-11-05");
  EXPECT_EQ(ErrorCode(b.Request("tools/list")), kInvalidRequest);  // b is not initialized
  b.Initialize("2025-06-18");
  EXPECT_EQ(a.session()->protocol_version(), "2024-11-05");
  EXPECT_EQ(b.session()->protocol_version(), "2025-06-18");
  EXPECT_NE(a.session()->id(), b.session()->id());
  a.Request("logging/setLevel", {{"level", "error"}});
  EXPECT_EQ(a.session()->log_level(), LogLevel::kError);
  EXPECT_EQ(b.session()->log_level(), LogLevel::kInfo);
  EXPECT_EQ(server.Sessions().size(), 2u);
  EXPECT_EQ(a.session()->client_info()["name"], "memory-client");
}

// A log line for one client outside any request: find its session by id, Log to it; the
// client's level applies, and a closed session is no longer found.
TEST(Sessions, FindSessionByIdAndLogOutsideARequest) {
  Server server(TestOptions());
  MemoryClient a(server);
  MemoryClient b(server);
  a.Initialize();
  b.Initialize();
  a.Request("logging/setLevel", {{"level", "warning"}});
  const std::string id = a.session()->id();
  std::shared_ptr<Session> found = server.FindSession(id);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found.get(), a.session().get());
  EXPECT_EQ(server.FindSession("no-such-session"), nullptr);
  found->Log(LogLevel::kInfo, "below the level", "mcpcell");
  found->Log(LogLevel::kWarning, {{"event", "test"}, {"message", "for a"}}, "mcpcell");
  auto logs = a.Notifications("notifications/message", 1);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["params"], Json({{"level", "warning"},
                                     {"logger", "mcpcell"},
                                     {"data", {{"event", "test"}, {"message", "for a"}}}}));
  EXPECT_TRUE(b.Notifications("notifications/message").empty());
  found.reset();
  a.session()->Close();
  EXPECT_EQ(server.FindSession(id), nullptr);
}

}  // namespace
}  // namespace mcp
