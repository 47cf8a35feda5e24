// The fixtures of the 2026-07-28 input-required scenarios (input-required-result-*.ts): tools
// and a prompt that ask the client for input with Context::RequireInput and finish on the
// retry that brings the answers (and the sealed state) back.
#include <map>
#include <string>
#include <utility>

#include "examples/conformance_server/fixtures.h"
#include "mcp/context.h"

namespace conformance {
namespace {

using mcp::Context;
using mcp::Json;
using mcp::Tool;
using mcp::ToolResult;

void AddTool(mcp::Server& server, std::string name, std::string description,
             mcp::ToolHandler handler) {
  Tool tool;
  tool.name = std::move(name);
  tool.description = std::move(description);
  tool.input_schema = Json{{"type", "object"}, {"properties", Json::object()}};
  tool.handler = std::move(handler);
  const std::string what = tool.name;
  Require(server.AddTool(std::move(tool)), what);
}

Json Elicitation(const std::string& message, const std::string& field, const char* type) {
  return {{"method", "elicitation/create"},
          {"params",
           {{"message", message},
            {"requestedSchema",
             {{"type", "object"},
              {"properties", {{field, {{"type", type}}}}},
              {"required", {field}}}}}}};
}

Json Sampling(const std::string& text, int max_tokens) {
  Json message = {{"role", "user"}, {"content", {{"type", "text"}, {"text", text}}}};
  return {{"method", "sampling/createMessage"},
          {"params", {{"messages", Json::array({message})}, {"maxTokens", max_tokens}}}};
}

Json ListRoots() { return {{"method", "roots/list"}, {"params", Json::object()}}; }

// The client's answer under `key`, or null when it did not send one.
Json Answer(const Context& ctx, const std::string& key) {
  const Json& responses = ctx.input_responses();
  return responses.is_object() ? responses.value(key, Json()) : Json();
}

// Field `name` of the state the handler asked to get back (null on a first call).
Json StateField(const Context& ctx, const std::string& name) {
  const Json& state = ctx.request_state();
  return state.is_object() ? state.value(name, Json()) : Json();
}

// Asks for `key` until an answer comes, then returns it.
Json AnswerOrAsk(const Context& ctx, const std::string& key, const Json& request,
                 Json state = nullptr) {
  Json answer = Answer(ctx, key);
  if (answer.is_null()) ctx.RequireInput({{key, request}}, std::move(state));
  return answer;
}

void AddSingleInputTools(mcp::Server& server) {
  AddTool(
      server, "test_input_required_result_elicitation", "Asks the user's name, then greets",
      [](const Json&, Context& ctx) {
        Json answer =
            AnswerOrAsk(ctx, "user_name", Elicitation("What is your name?", "name", "string"));
        Json content = answer.value("content", Json::object());
        return ToolResult::Text("Hello, " + content.value("name", std::string("stranger")) + "!");
      });
  AddTool(
      server, "test_input_required_result_sampling", "Asks the client's LLM a question",
      [](const Json&, Context& ctx) {
        Json answer =
            AnswerOrAsk(ctx, "capital_question", Sampling("What is the capital of France?", 100));
        return ToolResult::Text("LLM response: " + answer.value("content", Json::object()).dump());
      });
  AddTool(server, "test_input_required_result_list_roots", "Lists the client's roots",
          [](const Json&, Context& ctx) {
            Json answer = AnswerOrAsk(ctx, "client_roots", ListRoots());
            return ToolResult::Text("client roots: " + answer.value("roots", Json::array()).dump());
          });
  AddTool(server, "test_streaming_elicitation", "Asks the user for a confirmation",
          [](const Json&, Context& ctx) {
            Json answer = AnswerOrAsk(ctx, "confirm", Elicitation("Continue?", "ok", "boolean"));
            return ToolResult::Text("confirmed: " + answer.dump());
          });
}

void AddStatefulTools(mcp::Server& server) {
  AddTool(server, "test_input_required_result_request_state",
          "Asks for a confirmation and checks its own state on the retry",
          [](const Json&, Context& ctx) {
            Json answer =
                AnswerOrAsk(ctx, "confirm", Elicitation("Please confirm", "ok", "boolean"),
                            Json{{"step", "confirm"}});
            if (StateField(ctx, "step") != "confirm") {
              ctx.RequireInput({{"confirm", Elicitation("Please confirm", "ok", "boolean")}},
                               Json{{"step", "confirm"}});
            }
            return ToolResult::Text("state-ok: confirmed " + answer.dump());
          });
  AddTool(server, "test_input_required_result_tampered_state",
          "Asks for a confirmation with a sealed state (a tampered one is refused)",
          [](const Json&, Context& ctx) {
            AnswerOrAsk(ctx, "confirm", Elicitation("Please confirm", "ok", "boolean"),
                        Json{{"step", "confirm"}});
            return ToolResult::Text("state-ok");
          });
  AddTool(server, "test_input_required_result_multiple_inputs",
          "Asks for a name, a greeting from the LLM and the client's roots at once",
          [](const Json&, Context& ctx) {
            Json requests = {{"user_name", Elicitation("What is your name?", "name", "string")},
                             {"greeting", Sampling("Generate a greeting", 50)},
                             {"client_roots", ListRoots()}};
            Json missing = Json::object();
            for (const auto& [key, request] : requests.items()) {
              if (Answer(ctx, key).is_null()) missing[key] = request;
            }
            if (!missing.empty()) ctx.RequireInput(missing, Json{{"step", "all"}});
            return ToolResult::Text("got " + ctx.input_responses().dump());
          });
  AddTool(
      server, "test_input_required_result_multi_round",
      "Asks for a name, then a favorite color, then answers", [](const Json&, Context& ctx) {
        Json round_field = StateField(ctx, "round");
        int round = round_field.is_number_integer() ? round_field.get<int>() : 0;
        if (round == 0 || (round == 1 && Answer(ctx, "step1").is_null())) {
          ctx.RequireInput({{"step1", Elicitation("Step 1: What is your name?", "name", "string")}},
                           Json{{"round", 1}});
        }
        if (round == 1) {
          Json name = Answer(ctx, "step1").value("content", Json::object());
          ctx.RequireInput(
              {{"step2", Elicitation("Step 2: What is your favorite color?", "color", "string")}},
              Json{{"round", 2}, {"name", name}});
        }
        Json color = AnswerOrAsk(
            ctx, "step2", Elicitation("Step 2: What is your favorite color?", "color", "string"),
            ctx.request_state());
        return ToolResult::Text("name " + StateField(ctx, "name").dump() + ", color " +
                                color.value("content", Json::object()).dump());
      });
}

void AddCapabilityAwareTool(mcp::Server& server) {
  AddTool(server, "test_input_required_result_capabilities",
          "Asks only for what the client declared it can answer", [](const Json&, Context& ctx) {
            Json caps = ctx.client_capabilities();
            Json requests = Json::object();
            if (caps.contains("elicitation")) {
              requests["user_name"] = Elicitation("What is your name?", "name", "string");
            }
            if (caps.contains("sampling")) requests["summary"] = Sampling("Summarize", 50);
            if (caps.contains("roots")) requests["client_roots"] = ListRoots();
            bool answered = !ctx.input_responses().is_null();
            if (!answered && !requests.empty()) ctx.RequireInput(requests, Json{{"asked", true}});
            return ToolResult::Text("answers: " + ctx.input_responses().dump());
          });
}

void AddInputRequiredPrompt(mcp::Server& server) {
  mcp::Prompt prompt;
  prompt.name = "test_input_required_result_prompt";
  prompt.description = "Asks the user for the context the prompt uses";
  prompt.handler = [](const std::map<std::string, std::string>&, Context& ctx) {
    Json answer =
        AnswerOrAsk(ctx, "user_context",
                    Elicitation("What context should the prompt use?", "context", "string"));
    std::string context = answer.value("content", Json::object()).value("context", "");
    return mcp::PromptResult::UserText("Use this context: " + context);
  };
  Require(server.AddPrompt(std::move(prompt)), "test_input_required_result_prompt");
}

}  // namespace

void AddInputRequiredFixtures(mcp::Server& server) {
  AddSingleInputTools(server);
  AddStatefulTools(server);
  AddCapabilityAwareTool(server);
  AddInputRequiredPrompt(server);
}

}  // namespace conformance
