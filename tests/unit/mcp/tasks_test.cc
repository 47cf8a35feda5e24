// The Tasks extension (mcp/tasks.h) through the in-memory transport: when a call becomes a
// task, tasks/get before and after its end, TTL expiry, tasks/update reaching the handler,
// tasks/cancel reaching it as a cancellation, tenants kept apart, the per-tenant cap, and
// what clients that did not declare the extension (or speak today's era) see.
#include "mcp/tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "mcp/session.h"
#include "mcp/session_impl.h"
#include "test_util.h"

namespace mcp {
namespace {

using std::chrono::milliseconds;
using testing::ErrorCode;
using testing::ErrorMessage;

Json Meta(bool tasks = true) {
  Json caps = Json::object();
  if (tasks) caps["extensions"][kTasksExtension] = Json::object();
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", caps},
          {"io.modelcontextprotocol/clientInfo", {{"name", "t"}, {"version", "1"}}}};
}

Json With(Json params, bool tasks = true) {
  params["_meta"] = Meta(tasks);
  return params;
}

Json Call(const std::string& tool, Json args = Json::object(), bool tasks = true) {
  return With({{"name", tool}, {"arguments", std::move(args)}}, tasks);
}

Json TaskParams(const Json& id, bool tasks = true) { return With({{"taskId", id}}, tasks); }

// A latch the test opens to let the `gated` tool finish.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  bool WaitOpen(const Context& ctx) {
    std::unique_lock lock(mu);
    while (!open && !ctx.cancelled()) cv.wait_for(lock, milliseconds(5));
    return open;
  }
};

class TasksTest : public ::testing::Test {
 protected:
  explicit TasksTest(size_t cap = 8, milliseconds ttl = milliseconds(60'000))
      : server_(Options(cap, ttl)) {
    Add("gated", TaskSupport::kOptional, [this](const Json&, Context& ctx) {
      ctx.Progress(1, 2, "half way");
      if (!gate_.WaitOpen(ctx)) {
        saw_cancel_ = true;
        return ToolResult::Error("cancelled");
      }
      return ToolResult::Text("gated done");
    });
    Add("quick", TaskSupport::kOptional,
        [](const Json&, Context&) { return ToolResult::Text("quick done"); });
    Add("always_task", TaskSupport::kRequired,
        [](const Json&, Context&) { return ToolResult::Text("a task anyway"); });
    Add("fed", TaskSupport::kOptional, [](const Json&, Context& ctx) {
      auto got = std::make_shared<std::pair<std::mutex, std::string>>();
      auto cv = std::make_shared<std::condition_variable>();
      ctx.OnTaskInput([got, cv](const Json& responses) {
        std::lock_guard lock(got->first);
        got->second += responses.value("stdin", Json::object()).value("text", "");
        cv->notify_all();
      });
      std::unique_lock lock(got->first);
      cv->wait_for(lock, milliseconds(2000), [&] { return !got->second.empty(); });
      return ToolResult::Text("fed " + got->second);
    });
    Add("asks", TaskSupport::kOptional, [](const Json&, Context& ctx) {
      Json q = {{"method", "elicitation/create"}, {"params", {{"message", "?"}}}};
      Json answers = ctx.AwaitInput({{"a", q}, {"b", q}});
      return ToolResult::Text("answers " + answers.dump());
    });
  }

  static ServerOptions Options(size_t cap, milliseconds ttl) {
    ServerOptions o = testing::TestOptions();
    o.task_threshold = milliseconds(30);
    o.task_poll_interval = milliseconds(250);
    o.task_ttl = ttl;
    o.max_tasks_per_tenant = cap;
    return o;
  }

  void Add(const std::string& name, TaskSupport support, ToolHandler handler) {
    Tool t;
    t.name = name;
    t.input_schema = {{"type", "object"}};
    t.task_support = support;
    t.handler = std::move(handler);
    ASSERT_TRUE(server_.AddTool(std::move(t)));
  }

  // tasks/get until the task's status is `status` (or 2 s pass); the last response.
  static Json GetUntil(MemoryClient& client, const Json& id, const std::string& status) {
    Json r;
    for (int i = 0; i < 400; ++i) {
      r = client.Request("tasks/get", TaskParams(id));
      if (ErrorCode(r) != 0 || r["result"]["status"] == status) return r;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return r;
  }

  Gate gate_;
  std::atomic<bool> saw_cancel_{false};
  Server server_;
};

TEST_F(TasksTest, ACallThatEndsWithinTheThresholdAnswersAtOnceWithoutATask) {
  MemoryClient client(server_);
  Json r = client.Request("tools/call", Call("quick"));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["resultType"], "complete");
  EXPECT_FALSE(r["result"].contains("taskId"));
  EXPECT_EQ(testing::FirstText(r), "quick done");
}

TEST_F(TasksTest, ACallThatOutlivesTheThresholdIsATaskWhoseResultTasksGetReturnsAtTheEnd) {
  MemoryClient client(server_);
  Json created = client.Request("tools/call", Call("gated"));
  ASSERT_EQ(ErrorCode(created), 0) << created.dump();
  const Json& c = created["result"];
  EXPECT_EQ(c["resultType"], "task");
  EXPECT_EQ(c["status"], "working");
  EXPECT_EQ(c["pollIntervalMs"], 250);
  EXPECT_EQ(c["ttlMs"], 60'000);
  EXPECT_FALSE(c.contains("result"));
  ASSERT_TRUE(c["taskId"].is_string());
  EXPECT_EQ(c["taskId"].get<std::string>().size(), 32u) << "128 random bits, hex";

  Json working = client.Request("tasks/get", TaskParams(c["taskId"]));
  ASSERT_EQ(ErrorCode(working), 0) << working.dump();
  EXPECT_EQ(working["result"]["status"], "working");
  EXPECT_EQ(working["result"]["resultType"], "complete");
  EXPECT_EQ(working["result"]["statusMessage"], "half way") << "progress shows on tasks/get";
  EXPECT_FALSE(working["result"].contains("result"));

  gate_.Open();
  Json done = GetUntil(client, c["taskId"], "completed");
  ASSERT_EQ(done["result"]["status"], "completed") << done.dump();
  EXPECT_EQ(done["result"]["result"]["content"][0]["text"], "gated done");
}

TEST_F(TasksTest, ARequiredTaskToolAnswersWithATaskEvenWhenItEndsAtOnce) {
  MemoryClient client(server_);
  Json created = client.Request("tools/call", Call("always_task"));
  ASSERT_EQ(created["result"]["resultType"], "task") << created.dump();
  Json done = client.Request("tasks/get", TaskParams(created["result"]["taskId"]));
  EXPECT_EQ(done["result"]["status"], "completed") << done.dump();
  EXPECT_EQ(done["result"]["result"]["content"][0]["text"], "a task anyway");
}

TEST_F(TasksTest, ClientsWithoutTheExtensionGetNoTaskAndAreRefusedTheTaskMethods) {
  MemoryClient client(server_);
  gate_.Open();  // the call then runs to its end, however long it takes
  Json r = client.Request("tools/call", Call("gated", Json::object(), /*tasks=*/false));
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_EQ(r["result"]["resultType"], "complete");
  EXPECT_EQ(testing::FirstText(r), "gated done");

  Json required = client.Request("tools/call", Call("always_task", Json::object(), false));
  EXPECT_EQ(ErrorCode(required), -32021) << required.dump();
  EXPECT_TRUE(
      required["error"]["data"]["requiredCapabilities"]["extensions"].contains(kTasksExtension));
  for (const char* method : {"tasks/get", "tasks/cancel"}) {
    Json refused = client.Request(method, TaskParams("x", /*tasks=*/false));
    EXPECT_EQ(ErrorCode(refused), -32021) << method << ": " << refused.dump();
  }
}

TEST_F(TasksTest, TodaysEraSessionsRunTaskToolsAsBeforeAndHaveNoTaskMethods) {
  MemoryClient client(server_);
  client.Initialize("2025-11-25");
  gate_.Open();
  Json r = client.Request("tools/call", {{"name", "gated"}, {"arguments", Json::object()}});
  ASSERT_EQ(ErrorCode(r), 0) << r.dump();
  EXPECT_FALSE(r["result"].contains("taskId"));
  EXPECT_EQ(testing::FirstText(r), "gated done");
  EXPECT_EQ(ErrorCode(client.Request("tasks/get", {{"taskId", "x"}})), kMethodNotFound);
}

TEST_F(TasksTest, DiscoverAdvertisesTheExtensionAndToolsListTheirTaskSupport) {
  MemoryClient client(server_);
  Json d = client.Request("server/discover", With(Json::object()));
  EXPECT_TRUE(d["result"]["capabilities"]["extensions"].contains(kTasksExtension)) << d.dump();
  Json list = client.Request("tools/list", With(Json::object()));
  std::map<std::string, Json> support;
  for (const Json& tool : list["result"]["tools"]) {
    support[tool["name"]] = tool.value("execution", Json());
  }
  EXPECT_EQ(support["always_task"], Json({{"taskSupport", "required"}}));
  EXPECT_EQ(support["gated"], Json({{"taskSupport", "optional"}}));
}

TEST_F(TasksTest, TasksUpdateDeliversInputToTheRunningHandler) {
  MemoryClient client(server_);
  Json created = client.Request("tools/call", Call("fed"));
  ASSERT_EQ(created["result"]["resultType"], "task") << created.dump();
  Json id = created["result"]["taskId"];
  Json ack = client.Request(
      "tasks/update", With({{"taskId", id}, {"inputResponses", {{"stdin", {{"text", "hi"}}}}}}));
  ASSERT_EQ(ErrorCode(ack), 0) << ack.dump();
  EXPECT_EQ(ack["result"], Json({{"resultType", "complete"}}));
  Json done = GetUntil(client, id, "completed");
  EXPECT_EQ(done["result"]["result"]["content"][0]["text"], "fed hi") << done.dump();

  Json bad = client.Request(
      "tasks/update", With({{"taskId", id}, {"inputResponses", {{"stdin", "not a result"}}}}));
  EXPECT_EQ(ErrorCode(bad), kInvalidParams);
  EXPECT_NE(ErrorMessage(bad).find("inputResponses[\"stdin\"]"), std::string::npos);
}

TEST_F(TasksTest, AwaitInputShowsPendingRequestsUntilEveryOneIsAnswered) {
  MemoryClient client(server_);
  Json created = client.Request("tools/call", Call("asks"));
  ASSERT_EQ(created["result"]["resultType"], "task") << created.dump();
  Json id = created["result"]["taskId"];
  Json waiting = GetUntil(client, id, "input_required");
  ASSERT_EQ(waiting["result"]["inputRequests"].size(), 2u) << waiting.dump();
  client.Request("tasks/update", With({{"taskId", id}, {"inputResponses", {{"a", {{"x", 1}}}}}}));
  Json partial = client.Request("tasks/get", TaskParams(id));
  EXPECT_EQ(partial["result"]["status"], "input_required");
  EXPECT_FALSE(partial["result"]["inputRequests"].contains("a"));
  EXPECT_TRUE(partial["result"]["inputRequests"].contains("b"));
  client.Request("tasks/update", With({{"taskId", id}, {"inputResponses", {{"b", {{"y", 2}}}}}}));
  Json done = GetUntil(client, id, "completed");
  EXPECT_EQ(done["result"]["result"]["content"][0]["text"],
            "answers " + Json({{"a", {{"x", 1}}}, {"b", {{"y", 2}}}}).dump());
}

TEST_F(TasksTest, TasksCancelReachesTheHandlerAsACancellation) {
  MemoryClient client(server_);
  Json id = client.Request("tools/call", Call("gated"))["result"]["taskId"];
  ASSERT_TRUE(id.is_string());
  Json ack = client.Request("tasks/cancel", TaskParams(id));
  EXPECT_EQ(ack["result"], Json({{"resultType", "complete"}})) << ack.dump();
  EXPECT_EQ(client.Request("tasks/get", TaskParams(id))["result"]["status"], "cancelled");
  for (int i = 0; i < 200 && !saw_cancel_; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_TRUE(saw_cancel_.load()) << "the handler must see ctx.cancelled()";
  Json again = client.Request("tasks/cancel", TaskParams(id));
  EXPECT_EQ(ErrorCode(again), 0) << "cancelling an ended task is acknowledged";
  EXPECT_EQ(client.Request("tasks/get", TaskParams(id))["result"]["status"], "cancelled");
}

TEST_F(TasksTest, AnotherTenantsTaskIdIsNotFoundAndATaskOutlivesItsSession) {
  Json id;
  {
    MemoryClient alice(server_, 0, "alice");
    id = alice.Request("tools/call", Call("gated"))["result"]["taskId"];
    ASSERT_TRUE(id.is_string());
  }  // alice's session closes; the task keeps running
  MemoryClient bob(server_, 0, "bob");
  Json r = bob.Request("tasks/get", TaskParams(id));
  EXPECT_EQ(ErrorCode(r), kInvalidParams) << r.dump();
  EXPECT_EQ(ErrorCode(bob.Request("tasks/cancel", TaskParams(id))), kInvalidParams);

  gate_.Open();
  MemoryClient alice_again(server_, 0, "alice");
  Json done = GetUntil(alice_again, id, "completed");
  EXPECT_EQ(done["result"]["result"]["content"][0]["text"], "gated done") << done.dump();
  EXPECT_FALSE(saw_cancel_.load());
}

TEST_F(TasksTest, UnknownOrMalformedTaskIdsAreInvalidParams) {
  MemoryClient client(server_);
  EXPECT_EQ(ErrorCode(client.Request("tasks/get", TaskParams("nope"))), kInvalidParams);
  Json r = client.Request("tasks/get", TaskParams(42));
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("taskId"), std::string::npos);
  EXPECT_EQ(ErrorCode(client.Request("tasks/list", With(Json::object()))), kMethodNotFound);
}

class TasksCapTest : public TasksTest {
 protected:
  TasksCapTest() : TasksTest(/*cap=*/1) {}
};

TEST_F(TasksCapTest, ATenantAtItsCapIsRefusedWithAnErrorNamingTheCap) {
  MemoryClient client(server_);
  Json first = client.Request("tools/call", Call("gated"));
  ASSERT_EQ(first["result"]["resultType"], "task") << first.dump();
  Json second = client.Request("tools/call", Call("gated"));
  EXPECT_EQ(ErrorCode(second), kInvalidRequest) << second.dump();
  EXPECT_NE(ErrorMessage(second).find("max_tasks_per_tenant"), std::string::npos);
  MemoryClient other(server_, 0, "other-tenant");
  EXPECT_EQ(other.Request("tools/call", Call("gated"))["result"]["resultType"], "task")
      << "the cap is per tenant";
  client.Request("tasks/cancel", TaskParams(first["result"]["taskId"]));
}

class TasksTtlTest : public TasksTest {
 protected:
  TasksTtlTest() : TasksTest(/*cap=*/8, /*ttl=*/milliseconds(40)) {}
};

TEST_F(TasksTtlTest, AFinishedTaskIsDroppedOnceItsTtlHasPassed) {
  MemoryClient client(server_);
  Json id = client.Request("tools/call", Call("always_task"))["result"]["taskId"];
  ASSERT_TRUE(id.is_string());
  std::this_thread::sleep_for(milliseconds(60));
  Json r = client.Request("tasks/get", TaskParams(id));
  EXPECT_EQ(ErrorCode(r), kInvalidParams) << r.dump();
}

TEST(TaskExpiry, AnEndedTaskExpiresTtlAfterItsEndAndARunningOneNever) {
  using std::chrono::hours;
  Task running("t", std::make_shared<RequestState>());
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(running.ExpiredAt(now + hours(1000), hours(1)));
  Task done("t", std::make_shared<RequestState>());
  done.Complete(ToolResult::Text("x").ToJson());
  EXPECT_FALSE(done.ExpiredAt(std::chrono::steady_clock::now(), hours(1)));
  EXPECT_TRUE(done.ExpiredAt(std::chrono::steady_clock::now() + hours(2), hours(1)));
}

TEST(TaskExpiry, ACancelledTaskIsKeptUntilItsHandlerHasReturned) {
  using std::chrono::hours;
  auto run = std::make_shared<RequestState>();
  Task task("t", run);
  task.Cancel();
  EXPECT_TRUE(run->cancelled.load()) << "cancel reaches the handler's request";
  EXPECT_EQ(task.status(), Task::Status::kCancelled);
  const auto later = std::chrono::steady_clock::now() + hours(2);
  EXPECT_FALSE(task.ExpiredAt(later, hours(1))) << "its handler still runs";
  task.Complete(ToolResult::Text("late").ToJson());
  EXPECT_EQ(task.status(), Task::Status::kCancelled) << "a late result does not revive it";
  EXPECT_TRUE(task.ExpiredAt(later, hours(1)));
}

}  // namespace
}  // namespace mcp
