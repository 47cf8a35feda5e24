// The built-in MCP methods: lifecycle (initialize, ping, logging/setLevel), tools,
// resources, prompts and completion. Each takes params (an object) and returns the result
// or throws RpcException; session_dispatch.cc turns that into the one response.
#include <algorithm>
#include <cctype>
#include <optional>

#include "base/base64.h"
#include "mcp/log.h"
#include "mcp/schema.h"
#include "mcp/session_impl.h"

namespace mcp {
namespace {

[[noreturn]] void BadParams(const std::string& message) {
  throw RpcException(kInvalidParams, "Invalid params: " + message);
}

// params[key] as a string; throws -32602 when missing (if required) or of another type.
std::string StringParam(const Json& params, const char* key, bool required = true) {
  auto it = params.find(key);
  if (it == params.end()) {
    if (required) BadParams(std::string("missing \"") + key + "\"");
    return "";
  }
  if (!it->is_string()) BadParams(std::string("\"") + key + "\" must be a string");
  return it->get<std::string>();
}

// ---- opaque cursors: base64("<kind>:<offset>") ----

// One page of `items` starting at params.cursor, under `key`, with nextCursor if more.
Json Paginate(std::vector<Json> items, const Json& params, const std::string& kind, const char* key,
              size_t page_size) {
  size_t offset = 0;
  if (auto c = params.find("cursor"); c != params.end() && !c->is_null()) {
    if (!c->is_string()) BadParams("\"cursor\" must be a string");
    auto decoded = mcpcell::Base64Decode(c->get<std::string>());
    std::string prefix = kind + ":";
    bool ok = decoded && decoded->rfind(prefix, 0) == 0 && decoded->size() > prefix.size() &&
              decoded->size() - prefix.size() <= 9 &&
              std::all_of(decoded->begin() + prefix.size(), decoded->end(), ::isdigit);
    if (ok) offset = std::stoul(decoded->substr(prefix.size()));
    if (!ok || offset > items.size()) {
      BadParams("invalid cursor " + c->dump() + " (use the nextCursor of a previous " + kind +
                " page)");
    }
  }
  page_size = std::max<size_t>(page_size, 1);
  size_t end = std::min(items.size(), offset + page_size);
  Json page = Json::array();
  for (size_t i = offset; i < end; ++i) page.push_back(std::move(items[i]));
  Json result = {{key, std::move(page)}};
  if (end < items.size())
    result["nextCursor"] = mcpcell::Base64Encode(kind + ":" + std::to_string(end));
  return result;
}

// RFC 6570 level 1 match of `uri` against `tmpl`: {var} = one or more chars but '/',
// {+var} = one or more of any. Backtracks; templates are short.
bool MatchTemplate(std::string_view tmpl, std::string_view uri,
                   std::map<std::string, std::string>& vars) {
  if (tmpl.empty()) return uri.empty();
  if (tmpl[0] != '{') {
    return !uri.empty() && uri[0] == tmpl[0] && MatchTemplate(tmpl.substr(1), uri.substr(1), vars);
  }
  size_t close = tmpl.find('}');
  std::string name(tmpl.substr(1, close - 1));
  bool reserved = !name.empty() && name[0] == '+';
  if (reserved) name.erase(0, 1);
  std::string_view rest = tmpl.substr(close + 1);
  for (size_t len = 1; len <= uri.size(); ++len) {
    if (!reserved && uri[len - 1] == '/') break;
    if (MatchTemplate(rest, uri.substr(len), vars)) {
      vars[name] = std::string(uri.substr(0, len));
      return true;
    }
  }
  return false;
}

}  // namespace

const std::map<std::string, Session::Impl::Builtin, std::less<>>& Session::Impl::Builtins() {
  static const auto* table = new std::map<std::string, Builtin, std::less<>>{
      {"initialize", {&Impl::Initialize, true}},
      {"ping", {&Impl::Ping, true}},
      {"logging/setLevel", {&Impl::SetLevel, true}},
      {"resources/subscribe", {&Impl::Subscribe, true}},
      {"resources/unsubscribe", {&Impl::Unsubscribe, true}},
      {"tools/list", {&Impl::ListTools, false}},
      {"tools/call", {&Impl::CallTool, false}},
      {"resources/list", {&Impl::ListResources, false}},
      {"resources/templates/list", {&Impl::ListResourceTemplates, false}},
      {"resources/read", {&Impl::ReadResource, false}},
      {"prompts/list", {&Impl::ListPrompts, false}},
      {"prompts/get", {&Impl::GetPrompt, false}},
      {"completion/complete", {&Impl::Complete, false}},
      {"server/discover", {&Impl::Discover, true}},
      {"tasks/get", {&Impl::GetTask, false}},
      {"tasks/update", {&Impl::UpdateTask, false}},
      {"tasks/cancel", {&Impl::CancelTask, false}},
  };
  return *table;
}

// ---- lifecycle ----

Json Session::Impl::Initialize(const Json& params, Context& ctx) {
  std::string requested = StringParam(params, "protocolVersion");
  auto caps = params.find("capabilities");
  if (caps == params.end() || !caps->is_object()) BadParams("\"capabilities\" must be an object");
  auto info = params.find("clientInfo");
  if (info == params.end() || !info->is_object() || !info->contains("name") ||
      !(*info)["name"].is_string()) {
    BadParams("\"clientInfo\" must be an object with a string \"name\"");
  }
  const auto& supported = kProtocolVersions;
  bool known = std::find_if(std::begin(supported), std::end(supported),
                            [&](const char* v) { return requested == v; }) != std::end(supported);
  std::string negotiated = known ? requested : kLatestProtocolVersion;
  {
    std::lock_guard lock(mu);
    if (phase != Phase::kNew) {
      throw RpcException(kInvalidRequest, "Invalid Request: initialize was already called");
    }
    phase = Phase::kInitialized;
    version = negotiated;
    client_info = *info;
    client_capabilities = *caps;
  }
  const ServerOptions& hooks = server->options;
  if (hooks.on_session_started) {
    if (std::string refused = hooks.on_session_started(ctx.session()); !refused.empty()) {
      std::lock_guard lock(mu);
      phase = Phase::kNew;
      throw RpcException(kInternalError, refused);
    }
    std::lock_guard lock(mu);
    started_hook = true;
  }
  log::Info(id + ": initialized by " + info->dump() + ", protocol " + negotiated +
            (known ? "" : " (client asked for " + requested + ")"));
  const ServerOptions& o = server->options;
  Json server_info = {{"name", o.name}, {"version", o.version}};
  if (!o.title.empty()) server_info["title"] = o.title;
  Json result = {{"protocolVersion", negotiated},
                 {"capabilities", server->Capabilities()},
                 {"serverInfo", server_info}};
  std::string instructions =
      o.session_instructions ? o.session_instructions(ctx.session()) : o.instructions;
  if (!instructions.empty()) result["instructions"] = std::move(instructions);
  return result;
}

Json Session::Impl::Ping(const Json&, Context&) { return Json::object(); }

Json Session::Impl::SetLevel(const Json& params, Context&) {
  if (!server->options.enable_logging) {
    throw RpcException(kMethodNotFound, "Method not found: logging/setLevel (logging disabled)");
  }
  std::string name = StringParam(params, "level");
  auto parsed = ParseLogLevel(name);
  if (!parsed) {
    BadParams("unknown log level \"" + name +
              "\" (expected debug, info, notice, warning, error, critical, alert or emergency)");
  }
  std::lock_guard lock(mu);
  level = *parsed;
  return Json::object();
}

// ---- tools ----

Json Session::Impl::ListTools(const Json& params, Context& ctx) {
  std::vector<std::shared_ptr<const Tool>> tools;
  {
    std::shared_lock lock(server->registry_mu);
    tools = server->tools;
  }
  // The filters run without the registry lock: they are the embedder's code.
  const auto& filter = server->options.tool_filter;
  const auto& listed = server->options.tool_listed;
  const bool new_era = ctx.session().protocol_version() == era2026::kVersion;
  std::vector<Json> items;
  for (const auto& t : tools) {
    if (filter && !filter(ctx.session(), t->name)) continue;
    if (listed && !listed(ctx.session(), t->name)) continue;  // list-only: still callable
    items.push_back(t->ToJson(new_era));
  }
  return Paginate(std::move(items), params, "tools", "tools", server->options.page_size);
}

Json Session::Impl::CallTool(const Json& params, Context& ctx) {
  std::string name = StringParam(params, "name");
  auto tool = server->FindTool(name);
  // A tool the session's filter refuses is answered exactly like an unregistered one.
  const auto& filter = server->options.tool_filter;
  const bool refused = tool && filter && !filter(ctx.session(), name);
  if (tool && server->options.on_tool_call) {
    server->options.on_tool_call(ctx.session(), name, refused);
  }
  if (refused) tool = nullptr;
  if (!tool) throw RpcException(kInvalidParams, "Unknown tool: " + name, {{"name", name}});
  Json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"]
                                                                             : Json::object();
  if (auto errors = tool->allow_non_flat_schema
                        ? std::vector<std::string>{}
                        : ValidateJson(tool->InputSchema(ctx.session().protocol_version() ==
                                                         era2026::kVersion),
                                       args, "arguments");
      !errors.empty()) {
    return ToolResult::Error("Invalid arguments for tool " + name + ": " + JoinErrors(errors))
        .ToJson();
  }
  if (tool->task_support != TaskSupport::kForbidden && ctx.era_2026()) {
    if (DeclaresTasks(ctx.client_capabilities())) return CallToolAsTask(tool, args, ctx);
    if (tool->task_support == TaskSupport::kRequired) {
      throw RpcException(MissingTasksExtension("tool " + name + " answers only with a task"));
    }
  }
  return RunTool(*tool, args, ctx);
}

Json Session::Impl::RunTool(const Tool& tool, const Json& args, Context& ctx) {
  const std::string& name = tool.name;
  ToolResult result;
  try {
    result = tool.handler(args, ctx);
  } catch (const RpcException&) {
    throw;
  } catch (const std::exception& e) {
    log::Info(id + ": tool " + name + " threw: " + e.what());
    return ToolResult::Error("Tool " + name + " failed: " + e.what()).ToJson();
  }
  if (!result.is_error && !tool.output_schema.is_null() && server->options.validate_tool_output) {
    if (result.structured_content.is_null()) {
      return ToolResult::Error("Tool " + name +
                               " declares an outputSchema but returned no structuredContent")
          .ToJson();
    }
    auto errors = ValidateJson(tool.output_schema, result.structured_content, "structuredContent");
    if (!errors.empty()) {
      log::Error(id + ": tool " + name + " broke its outputSchema: " + JoinErrors(errors));
      return ToolResult::Error("Tool " + name +
                               " returned output that does not match its "
                               "outputSchema: " +
                               JoinErrors(errors))
          .ToJson();
    }
  }
  return result.ToJson();
}

// ---- resources ----

Json Session::Impl::ListResources(const Json& params, Context& ctx) {
  // The registered resources come first (cursor "resources:N"), then the session's own from
  // the session_resources hook (cursor "session:" + the hook's cursor).
  const auto& session_resources = server->options.session_resources;
  const size_t page_size = std::max<size_t>(server->options.page_size, 1);
  std::optional<std::string> session_cursor;
  if (auto c = params.find("cursor"); session_resources && c != params.end() && c->is_string()) {
    auto decoded = mcpcell::Base64Decode(c->get<std::string>());
    if (decoded && decoded->rfind("session:", 0) == 0) session_cursor = decoded->substr(8);
  }
  Json result;
  if (session_cursor) {
    result = {{"resources", Json::array()}};
  } else {
    std::vector<Json> items;
    {
      std::shared_lock lock(server->registry_mu);
      for (const auto& r : server->resources) items.push_back(r->ToJson());
    }
    result = Paginate(std::move(items), params, "resources", "resources", page_size);
    if (!session_resources || result.contains("nextCursor")) return result;
    session_cursor = "";
  }
  const size_t room = page_size - std::min(page_size, result["resources"].size());
  if (room == 0) {  // the registered ones filled this page: the session's start on the next
    result["nextCursor"] = mcpcell::Base64Encode("session:");
    return result;
  }
  ServerOptions::SessionResourcePage page = session_resources(ctx, *session_cursor, room);
  for (size_t i = 0; i < page.resources.size() && i < room; ++i)
    result["resources"].push_back(page.resources[i].ToJson());
  if (!page.next_cursor.empty())
    result["nextCursor"] = mcpcell::Base64Encode("session:" + page.next_cursor);
  return result;
}

Json Session::Impl::ListResourceTemplates(const Json& params, Context&) {
  std::vector<Json> items;
  {
    std::shared_lock lock(server->registry_mu);
    for (const auto& t : server->templates) items.push_back(t->ToJson());
  }
  return Paginate(std::move(items), params, "templates", "resourceTemplates",
                  server->options.page_size);
}

Json Session::Impl::ReadResource(const Json& params, Context& ctx) {
  std::string uri = StringParam(params, "uri");
  ResourceReader reader;
  std::map<std::string, std::string> vars;
  {
    std::shared_lock lock(server->registry_mu);
    for (const auto& r : server->resources) {
      if (r->uri == uri) reader = r->read;
    }
    for (size_t i = 0; !reader && i < server->templates.size(); ++i) {
      vars.clear();
      if (MatchTemplate(server->templates[i]->uri_template, uri, vars)) {
        reader = server->templates[i]->read;
      }
    }
  }
  if (!reader) throw RpcException(kResourceNotFound, "Resource not found: " + uri, {{"uri", uri}});
  Json contents = Json::array();
  for (const auto& c : reader(uri, vars, ctx)) contents.push_back(c.ToJson());
  return {{"contents", contents}};
}

Json Session::Impl::Subscribe(const Json& params, Context&) {
  if (!server->options.resource_subscriptions) {
    throw RpcException(kMethodNotFound, "Method not found: resources/subscribe (not enabled)");
  }
  std::string uri = StringParam(params, "uri");
  std::lock_guard lock(mu);
  subscriptions.insert(uri);
  return Json::object();
}

Json Session::Impl::Unsubscribe(const Json& params, Context&) {
  if (!server->options.resource_subscriptions) {
    throw RpcException(kMethodNotFound, "Method not found: resources/unsubscribe (not enabled)");
  }
  std::string uri = StringParam(params, "uri");
  std::lock_guard lock(mu);
  subscriptions.erase(uri);
  return Json::object();
}

// ---- prompts ----

namespace {
// A 2026-07-28 client learns from server/discover whether prompts are served; a server that
// does not declare them there does not answer their methods either (the spec's
// ServerDeclaresPromptsInDiscover). Today's era keeps answering an empty list.
void RequirePromptsInNewEra(const Json& capabilities, const Context& ctx) {
  if (ctx.era_2026() && !capabilities.contains("prompts")) {
    throw RpcException(kMethodNotFound,
                       "Method not found: this server offers no prompts (server/discover "
                       "does not declare the prompts capability)");
  }
}
}  // namespace

Json Session::Impl::ListPrompts(const Json& params, Context& ctx) {
  RequirePromptsInNewEra(server->Capabilities(), ctx);
  std::vector<Json> items;
  {
    std::shared_lock lock(server->registry_mu);
    for (const auto& p : server->prompts) items.push_back(p->ToJson());
  }
  return Paginate(std::move(items), params, "prompts", "prompts", server->options.page_size);
}

Json Session::Impl::GetPrompt(const Json& params, Context& ctx) {
  RequirePromptsInNewEra(server->Capabilities(), ctx);
  std::string name = StringParam(params, "name");
  auto prompt = server->FindPrompt(name);
  if (!prompt) throw RpcException(kInvalidParams, "Unknown prompt: " + name, {{"name", name}});
  std::map<std::string, std::string> args;
  if (auto a = params.find("arguments"); a != params.end() && !a->is_null()) {
    if (!a->is_object()) BadParams("\"arguments\" must be an object of strings");
    for (auto it = a->begin(); it != a->end(); ++it) {
      bool declared = std::any_of(prompt->arguments.begin(), prompt->arguments.end(),
                                  [&](const PromptArgument& d) { return d.name == it.key(); });
      if (!declared) BadParams("prompt " + name + " has no argument \"" + it.key() + "\"");
      if (!it->is_string()) BadParams("argument \"" + it.key() + "\" must be a string");
      args[it.key()] = it->get<std::string>();
    }
  }
  for (const auto& d : prompt->arguments) {
    if (d.required && !args.count(d.name)) {
      BadParams("prompt " + name + " requires argument \"" + d.name + "\"");
    }
  }
  return prompt->handler(args, ctx).ToJson();
}

// ---- completion ----

Json Session::Impl::Complete(const Json& params, Context& ctx) {
  std::shared_ptr<const CompletionHandler> handler;
  {
    std::shared_lock lock(server->registry_mu);
    handler = server->completion;
  }
  if (!handler) throw RpcException(kMethodNotFound, "Method not found: completion/complete");
  CompletionRequest request;
  auto ref = params.find("ref");
  if (ref == params.end() || !ref->is_object() || !ref->contains("type") ||
      !(*ref)["type"].is_string()) {
    BadParams("\"ref\" must be an object with a string \"type\"");
  }
  std::string type = (*ref)["type"];
  if (type != "ref/prompt" && type != "ref/resource") {
    BadParams("\"ref.type\" must be \"ref/prompt\" or \"ref/resource\"");
  }
  request.ref = *ref;
  auto arg = params.find("argument");
  if (arg == params.end() || !arg->is_object()) BadParams("\"argument\" must be an object");
  request.argument_name = StringParam(*arg, "name");
  request.argument_value = StringParam(*arg, "value");
  if (auto c = params.find("context"); c != params.end() && c->is_object()) {
    if (auto a = c->find("arguments"); a != c->end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) {
        if (it->is_string()) request.context_arguments[it.key()] = it->get<std::string>();
      }
    }
  }
  CompletionResult result = (*handler)(request, ctx);
  Json values = Json::array();
  for (size_t i = 0; i < result.values.size() && i < 100; ++i) values.push_back(result.values[i]);
  Json completion = {{"values", values},
                     {"hasMore", result.has_more || result.values.size() > 100}};
  if (result.total) completion["total"] = *result.total;
  return {{"completion", completion}};
}

}  // namespace mcp
