// The fixtures of the Tasks extension's scenarios (tasks-*.ts, io.modelcontextprotocol/tasks):
// a sync-only tool, task-capable tools that run for a while, fail, break, ask for input
// while they run (Context::AwaitInput), and a task-only tool that gathers input through an
// input_required round before it becomes a task.
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "examples/conformance_server/fixtures.h"
#include "mcp/context.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::TaskSupport;
using mcp::Tool;
using mcp::ToolResult;

void AddTool(mcp::Server& server, std::string name, std::string description, Json input_schema,
             TaskSupport support, mcp::ToolHandler handler) {
  Tool tool;
  tool.name = std::move(name);
  tool.description = std::move(description);
  tool.input_schema = std::move(input_schema);
  tool.task_support = support;
  tool.handler = std::move(handler);
  const std::string what = tool.name;
  Require(server.AddTool(std::move(tool)), what);
}

Json NoArguments() { return Json{{"type", "object"}, {"properties", Json::object()}}; }

// Sleeps `duration` in short steps; false when the call was cancelled meanwhile.
bool SleepUnlessCancelled(const Context& ctx, std::chrono::milliseconds duration) {
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    if (ctx.cancelled()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !ctx.cancelled();
}

Json Confirmation(const std::string& message, const std::string& field, const char* type) {
  return {{"method", "elicitation/create"},
          {"params",
           {{"message", message},
            {"requestedSchema",
             {{"type", "object"},
              {"properties", {{field, {{"type", type}}}}},
              {"required", {field}}}}}}};
}

// The elicitation result's content[field] as text, or "" when the user gave none.
std::string Field(const Json& answer, const std::string& field) {
  const Json content = answer.is_object() ? answer.value("content", Json()) : Json();
  const Json value = content.is_object() ? content.value(field, Json()) : Json();
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void AddRunningTools(mcp::Server& server) {
  AddTool(server, "greet", "Greets by name, at once (never a task)",
          {{"type", "object"},
           {"properties", {{"name", {{"type", "string"}}}}},
           {"required", {"name"}}},
          TaskSupport::kForbidden, [](const Json& args, Context&) {
            return ToolResult::Text("Hello, " + args["name"].get<std::string>() + "!");
          });
  AddTool(server, "slow_compute", "Sleeps `seconds`, then reports; a task when it outlives 0.2 s",
          {{"type", "object"},
           {"properties", {{"seconds", {{"type", "number"}}}, {"label", {{"type", "string"}}}}},
           {"required", {"seconds"}}},
          TaskSupport::kOptional, [](const Json& args, Context& ctx) {
            double seconds = args["seconds"].get<double>();
            ctx.Progress(0, seconds, "computing");
            if (!SleepUnlessCancelled(
                    ctx, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)))) {
              return ToolResult::Error("slow_compute cancelled");
            }
            return ToolResult::Text("slow_compute " + args.value("label", std::string()) +
                                    " done after " + args["seconds"].dump() + " s");
          });
  AddTool(server, "failing_job", "Fails (a tool error) after about a second; always a task",
          NoArguments(), TaskSupport::kRequired, [](const Json&, Context& ctx) {
            SleepUnlessCancelled(ctx, std::chrono::milliseconds(1000));
            return ToolResult::Error("failing_job failed, as it always does");
          });
  AddTool(server, "protocol_error_job", "Breaks with a protocol error after about a second",
          NoArguments(), TaskSupport::kOptional, [](const Json&, Context& ctx) -> ToolResult {
            SleepUnlessCancelled(ctx, std::chrono::milliseconds(1000));
            throw mcp::RpcException(mcp::kInternalError, "protocol_error_job broke, on purpose");
          });
}

void AddInputTools(mcp::Server& server) {
  AddTool(server, "confirm_delete", "Asks to confirm deleting `filename` while it runs",
          {{"type", "object"},
           {"properties", {{"filename", {{"type", "string"}}}}},
           {"required", {"filename"}}},
          TaskSupport::kOptional, [](const Json& args, Context& ctx) {
            std::string file = args["filename"].get<std::string>();
            Json answers = ctx.AwaitInput(
                {{"confirm", Confirmation("Delete " + file + "?", "confirm", "boolean")}});
            return ToolResult::Text("confirm_delete " + file + ": " + answers["confirm"].dump());
          });
  AddTool(server, "multi_input", "Asks two questions at once while it runs", NoArguments(),
          TaskSupport::kOptional, [](const Json&, Context& ctx) {
            Json answers =
                ctx.AwaitInput({{"first", Confirmation("First name?", "name", "string")},
                                {"second", Confirmation("Second name?", "name", "string")}});
            return ToolResult::Text("multi_input: " + Field(answers["first"], "name") + ", " +
                                    Field(answers["second"], "name"));
          });
  AddTool(
      server, "test_tool_with_task",
      "Asks the user's name (an input_required round), then answers with a task", NoArguments(),
      TaskSupport::kRequired, [](const Json&, Context& ctx) {
        // An input_required round of the call itself (not AwaitInput, which would make
        // the call a task at once): the scenario wants the task only on the retry.
        const Json& given = ctx.input_responses();
        if (!given.is_object() || !given.contains("user_name")) {
          ctx.RequireInput({{"user_name", Confirmation("What is your name?", "name", "string")}});
        }
        return ToolResult::Text("Hello, " + Field(given["user_name"], "name") + "!");
      });
}

}  // namespace

void AddTaskFixtures(mcp::Server& server) {
  AddRunningTools(server);
  AddInputTools(server);
}

}  // namespace conformance
