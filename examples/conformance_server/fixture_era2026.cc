// The fixture tools of the 2026-07-28 suite (server-stateless, http-custom-header-server-
// validation): a tool that needs a client capability, one that logs, two that change the
// tool and prompt lists (for subscriptions/listen), and one whose arguments are mirrored to
// HTTP headers (x-mcp-header).
#include <map>
#include <string>
#include <utility>

#include "examples/conformance_server/fixtures.h"
#include "mcp/context.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::LogLevel;
using mcp::Tool;
using mcp::ToolResult;

void AddTool(mcp::Server& server, std::string name, std::string description, Json input_schema,
             mcp::ToolHandler handler) {
  Tool tool;
  tool.name = std::move(name);
  tool.description = std::move(description);
  tool.input_schema = std::move(input_schema);
  tool.handler = std::move(handler);
  const std::string what = tool.name;
  Require(server.AddTool(std::move(tool)), what);
}

Json NoArguments() { return Json{{"type", "object"}, {"properties", Json::object()}}; }

}  // namespace

void AddEra2026Tools(mcp::Server& server) {
  AddTool(server, "test_missing_capability",
          "Needs the client's sampling capability; refuses (-32021) a client that did not "
          "declare it",
          NoArguments(), [](const Json&, Context& ctx) {
            ctx.RequireClientCapability("sampling",
                                        "test_missing_capability asks the client's LLM");
            return ToolResult::Text("the client declared sampling");
          });
  AddTool(server, "test_logging_tool",
          "Logs three info messages (sent only when the request asks for a log level)",
          NoArguments(), [](const Json&, Context& ctx) {
            for (int i = 1; i <= 3; ++i) {
              ctx.Log(LogLevel::kInfo, "test_logging_tool message " + std::to_string(i));
            }
            return ToolResult::Text("logged three messages");
          });
  Json headers_schema = {
      {"type", "object"},
      {"properties",
       {{"region",
         {{"type", "string"}, {"description", "Where to run"}, {"x-mcp-header", "Region"}}},
        {"priority", {{"type", "integer"}, {"x-mcp-header", "Priority"}}},
        {"note", {{"type", "string"}}}}},
      {"required", {"region"}}};
  // subscriptions/listen's hooks (server-stateless): each call adds a tool (a prompt) and
  // removes it again, so the server sends list_changed to the listen streams that asked for
  // it and the lists other scenarios check stay as they were.
  AddTool(server, "test_trigger_tool_change", "Adds and removes the tool dynamic_tool",
          NoArguments(), [&server](const Json&, Context&) {
            Tool tool;
            tool.name = "dynamic_tool";
            tool.handler = [](const Json&, Context&) { return ToolResult::Text("here"); };
            Require(server.AddTool(std::move(tool)), "dynamic_tool");
            server.RemoveTool("dynamic_tool");
            return ToolResult::Text("changed the tool list twice");
          });
  AddTool(server, "test_trigger_prompt_change", "Adds and removes the prompt dynamic_prompt",
          NoArguments(), [&server](const Json&, Context&) {
            mcp::Prompt prompt;
            prompt.name = "dynamic_prompt";
            prompt.handler = [](const std::map<std::string, std::string>&, Context&) {
              return mcp::PromptResult::UserText("here");
            };
            Require(server.AddPrompt(std::move(prompt)), "dynamic_prompt");
            server.RemovePrompt("dynamic_prompt");
            return ToolResult::Text("changed the prompt list twice");
          });
  AddTool(server, "test_custom_headers",
          "Echoes its arguments; region and priority travel in Mcp-Param-* headers too",
          headers_schema,
          [](const Json& args, Context&) { return ToolResult::Text("arguments: " + args.dump()); });
}

}  // namespace conformance
