// The fixture tools. Names, arguments and results follow the tool scenarios of the MCP
// conformance suite (tools-*.ts, elicitation-*.ts, json-schema-2020-12.ts); slow_tool,
// cancellation_report and update_watched_resource are extras for the e2e tests.
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples/conformance_server/fixtures.h"
#include "examples/conformance_server/media.h"
#include "mcp/session.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::LogLevel;
using mcp::Tool;
using mcp::ToolResult;

constexpr auto kStepDelay = std::chrono::milliseconds(50);

// Registers a tool or stops startup. (A builder, not designated initializers: g++ 12 warns
// about every member such an initializer leaves out.)
void AddTool(mcp::Server& server, std::string name, std::string description, Json input_schema,
             mcp::ToolHandler handler, Json output_schema = nullptr) {
  Tool tool;
  tool.name = std::move(name);
  tool.description = std::move(description);
  tool.input_schema = std::move(input_schema);
  tool.output_schema = std::move(output_schema);
  tool.handler = std::move(handler);
  const std::string what = tool.name;
  Require(server.AddTool(std::move(tool)), what);
}

Json NoArguments() { return Json{{"type", "object"}, {"properties", Json::object()}}; }

Json OneStringArgument(const std::string& name, const std::string& description) {
  return Json{{"type", "object"},
              {"properties", {{name, {{"type", "string"}, {"description", description}}}}},
              {"required", {name}}};
}

ToolResult Content(Json content) {
  ToolResult result;
  result.content = std::move(content);
  return result;
}

Json PngImage() {
  return {{"type", "image"}, {"data", kRedPixelPngBase64}, {"mimeType", "image/png"}};
}

// True when the client declared `capability` (in initialize, or in a 2026-07-28 request).
bool ClientHas(const Context& ctx, const std::string& capability) {
  Json caps = ctx.client_capabilities();
  return caps.is_object() && caps.contains(capability);
}

// Sends a server->client request and returns its result, or throws with the client's
// error so the tool answers isError with a message the model can read.
Json AskClient(const Context& ctx, const std::string& method, Json params) {
  mcp::ClientResponse response = ctx.SendRequestAndWait(method, std::move(params));
  if (!response.ok()) {
    throw std::runtime_error(method + " failed: " + response.error->message);
  }
  return response.result;
}

// "action=accept, content={...}" for an elicitation result.
std::string DescribeElicitation(const Json& result) {
  return "action=" + result.value("action", std::string("?")) +
         ", content=" + result.value("content", Json::object()).dump();
}

ToolResult Elicit(const Context& ctx, const std::string& message, Json requested_schema,
                  const std::string& prefix) {
  if (!ClientHas(ctx, "elicitation")) {
    return ToolResult::Error("the client did not declare the elicitation capability");
  }
  Json result = AskClient(ctx, "elicitation/create",
                          {{"message", message}, {"requestedSchema", std::move(requested_schema)}});
  return ToolResult::Text(prefix + DescribeElicitation(result));
}

// ---- content fixtures ----

void AddContentTools(mcp::Server& server) {
  AddTool(server, "test_simple_text", "Returns a simple text response", NoArguments(),
          [](const Json&, Context&) {
            return ToolResult::Text("This is a simple text response for testing.");
          });
  AddTool(server, "test_image_content", "Returns a 1x1 PNG image", NoArguments(),
          [](const Json&, Context&) { return Content(Json::array({PngImage()})); });
  AddTool(server, "test_audio_content", "Returns a short WAV clip", NoArguments(),
          [](const Json&, Context&) {
            return Content(Json::array(
                {{{"type", "audio"}, {"data", kSilentWavBase64}, {"mimeType", "audio/wav"}}}));
          });
  AddTool(server, "test_embedded_resource", "Returns an embedded text resource", NoArguments(),
          [](const Json&, Context&) {
            Json resource = {{"uri", "test://embedded-resource"},
                             {"mimeType", "text/plain"},
                             {"text", "This is an embedded resource content."}};
            return Content(Json::array({{{"type", "resource"}, {"resource", resource}}}));
          });
  AddTool(
      server, "test_multiple_content_types", "Returns text, an image and an embedded resource",
      NoArguments(), [](const Json&, Context&) {
        Json resource = {{"uri", "test://mixed-content-resource"},
                         {"mimeType", "application/json"},
                         {"text", Json{{"test", "data"}, {"value", 123}}.dump()}};
        return Content(Json::array({{{"type", "text"}, {"text", "Multiple content types test:"}},
                                    PngImage(),
                                    {{"type", "resource"}, {"resource", resource}}}));
      });
  AddTool(server, "test_error_handling", "Always fails with a tool error", NoArguments(),
          [](const Json&, Context&) {
            return ToolResult::Error("This tool intentionally returns an error for testing");
          });
}

// ---- notifications during a call ----

void AddNotifyingTools(mcp::Server& server) {
  AddTool(server, "test_tool_with_logging", "Sends three info log messages while it runs",
          NoArguments(), [](const Json&, Context& ctx) {
            ctx.Log(LogLevel::kInfo, "Tool execution started");
            std::this_thread::sleep_for(kStepDelay);
            ctx.Log(LogLevel::kInfo, "Tool processing data");
            std::this_thread::sleep_for(kStepDelay);
            ctx.Log(LogLevel::kInfo, "Tool execution completed");
            return ToolResult::Text("Tool with logging executed successfully");
          });
  AddTool(server, "test_tool_with_progress", "Reports progress 0, 50, 100 of 100", NoArguments(),
          [](const Json&, Context& ctx) {
            ctx.Progress(0, 100);
            std::this_thread::sleep_for(kStepDelay);
            ctx.Progress(50, 100);
            std::this_thread::sleep_for(kStepDelay);
            ctx.Progress(100, 100);
            // The TypeScript SDK dispatches notifications a microtask after responses: a
            // last notification read in the same chunk as the response is lost to onprogress.
            std::this_thread::sleep_for(kStepDelay);
            return ToolResult::Text("Tool with progress executed successfully");
          });
}

// ---- server->client requests ----

Json ElicitationDefaultsSchema() {
  return {{"type", "object"},
          {"properties",
           {{"name", {{"type", "string"}, {"description", "User name"}, {"default", "John Doe"}}},
            {"age", {{"type", "integer"}, {"description", "User age"}, {"default", 30}}},
            {"score", {{"type", "number"}, {"description", "User score"}, {"default", 95.5}}},
            {"status",
             {{"type", "string"},
              {"description", "User status"},
              {"enum", {"active", "inactive", "pending"}},
              {"default", "active"}}},
            {"verified",
             {{"type", "boolean"}, {"description", "Verification status"}, {"default", true}}}}}};
}

Json TitledOptions(const std::vector<std::pair<std::string, std::string>>& options) {
  Json list = Json::array();
  for (const auto& [value, title] : options) list.push_back({{"const", value}, {"title", title}});
  return list;
}

Json ElicitationEnumsSchema() {
  Json untitled = {"option1", "option2", "option3"};
  return {
      {"type", "object"},
      {"properties",
       {{"untitledSingle", {{"type", "string"}, {"enum", untitled}}},
        {"titledSingle",
         {{"type", "string"},
          {"oneOf", TitledOptions({{"value1", "First Option"},
                                   {"value2", "Second Option"},
                                   {"value3", "Third Option"}})}}},
        {"legacyEnum",
         {{"type", "string"},
          {"enum", {"opt1", "opt2", "opt3"}},
          {"enumNames", {"Option One", "Option Two", "Option Three"}}}},
        {"untitledMulti", {{"type", "array"}, {"items", {{"type", "string"}, {"enum", untitled}}}}},
        {"titledMulti",
         {{"type", "array"},
          {"items",
           {{"anyOf", TitledOptions({{"value1", "First Choice"},
                                     {"value2", "Second Choice"},
                                     {"value3", "Third Choice"}})}}}}}}}};
}

void AddClientRequestTools(mcp::Server& server) {
  AddTool(server, "test_sampling",
          "Asks the client's LLM (sampling/createMessage) to answer a prompt",
          OneStringArgument("prompt", "The prompt to send to the LLM"),
          [](const Json& args, Context& ctx) {
            if (!ClientHas(ctx, "sampling")) {
              return ToolResult::Error("the client did not declare the sampling capability");
            }
            Json message = {{"role", "user"},
                            {"content", {{"type", "text"}, {"text", args.at("prompt")}}}};
            Json result = AskClient(ctx, "sampling/createMessage",
                                    {{"messages", Json::array({message})}, {"maxTokens", 100}});
            Json content = result.value("content", Json::object());
            std::string text = content.is_object() && content.contains("text")
                                   ? content["text"].get<std::string>()
                                   : content.dump();
            return ToolResult::Text("LLM response: " + text);
          });
  AddTool(server, "test_elicitation", "Asks the user (elicitation/create) for a username and email",
          OneStringArgument("message", "The message to show the user"),
          [](const Json& args, Context& ctx) {
            Json schema = {
                {"type", "object"},
                {"properties",
                 {{"username", {{"type", "string"}, {"description", "User's response"}}},
                  {"email", {{"type", "string"}, {"description", "User's email address"}}}}},
                {"required", {"username", "email"}}};
            return Elicit(ctx, args.at("message"), schema, "User response: ");
          });
  AddTool(server, "test_elicitation_sep1034_defaults",
          "Elicitation with a default for every primitive type", NoArguments(),
          [](const Json&, Context& ctx) {
            return Elicit(ctx, "Please review and update the form fields",
                          ElicitationDefaultsSchema(), "Elicitation completed: ");
          });
  AddTool(server, "test_elicitation_sep1330_enums", "Elicitation with all five enum schema shapes",
          NoArguments(), [](const Json&, Context& ctx) {
            return Elicit(ctx, "Please select options from the enum fields",
                          ElicitationEnumsSchema(), "Elicitation completed: ");
          });
}

// ---- JSON Schema 2020-12 keywords kept in tools/list ----

void AddJsonSchema2020Tool(mcp::Server& server) {
  // The suite's schema (json-schema-2020-12.ts): $defs with an $anchor, a $ref, allOf/anyOf,
  // if/then/else. mcp::Server accepts and validates all of it (mcp/schema.h).
  Json schema = Json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": false
  })");
  Tool tool;
  tool.name = "json_schema_2020_12_tool";
  tool.description = "Tool with JSON Schema 2020-12 features";
  tool.input_schema = std::move(schema);
  tool.handler = [](const Json& args, Context&) {
    return ToolResult::Text("Received: " + args.dump());
  };
  Require(server.AddTool(std::move(tool)), "json_schema_2020_12_tool");
}

// ---- extras for the e2e tests ----

// Waits `seconds`, reporting progress, unless the client cancels first. Polling at 50 ms
// keeps the handler simple; a tool doing real work would use ctx.OnCancel to interrupt it.
ToolResult SlowTool(FixtureState& state, const Json& args, Context& ctx) {
  const double seconds = args.value("seconds", 10.0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int step = 0; std::chrono::steady_clock::now() < end; ++step) {
    if (ctx.cancelled()) {
      ++state.slow_calls_cancelled;
      return ToolResult::Error("cancelled");  // not sent: the request was cancelled
    }
    ctx.Progress(step, 0, "waiting");
    std::this_thread::sleep_for(kStepDelay);
  }
  ++state.slow_calls_completed;
  return ToolResult::Text("slow_tool finished after " + std::to_string(seconds) + " s");
}

void AddTestSupportTools(mcp::Server& server, FixtureState& state) {
  AddTool(server, "slow_tool",
          "Waits `seconds` (default 10), reporting progress, unless cancelled first",
          {{"type", "object"},
           {"properties", {{"seconds", {{"type", "number"}, {"minimum", 0}, {"maximum", 600}}}}}},
          [&state](const Json& args, Context& ctx) { return SlowTool(state, args, ctx); });
  AddTool(
      server, "cancellation_report",
      "How many slow_tool calls saw their cancellation, and how many finished", NoArguments(),
      [&state](const Json&, Context&) {
        return ToolResult::Structured({{"cancelled", state.slow_calls_cancelled.load()},
                                       {"completed", state.slow_calls_completed.load()}});
      },
      {{"type", "object"},
       {"properties", {{"cancelled", {{"type", "integer"}}}, {"completed", {{"type", "integer"}}}}},
       {"required", {"cancelled", "completed"}}});
  AddTool(server, "update_watched_resource",
          "Replaces the text of test://watched-resource and notifies its subscribers",
          OneStringArgument("text", "The new content"),
          [&server, &state](const Json& args, Context&) {
            {
              std::lock_guard lock(state.watched_mutex);
              state.watched_text = args.at("text").get<std::string>();
            }
            server.NotifyResourceUpdated("test://watched-resource");
            return ToolResult::Text("test://watched-resource updated");
          });
}

}  // namespace

void AddFixtureTools(mcp::Server& server, FixtureState& state) {
  AddContentTools(server);
  AddNotifyingTools(server);
  AddClientRequestTools(server);
  AddJsonSchema2020Tool(server);
  AddTestSupportTools(server, state);
}

}  // namespace conformance
