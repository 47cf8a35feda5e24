// Requests in parallel, cancellation, progress and logging notifications, server->client
// requests, the exactly-one-response guarantee, and shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using namespace std::chrono_literals;
using testing::EchoTool;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::FirstText;
using testing::TestOptions;

// A tool that blocks until released or cancelled, and records what it saw.
struct Gate {
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> saw_cancel_flag{false};
  std::atomic<bool> cancel_callback_ran{false};
};

Tool GateTool(Gate& gate) {
  Tool t = EchoTool();
  t.name = "block";
  t.handler = [&gate](const Json&, Context& ctx) {
    std::promise<void> cancelled;
    auto on_cancel = cancelled.get_future();
    ctx.OnCancel([&gate, p = std::make_shared<std::promise<void>>(std::move(cancelled))] {
      gate.cancel_callback_ran = true;
      p->set_value();
    });
    gate.started.set_value();
    while (gate.released.wait_for(1ms) != std::future_status::ready) {
      if (on_cancel.wait_for(0ms) == std::future_status::ready) {
        gate.saw_cancel_flag = ctx.cancelled();
        return ToolResult::Text("stopped");
      }
    }
    return ToolResult::Text("released");
  };
  return t;
}

TEST(Concurrency, BlockedToolCallDoesNotBlockPingOrOtherCalls) {
  Server server(TestOptions());
  Gate gate;
  ASSERT_TRUE(server.AddTool(GateTool(gate)).ok());
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  MemoryClient client(server);
  client.Initialize();
  client.SendRequest("slow", "tools/call", {{"name", "block"}, {"arguments", {{"text", ""}}}});
  gate.started.get_future().wait();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(client.Request("ping", Json::object(), 2s)["result"], Json::object());
  EXPECT_EQ(FirstText(client.Request("tools/call",
                                     {{"name", "echo"}, {"arguments", {{"text", "fast"}}}}, 2s)),
            "fast");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  gate.release.set_value();
  EXPECT_EQ(FirstText(client.WaitResponse("slow")), "released");
}

TEST(Concurrency, CancellationReachesTheHandlerAndNoResponseIsSent) {
  Server server(TestOptions());
  Gate gate;
  ASSERT_TRUE(server.AddTool(GateTool(gate)).ok());
  MemoryClient client(server);
  client.Initialize();
  client.SendRequest(42, "tools/call", {{"name", "block"}, {"arguments", {{"text", ""}}}});
  gate.started.get_future().wait();
  client.Notify("notifications/cancelled", {{"requestId", 42}, {"reason", "user hit stop"}});
  // The handler sees it...
  for (int i = 0; i < 200 && !gate.saw_cancel_flag; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(gate.cancel_callback_ran);
  EXPECT_TRUE(gate.saw_cancel_flag);
  // ...and its answer is not sent.
  EXPECT_TRUE(client.WaitResponse(42, 300ms).is_null());
  EXPECT_EQ(client.Request("ping")["result"], Json::object());
  gate.release.set_value();
  // The id is free again.
  client.SendRequest(42, "ping");
  EXPECT_EQ(client.WaitResponse(42)["result"], Json::object());
}

TEST(Concurrency, ProgressNotificationsUseTheRequestsToken) {
  Server server(TestOptions());
  Tool t = EchoTool();
  t.name = "steps";
  t.handler = [](const Json&, Context& ctx) {
    bool sent = false;
    for (int i = 1; i <= 3; ++i) sent = ctx.Progress(i, 3, "step " + std::to_string(i));
    return ToolResult::Text(sent ? "sent" : "no token");
  };
  ASSERT_TRUE(server.AddTool(t).ok());
  MemoryClient client(server);
  client.Initialize();
  Json r = client.Request(
      "tools/call",
      {{"name", "steps"}, {"arguments", {{"text", ""}}}, {"_meta", {{"progressToken", "tok-1"}}}});
  EXPECT_EQ(FirstText(r), "sent");
  auto progress = client.Notifications("notifications/progress", 3);
  ASSERT_EQ(progress.size(), 3u);
  EXPECT_EQ(progress[0]["params"]["progressToken"], "tok-1");
  EXPECT_EQ(progress[2]["params"]["progress"], 3);
  EXPECT_EQ(progress[2]["params"]["total"], 3);
  EXPECT_EQ(progress[2]["params"]["message"], "step 3");
  r = client.Request("tools/call", {{"name", "steps"}, {"arguments", {{"text", ""}}}});
  EXPECT_EQ(FirstText(r), "no token");
}

TEST(Concurrency, LogNotificationsAreFilteredByTheSessionLevel) {
  Server server(TestOptions());
  Tool t = EchoTool();
  t.name = "chatty";
  t.handler = [](const Json&, Context& ctx) {
    ctx.Log(LogLevel::kDebug, "debug detail");
    ctx.Log(LogLevel::kWarning, {{"disk", "low"}}, "storage");
    ctx.Log(LogLevel::kError, "broken");
    return ToolResult::Text("ok");
  };
  ASSERT_TRUE(server.AddTool(t).ok());
  MemoryClient client(server);
  client.Initialize();
  EXPECT_EQ(client.Request("logging/setLevel", {{"level", "warning"}})["result"], Json::object());
  client.Request("tools/call", {{"name", "chatty"}, {"arguments", {{"text", ""}}}});
  auto logs = client.Notifications("notifications/message", 2);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0]["params"],
            Json({{"level", "warning"}, {"logger", "storage"}, {"data", {{"disk", "low"}}}}));
  EXPECT_EQ(logs[1]["params"]["level"], "error");
  client.Request("logging/setLevel", {{"level", "debug"}});
  client.Request("tools/call", {{"name", "chatty"}, {"arguments", {{"text", ""}}}});
  EXPECT_EQ(client.Notifications("notifications/message", 5).size(), 5u);
}

// ---- server -> client requests ----

Tool AskTool(std::chrono::milliseconds timeout) {
  Tool t = EchoTool();
  t.name = "ask";
  t.handler = [timeout](const Json& args, Context& ctx) {
    ClientResponse r = ctx.SendRequestAndWait(
        "sampling/createMessage",
        {{"messages", Json::array()}, {"maxTokens", 10}, {"q", args["text"]}}, timeout);
    if (!r.ok()) return ToolResult::Error(std::to_string(r.error->code) + " " + r.error->message);
    return ToolResult::Text(r.result["content"]["text"]);
  };
  return t;
}

TEST(ServerToClient, RequestRoundTrip) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(AskTool(5s)).ok());
  MemoryClient client(server);
  client.SetRequestHandler([](const std::string& method, const Json& params) -> Json {
    if (method != "sampling/createMessage") throw RpcException(kMethodNotFound, method);
    if (params["q"] == "fail") throw RpcException(-1, "user declined");
    return {
        {"role", "assistant"},
        {"content", {{"type", "text"}, {"text", "answer to " + params["q"].get<std::string>()}}},
        {"model", "m"}};
  });
  client.Initialize();
  Json r = client.Request("tools/call", {{"name", "ask"}, {"arguments", {{"text", "life"}}}});
  EXPECT_EQ(FirstText(r), "answer to life");
  r = client.Request("tools/call", {{"name", "ask"}, {"arguments", {{"text", "fail"}}}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(FirstText(r), "-1 user declined");
}

TEST(ServerToClient, TimeoutFailsTheCallerAndTellsTheClient) {
  Server server(TestOptions());
  ASSERT_TRUE(server.AddTool(AskTool(100ms)).ok());
  MemoryClient client(server);
  std::atomic<int> asked{0};
  client.SetRequestHandler([&](const std::string&, const Json&) -> Json {
    ++asked;
    std::this_thread::sleep_for(400ms);  // too slow
    return Json::object();
  });
  client.Initialize();
  Json r = client.Request("tools/call", {{"name", "ask"}, {"arguments", {{"text", "x"}}}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(FirstText(r).find(std::to_string(kRequestTimeout)), std::string::npos) << FirstText(r);
  EXPECT_NE(FirstText(r).find("timed out"), std::string::npos);
  EXPECT_EQ(asked.load(), 1);
  auto cancels = client.Notifications("notifications/cancelled", 1);
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_TRUE(cancels[0]["params"]["requestId"].is_number_integer());
  // The late answer arrives after the timeout and is ignored without harm.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(client.Request("ping")["result"], Json::object());
}

TEST(ServerToClient, SessionLevelRequestWithCallback) {
  Server server(TestOptions());
  MemoryClient client(server);
  client.SetRequestHandler([](const std::string& method, const Json&) -> Json {
    if (method == "roots/list") return {{"roots", {{{"uri", "file:///w"}}}}};
    throw RpcException(kMethodNotFound, "no");
  });
  client.Initialize();
  std::promise<ClientResponse> got;
  client.session()->SendRequest("roots/list", Json::object(),
                                [&](ClientResponse r) { got.set_value(std::move(r)); });
  ClientResponse r = got.get_future().get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.result["roots"][0]["uri"], "file:///w");
  std::promise<ClientResponse> err;
  client.session()->SendRequest("elicitation/create", Json::object(),
                                [&](ClientResponse x) { err.set_value(std::move(x)); });
  EXPECT_EQ(err.get_future().get().error->code, kMethodNotFound);
}

// A client's answer too big to read fails the server's request at once with the reason
// (its id is read from the text), and the client gets no error for it: the id is the
// server's, and an error under it would fail a request of the client's with the same id.
TEST(ServerToClient, OversizedResponseFailsTheRequestAndIsNotAnswered) {
  ServerOptions o = TestOptions();
  o.max_message_bytes = 1000;
  Server server(o);
  MemoryClient client(server);
  client.SetRequestHandler([](const std::string& method, const Json&) -> Json {
    if (method == "roots/list")
      return {{"roots", {{{"uri", "file:///" + std::string(5000, 'w')}}}}};
    throw RpcException(kMethodNotFound, "no");
  });
  client.Initialize();
  std::promise<ClientResponse> got;
  client.session()->SendRequest("roots/list", Json::object(),
                                [&](ClientResponse r) { got.set_value(std::move(r)); });
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready) << "the request waited on";
  ClientResponse r = future.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find("the client's response could not be read"), std::string::npos)
      << r.error->message;
  EXPECT_NE(r.error->message.find("1000 bytes"), std::string::npos) << r.error->message;
  EXPECT_EQ(client.Request("ping")["result"], Json::object());
  EXPECT_TRUE(client.Unmatched(0, 0ms).empty());
}

// ---- exactly one response ----

TEST(ReplyOnce, ThrowingDroppingAndDoubleReplyingHandlersGetExactlyOneResponse) {
  Server server(TestOptions());
  ASSERT_TRUE(server
                  .AddRequestHandler("x/throws", [](const Json&, Context,
                                                    Reply) { throw std::runtime_error("boom"); })
                  .ok());
  ASSERT_TRUE(server.AddRequestHandler("x/drops", [](const Json&, Context, Reply) {}).ok());
  ASSERT_TRUE(server
                  .AddRequestHandler("x/twice",
                                     [](const Json&, Context, Reply reply) {
                                       reply.Ok({{"n", 1}});
                                       reply.Ok({{"n", 2}});
                                       reply.Fail(kInternalError, "late");
                                     })
                  .ok());
  ASSERT_TRUE(server
                  .AddRequestHandler("x/later",
                                     [](const Json& params, Context, Reply reply) {
                                       std::thread([p = params, r = std::move(reply)]() mutable {
                                         std::this_thread::sleep_for(20ms);
                                         r.Ok(p);
                                       }).detach();
                                     })
                  .ok());
  ASSERT_TRUE(server
                  .AddRequestHandler("x/rpc_error",
                                     [](const Json&, Context, Reply) {
                                       throw RpcException(kInvalidParams, "bad x");
                                     })
                  .ok());
  EXPECT_FALSE(server.AddRequestHandler("tools/call", [](const Json&, Context, Reply) {}).ok());
  EXPECT_FALSE(server.AddRequestHandler("x/drops", [](const Json&, Context, Reply) {}).ok());
  MemoryClient client(server);
  client.Initialize();

  Json r = client.Request("x/throws");
  EXPECT_EQ(ErrorCode(r), kInternalError);
  r = client.Request("x/drops");
  EXPECT_EQ(ErrorCode(r), kInternalError);
  EXPECT_NE(ErrorMessage(r).find("without replying"), std::string::npos);
  r = client.Request("x/twice");
  EXPECT_EQ(r["result"]["n"], 1);
  r = client.Request("x/later", {{"v", 7}});
  EXPECT_EQ(r["result"]["v"], 7);
  r = client.Request("x/rpc_error");
  EXPECT_EQ(ErrorCode(r), kInvalidParams);  // the exception's own error, not a bare -32603
  EXPECT_EQ(ErrorMessage(r), "bad x");
  r = client.Request("x/throws");
  EXPECT_NE(ErrorMessage(r).find("boom"), std::string::npos);
  client.Request("ping");

  // Count responses per id: exactly one each.
  std::map<std::string, int> per_id;
  for (const auto& m : client.Received()) {
    if (m.contains("id") && !m.contains("method")) ++per_id[m["id"].dump()];
  }
  for (const auto& [id, n] : per_id) EXPECT_EQ(n, 1) << "id " << id;
}

TEST(ReplyOnce, DestroyedReplySendsInternalError) {
  std::vector<Json> sent;
  {
    Reply reply(5, "m", [&](Json r) { sent.push_back(std::move(r)); });
    Reply moved = std::move(reply);
    EXPECT_FALSE(moved.replied());
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["id"], 5);
  EXPECT_EQ(sent[0]["error"]["code"], kInternalError);
  sent.clear();
  {
    Reply reply(6, "m", [&](Json r) { sent.push_back(std::move(r)); });
    reply.Ok(Json::object());
    reply.Fail(kInternalError, "again");
    EXPECT_TRUE(reply.replied());
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["result"], Json::object());
}

// ---- shutdown ----

TEST(Shutdown, ClosingTheSessionCancelsInFlightWorkAndWaitsForHandlers) {
  Server server(TestOptions());
  Gate gate;
  ASSERT_TRUE(server.AddTool(GateTool(gate)).ok());
  MemoryClient client(server);
  client.Initialize();
  client.SendRequest(1000, "tools/call", {{"name", "block"}, {"arguments", {{"text", ""}}}});
  gate.started.get_future().wait();
  auto session = client.session();
  session->Close();  // returns only after the handler returned
  EXPECT_TRUE(gate.cancel_callback_ran);
  EXPECT_TRUE(gate.saw_cancel_flag);
  EXPECT_TRUE(session->closed());
  EXPECT_TRUE(client.WaitResponse(1000, 100ms).is_null());
  EXPECT_TRUE(server.Sessions().empty());
}

TEST(Shutdown, ClientDisconnectCancelsAndServerShutdownWaits) {
  Gate gate;
  {
    Server server(TestOptions());
    ASSERT_TRUE(server.AddTool(GateTool(gate)).ok());
    auto client = std::make_unique<MemoryClient>(server);
    client->Initialize();
    client->SendRequest(1, "tools/call", {{"name", "block"}, {"arguments", {{"text", ""}}}});
    gate.started.get_future().wait();
    auto session = client->session();
    client->Close();
    EXPECT_TRUE(session->WaitFor(5s));
    EXPECT_TRUE(gate.saw_cancel_flag);
    client.reset();
    server.Shutdown();
    server.Shutdown();  // idempotent
  }
}

// A tool whose calls block until the turnstile opens; counts how many run at once.
struct Turnstile {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, peak = 0, started = 0;
  bool open = false;
  bool WaitStarted(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return started >= n; });
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

Tool HoldTool(Turnstile& t) {
  Tool tool = EchoTool();
  tool.name = "hold";
  tool.handler = [&t](const Json& args, Context&) {
    std::unique_lock lock(t.mu);
    ++t.started;
    t.peak = std::max(t.peak, ++t.running);
    t.cv.notify_all();
    t.cv.wait(lock, [&] { return t.open; });
    --t.running;
    return ToolResult::Text(args["text"]);
  };
  return tool;
}

Json HoldCall(int i) { return {{"name", "hold"}, {"arguments", {{"text", std::to_string(i)}}}}; }
Json EchoCall(const std::string& text) {
  return {{"name", "echo"}, {"arguments", {{"text", text}}}};
}

// One session's calls beyond max_session_tasks wait in its own queue without holding a
// thread, so another session is served at once; they all run once earlier ones finish.
TEST(Concurrency, OneSessionsCallsBeyondItsShareWaitWithoutHoldingThreads) {
  ServerOptions o = TestOptions();
  o.worker_threads = 2;
  o.max_worker_threads = 8;
  o.max_session_tasks = 3;
  Server server(o);
  Turnstile t;
  ASSERT_TRUE(server.AddTool(HoldTool(t)).ok());
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  MemoryClient a(server), b(server);
  a.Initialize();
  b.Initialize();
  for (int i = 0; i < 10; ++i) a.SendRequest("a" + std::to_string(i), "tools/call", HoldCall(i));
  ASSERT_TRUE(t.WaitStarted(3));
  std::this_thread::sleep_for(100ms);  // a fourth would have started by now
  {
    std::lock_guard lock(t.mu);
    EXPECT_EQ(t.started, 3);
  }
  // Pings are answered on the reader thread, not the pool: still quick.
  EXPECT_EQ(a.Request("ping", Json::object(), 2s)["result"], Json::object());
  EXPECT_EQ(FirstText(b.Request("tools/call", EchoCall("b"), 2s)), "b");
  t.Open();
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(FirstText(a.WaitResponse("a" + std::to_string(i))), std::to_string(i));
  EXPECT_EQ(t.peak, 3);
}

// Blocked calls hold their threads; the pool grows past worker_threads instead of making
// the next call (of any session) wait for one of them.
TEST(Concurrency, ThePoolGrowsWhenEveryThreadIsHeldByABlockedCall) {
  ServerOptions o = TestOptions();
  o.worker_threads = 2;
  o.max_worker_threads = 16;
  o.max_session_tasks = 0;  // no per-session limit: only the pool's growth helps here
  Server server(o);
  Turnstile t;
  ASSERT_TRUE(server.AddTool(HoldTool(t)).ok());
  ASSERT_TRUE(server.AddTool(EchoTool()).ok());
  MemoryClient a(server), b(server);
  a.Initialize();
  b.Initialize();
  for (int i = 0; i < 6; ++i) a.SendRequest("a" + std::to_string(i), "tools/call", HoldCall(i));
  EXPECT_TRUE(t.WaitStarted(6));  // six at once on a pool that started with two threads
  EXPECT_EQ(FirstText(b.Request("tools/call", EchoCall("b"), 2s)), "b");
  EXPECT_EQ(FirstText(a.Request("tools/call", EchoCall("a"), 2s)), "a");
  t.Open();
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(FirstText(a.WaitResponse("a" + std::to_string(i))), std::to_string(i));
}

// A session closed with calls still waiting for its share: they never start, and the
// session closes cleanly (no hang, nothing leaked: the ASan pass checks).
TEST(Concurrency, CallsWaitingForTheSessionsShareNeverStartOnceItIsClosed) {
  ServerOptions o = TestOptions();
  o.max_session_tasks = 1;
  Server server(o);
  Turnstile t;
  ASSERT_TRUE(server.AddTool(HoldTool(t)).ok());
  MemoryClient a(server);
  a.Initialize();
  for (int i = 0; i < 5; ++i) a.SendRequest(i, "tools/call", HoldCall(i));
  ASSERT_TRUE(t.WaitStarted(1));
  auto sessions = server.Sessions();
  ASSERT_EQ(sessions.size(), 1u);
  sessions[0]->CloseAsync();
  t.Open();  // the running one ends (its answer goes nowhere)
  EXPECT_TRUE(sessions[0]->WaitFor(5s));
  std::lock_guard lock(t.mu);
  EXPECT_EQ(t.started, 1);
}

}  // namespace
}  // namespace mcp
