// The things a server offers, as plain structs the application fills in and registers on
// a Server: tools, resources, resource templates, prompts and argument completion. Each
// handler runs on a worker thread, concurrently with other requests; it may block. A
// handler may throw RpcException for a specific JSON-RPC error; any other exception from a
// tool becomes an isError tool result carrying its message.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mcp/context.h"
#include "mcp/tasks.h"
#include "mcp/types.h"

namespace mcp {

// ---- tools ----

// The result of tools/call: content blocks the model reads, optional structuredContent
// (checked against the tool's outputSchema), and isError for a failure the model should
// see (as opposed to a protocol error).
struct ToolResult {
  Json content = Json::array();  // [{"type":"text","text":...}, {"type":"image",...}, ...]
  Json structured_content{};     // null = absent
  bool is_error = false;
  Json meta{};  // `_meta`; null = absent

  static ToolResult Text(std::string text);
  static ToolResult Error(std::string message);  // text content + isError
  // Text content holding `value.dump()` plus structuredContent = value.
  static ToolResult Structured(Json value);
  ToolResult& AddText(std::string text);
  Json ToJson() const;
};

// `arguments` has already been validated against inputSchema (an object, possibly empty).
using ToolHandler = std::function<ToolResult(const Json& arguments, Context& ctx)>;

struct Tool {
  std::string name{};                            // ^[a-zA-Z0-9_-]{1,64}$, unique
  std::string title{};                           // optional
  std::string description{};                     // optional but strongly advised
  Json input_schema = Json{{"type", "object"}};  // flat, see CheckFlatSchema
  // The input schema a 2026-07-28 (stateless) request sees instead, when the tool takes
  // more there: e.g. an argument naming the state that a protocol session held before
  // (tools/list, tools/call's validation and the x-mcp-header checks use it). null: the
  // same schema in both eras. Flat, like input_schema.
  Json new_era_input_schema{};
  Json output_schema{};  // null = none; when set, results must carry valid structuredContent
  Json annotations{};    // null = none; {readOnlyHint, destructiveHint, idempotentHint, ...}
  ToolHandler handler{};
  // FOR THE CONFORMANCE FIXTURES ONLY: accept an input schema that is not flat ($defs, $ref,
  // ...; JSON Schema 2020-12). Registration skips the flat-schema check and tools/call skips
  // argument validation, so the handler must check its arguments itself.
  bool allow_non_flat_schema = false;
  // Whether a call may answer with a task (mcp/tasks.h) for a 2026-07-28 client that
  // declared the Tasks extension: the handler then keeps running on its thread after the
  // call answered, takes input through ctx.OnTaskInput / ctx.AwaitInput and stops when
  // ctx.cancelled(). Listed as execution.taskSupport.
  TaskSupport task_support = TaskSupport::kForbidden;

  Json ToJson(bool new_era = false) const;  // the tools/list entry
  // The input schema of the given era (new_era_input_schema when set and new_era).
  const Json& InputSchema(bool new_era) const {
    return new_era && !new_era_input_schema.is_null() ? new_era_input_schema : input_schema;
  }
};

// ---- resources ----

struct ResourceContents {
  std::string uri{};
  std::string mime_type{};            // optional
  std::optional<std::string> text{};  // exactly one of text / blob (base64)
  std::optional<std::string> blob{};
  Json ToJson() const;
};

// Reads `uri`. For a template, `variables` holds the values matched from its uri template.
using ResourceReader = std::function<std::vector<ResourceContents>(
    const std::string& uri, const std::map<std::string, std::string>& variables, Context& ctx)>;

struct Resource {
  std::string uri{};  // unique
  std::string name{};
  std::string title{};
  std::string description{};
  std::string mime_type{};
  std::optional<int64_t> size{};
  Json annotations{};
  ResourceReader read{};
  Json ToJson() const;
};

// A parameterised resource, RFC 6570 level 1 ("file:///logs/{name}"): `{var}` matches one
// or more characters other than '/', `{+var}` any characters.
struct ResourceTemplate {
  std::string uri_template{};  // unique
  std::string name{};
  std::string title{};
  std::string description{};
  std::string mime_type{};
  Json annotations{};
  ResourceReader read{};
  Json ToJson() const;
};

// ---- prompts ----

struct PromptArgument {
  std::string name{};
  std::string title{};
  std::string description{};
  bool required = false;
};

struct PromptResult {
  std::string description{};      // optional
  Json messages = Json::array();  // [{"role":"user","content":{"type":"text","text":...}}]
  static PromptResult UserText(std::string text);
  Json ToJson() const;
};

// `arguments` has been checked: every required argument present, no unknown ones.
using PromptHandler =
    std::function<PromptResult(const std::map<std::string, std::string>& arguments, Context& ctx)>;

struct Prompt {
  std::string name{};  // unique
  std::string title{};
  std::string description{};
  std::vector<PromptArgument> arguments{};
  PromptHandler handler{};
  Json ToJson() const;
};

// ---- completion ----

struct CompletionRequest {
  Json ref{};  // {"type":"ref/prompt","name":...} or {"type":"ref/resource","uri":...}
  std::string argument_name{};
  std::string argument_value{};
  std::map<std::string, std::string> context_arguments{};  // params.context.arguments
};
struct CompletionResult {
  std::vector<std::string> values{};  // at most 100 are sent
  std::optional<int64_t> total{};
  bool has_more = false;
};
using CompletionHandler = std::function<CompletionResult(const CompletionRequest&, Context&)>;

}  // namespace mcp
