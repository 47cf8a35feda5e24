// fuzz_jsonrpc: a hostile client's bytes into the MCP server's message handling.
//
// One mcp::Server (a few tools with typed, bounded schemas, a resource, a resource template,
// a prompt, completion, a custom method) lives for the whole run; every input gets its own
// session over the in-memory transport, so the parser, batches, ids, the lifecycle, method
// dispatch, argument validation, pagination cursors, cancellation and the error paths all
// run, and no state leaks from one input to the next.
//
// Input: byte 0 chooses the preamble (bit 0: initialize first; bit 1: with protocol
// 2025-03-26, the only one that takes batches; bit 2: skip notifications/initialized); the
// rest is split on '\n' and each line is one message, sent as raw bytes. A final ping must be
// answered: a reader thread that died or wedged is a failure, not just a slow input.
// Each line is also checked against jsonrpc::PeekMessageIn, which reads the id of a
// message too big to parse from its text alone: on a valid object whose text holds the
// token "id" once, what it finds must be the parsed top-level id, and nothing when the
// only "id" is nested; what it calls a response must have a top-level "result" or
// "error" and no "method".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "mcp/jsonrpc.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/test_client.h"

namespace {

using mcp::Json;

// Per input: at most this many messages (lines); more only slows the fuzzer down.
constexpr size_t kMaxMessages = 64;

mcp::Tool EchoTool() {
  mcp::Tool t;
  t.name = "echo";
  t.description = "Echoes its text";
  t.input_schema = {{"type", "object"},
                    {"properties", {{"text", {{"type", "string"}, {"maxLength", 64}}}}},
                    {"required", {"text"}},
                    {"additionalProperties", false}};
  t.handler = [](const Json& args, mcp::Context& ctx) {
    ctx.Log(mcp::LogLevel::kInfo, args["text"]);
    ctx.Progress(1, 2, "half way");
    return mcp::ToolResult::Text(args["text"].get<std::string>());
  };
  return t;
}

// Every kind of keyword the validator knows, and an output schema the result must meet.
mcp::Tool MeasureTool() {
  mcp::Tool t;
  t.name = "measure";
  t.description = "Counts and sums";
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"values",
         {{"type", "array"}, {"items", {{"type", "number"}}}, {"minItems", 1}, {"maxItems", 8}}},
        {"scale", {{"type", "integer"}, {"minimum", -5}, {"exclusiveMaximum", 100}}},
        {"unit", {{"type", "string"}, {"enum", {"m", "s", "kg"}}}},
        {"label", {{"type", "string"}, {"pattern", "^[a-z]{1,8}$"}, {"minLength", 1}}},
        {"strict", {{"type", "boolean"}}},
        {"nothing", {{"type", "null"}}},
        {"fixed", {{"const", 42}}},
        {"extra", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}},
      {"required", {"values"}},
      {"additionalProperties", false}};
  t.output_schema = {
      {"type", "object"},
      {"properties", {{"count", {{"type", "integer"}}}, {"sum", {{"type", "number"}}}}},
      {"required", {"count", "sum"}}};
  t.handler = [](const Json& args, mcp::Context&) {
    double sum = 0;
    for (const Json& v : args["values"]) sum += v.get<double>();
    int64_t scale = args.value("scale", int64_t{1});
    return mcp::ToolResult::Structured(
        {{"count", args["values"].size()}, {"sum", sum * static_cast<double>(scale)}});
  };
  return t;
}

// A tool that fails (an isError result), one that throws, one that asks the client.
mcp::Tool FailTool() {
  mcp::Tool t;
  t.name = "fail";
  t.input_schema = {{"type", "object"},
                    {"properties", {{"throw", {{"type", "boolean"}}}}},
                    {"additionalProperties", false}};
  t.handler = [](const Json& args, mcp::Context&) -> mcp::ToolResult {
    if (args.value("throw", false)) throw std::runtime_error("thrown on purpose");
    return mcp::ToolResult::Error("failed on purpose");
  };
  return t;
}

mcp::Tool AskTool() {
  mcp::Tool t;
  t.name = "ask";
  t.input_schema = {{"type", "object"}};
  t.handler = [](const Json&, mcp::Context& ctx) {
    // The client answers -32601 at once, or the fuzzer answers with a guessed id first.
    mcp::ClientResponse r =
        ctx.SendRequestAndWait("roots/list", Json::object(), std::chrono::milliseconds(2000));
    return mcp::ToolResult::Text(r.ok() ? r.result.dump() : r.error->message);
  };
  return t;
}

void AddFeatures(mcp::Server& server) {
  auto check = [](mcp::Status st) {
    if (!st) {
      std::fprintf(stderr, "fuzz_jsonrpc: setup: %s\n", st.message().c_str());
      std::abort();
    }
  };
  check(server.AddTool(EchoTool()));
  check(server.AddTool(MeasureTool()));
  check(server.AddTool(FailTool()));
  check(server.AddTool(AskTool()));
  auto reader = [](const std::string& uri, const std::map<std::string, std::string>& vars,
                   mcp::Context&) {
    mcp::ResourceContents c;
    c.uri = uri;
    c.text = "vars:" + std::to_string(vars.size());
    return std::vector<mcp::ResourceContents>{c};
  };
  check(server.AddResource({.uri = "mem://readme", .name = "readme", .read = reader}));
  check(server.AddResource({.uri = "mem://notes", .name = "notes", .read = reader}));
  check(server.AddResourceTemplate(
      {.uri_template = "mem://logs/{day}/{+rest}", .name = "logs", .read = reader}));
  check(
      server.AddPrompt({.name = "greet",
                        .arguments = {{.name = "who", .required = true}, {.name = "tone"}},
                        .handler = [](const std::map<std::string, std::string>& a, mcp::Context&) {
                          return mcp::PromptResult::UserText("hello " + a.at("who"));
                        }}));
  server.SetCompletionHandler([](const mcp::CompletionRequest& r, mcp::Context&) {
    return mcp::CompletionResult{.values = {r.argument_value + "x", r.argument_value + "y"}};
  });
  check(server.AddRequestHandler(
      "custom/echo", [](const Json& params, mcp::Context, mcp::Reply reply) { reply.Ok(params); }));
}

mcp::Server& TheServer() {
  // Lives for the whole run (never destroyed: libFuzzer exits without unwinding).
  static mcp::Server* server = [] {
    mcp::log::SetLevel(mcp::LogLevel::kOff);
    mcp::ServerOptions o;
    o.name = "fuzz";
    o.worker_threads = 4;
    o.page_size = 2;             // so that lists have pages and cursors
    o.max_message_bytes = 2048;  // so that the size limit is reachable
    o.drain_timeout = std::chrono::milliseconds(100);
    o.validate_tool_output = true;
    auto* s = new mcp::Server(o);
    AddFeatures(*s);
    return s;
  }();
  return *server;
}

// See the header comment. Duplicate keys are left out (which one a parser keeps is its
// choice), as are texts deeper than the server parses.
void CheckPeekMessage(std::string_view line) {
  const mcp::jsonrpc::Peek peek = mcp::jsonrpc::PeekMessageIn(line);
  if (!peek.id.is_null() && !mcp::jsonrpc::IsValidId(peek.id)) {
    std::fprintf(stderr, "fuzz_jsonrpc: PeekMessage returned id %s (response: %d)\n",
                 peek.id.dump().c_str(), peek.response);
    std::abort();
  }
  auto parsed = mcp::jsonrpc::Parse(line);
  const Json* value = std::get_if<Json>(&parsed);
  if (!value || !value->is_object()) return;
  auto once = [&](std::string_view key) { return line.find(key) == line.rfind(key); };
  if (peek.response && once("\"method\"") && once("\"result\"") && once("\"error\"") &&
      (value->contains("method") || (!value->contains("result") && !value->contains("error")))) {
    std::fprintf(stderr,
                 "fuzz_jsonrpc: PeekMessage called a message without a top-level "
                 "result or error, or with a method, a response\n");
    std::abort();
  }
  const size_t first = line.find("\"id\"");
  if (first == std::string_view::npos || !once("\"id\"") || peek.id.is_null()) return;
  auto id = value->find("id");
  if (id == value->end() || *id != peek.id) {
    std::fprintf(stderr, "fuzz_jsonrpc: PeekMessage found %s where the top-level id is %s\n",
                 peek.id.dump().c_str(), id == value->end() ? "absent" : id->dump().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mcp::Server& server = TheServer();
  if (size == 0) return 0;
  const uint8_t preamble = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  mcp::MemoryClient client(server);
  if (preamble & 1)
    client.Initialize((preamble & 2) ? "2025-03-26" : "2025-06-18", !(preamble & 4));
  for (size_t n = 0; n < kMaxMessages && !rest.empty(); ++n) {
    size_t end = rest.find('\n');
    CheckPeekMessage(rest.substr(0, end));
    client.SendRaw(std::string(rest.substr(0, end)));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  // Ping is answered on the reader thread after everything above was read.
  Json pong = client.Request("ping", Json::object(), std::chrono::seconds(8));
  if (!pong.is_object() && !client.session()->closed()) {
    std::fprintf(stderr, "fuzz_jsonrpc: the session stopped answering (no reply to ping)\n");
    std::abort();
  }
  return 0;  // ~MemoryClient closes the session and waits for its handlers
}
