// Server: ONE definition of an MCP server (identity, options, registries of tools,
// resources, prompts, custom methods) serving MANY Sessions, one per connected client.
// Registries may change while sessions run; sessions are then sent list_changed
// notifications. Requests run on the server's worker pool, concurrently.
//
//   mcp::Server server({.name = "demo", .version = "1.0"});
//   server.AddTool({.name = "echo", .input_schema = ..., .handler = ...});  // check Status
//   auto session = server.Connect(std::move(transport));   // starts serving
//   session->Wait();                                        // until the client goes away
//
// Ownership: the Server must outlive its Sessions' use; ~Server closes every session,
// cancels in-flight requests, waits for their handlers and joins the pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mcp/context.h"
#include "mcp/features.h"
#include "mcp/reply.h"
#include "mcp/transport.h"
#include "mcp/types.h"

namespace mcp {

class Session;

struct ServerOptions {
  std::string name = "mcp-server";  // serverInfo.name
  std::string version = "0.0.0";    // serverInfo.version
  std::string title{};              // serverInfo.title, optional
  std::string instructions{};       // initialize result's instructions, optional
  size_t page_size = 100;           // items per tools/list, resources/list, ... page
  size_t max_message_bytes = 16 * 1024 * 1024;
  // The worker pool. Handlers may block (a tool call waits seconds on its sandbox), so the
  // pool starts `worker_threads` threads and adds one whenever a task is posted while every
  // thread is taken, up to `max_worker_threads`: a busy session never leaves another
  // session's call waiting for a thread below that bound.
  size_t worker_threads = 16;
  size_t max_worker_threads = 512;
  // Worker-pool tasks (tool calls and the other handlers) one session may have running at once;
  // its further requests wait in the session's own queue, in order, holding no thread, and
  // start as its earlier ones finish. Bounds one session's share of the worker pool. 0: no limit.
  size_t max_session_tasks = 16;
  // Capabilities: a feature is advertised when something is registered, or when its
  // advertise_* flag is set (e.g. tools are registered later by another module).
  bool advertise_tools = false;
  bool advertise_resources = false;
  bool advertise_prompts = false;
  bool enable_logging = true;                           // logging{} + logging/setLevel
  bool resource_subscriptions = true;                   // resources.subscribe
  LogLevel default_client_log_level = LogLevel::kInfo;  // before logging/setLevel
  // When a client stops sending (stdin EOF) the requests in flight may finish and be
  // answered for this long; then they are cancelled and the session closes.
  std::chrono::milliseconds drain_timeout{30'000};
  // Optional, per session: whether `session` may see and call tool `tool_name`. tools/list
  // leaves out the tools it refuses and tools/call answers them as unknown tools, so a
  // refused tool looks exactly like one that is not registered. Called on handler threads,
  // concurrently: must be thread-safe, quick and must not block.
  std::function<bool(const Session& session, const std::string& tool_name)> tool_filter{};
  // Optional, per session, list-only: whether tools/list shows `session` tool `tool_name`
  // (asked only for tools tool_filter lets through). tools/call does not consult it, so a
  // tool it hides can still be called by name and answers as its handler does: for a tool
  // the session's configuration leaves nothing to do, whose call would only refuse, and
  // that a model should not be offered. Same threading rules as tool_filter.
  std::function<bool(const Session& session, const std::string& tool_name)> tool_listed{};
  // Optional, per session: the initialize result's instructions (instead of
  // `instructions`); empty = none. Same threading rules as tool_filter.
  std::function<std::string(const Session& session)> session_instructions{};
  // Optional, per session: resources that belong to one session (e.g. the files of its
  // sandbox), which resources/list pages through after the registered ones. Called with the
  // hook's own cursor ("" for its first page) and how many items the page has room for (at
  // least 1); returns those items and the hook's cursor for the next page ("" = no more).
  // The cursor is opaque to the client (wrapped in the list's own). May throw RpcException
  // (kInvalidParams for a cursor it did not make). Runs on a handler thread; may block
  // briefly (it reads the session's files).
  struct SessionResourcePage {
    std::vector<Resource> resources{};
    std::string next_cursor{};
  };
  std::function<SessionResourcePage(Context& ctx, const std::string& cursor, size_t limit)>
      session_resources{};
  // Optional lifecycle hooks (e.g. an audit trail). on_session_started runs once the
  // client's initialize is accepted, before it is answered (client_info() is set); a
  // non-empty return refuses the initialize with that message and the session stays
  // uninitialized. on_session_ended runs once when a session whose start was accepted
  // closes (on the closing thread). on_tool_call runs for each tools/call of a registered
  // tool, before its handler; `refused` when tool_filter refused it. Same threading rules
  // as tool_filter.
  std::function<std::string(const Session& session)> on_session_started{};
  std::function<void(const Session& session)> on_session_ended{};
  std::function<void(const Session& session, const std::string& tool_name, bool refused)>
      on_tool_call{};
  // Serve protocol version 2026-07-28 (mcp/era2026.h: requests without initialize, state in
  // handles) beside today's versions. An embedder whose tools keep per-session state (a
  // cell per session, say) turns it off until it can serve stateless requests: a request
  // of that era is then refused with kUnsupportedProtocolVersion naming today's versions
  // (stdio) or answered as today's requests without a session are (HTTP 400).
  bool serve_2026_era = true;
  // Check every structuredContent against its tool's outputSchema (a mismatch becomes an
  // isError result naming the field). On by default in debug builds.
#ifdef NDEBUG
  bool validate_tool_output = false;
#else
  bool validate_tool_output = true;
#endif
  // The Tasks extension (mcp/tasks.h), 2026-07-28 clients that declare it only: a call of a
  // task-capable tool still running after `task_threshold` answers with a task; a finished
  // task's result is kept `task_ttl` after its end; clients are told to poll every
  // `task_poll_interval`; a tenant may have at most `max_tasks_per_tenant` tasks (running,
  // or finished and kept), further calls are refused with an error saying so. 0: no cap.
  std::chrono::milliseconds task_threshold{1'000};
  std::chrono::milliseconds task_ttl{3'600'000};
  std::chrono::milliseconds task_poll_interval{1'000};
  size_t max_tasks_per_tenant = 64;
};

// A custom request method (extensions, tests). Params are as received (object, array or
// null). Reply whenever the work is done, from any thread; a dropped Reply answers -32603.
using RequestHandler = std::function<void(const Json& params, Context ctx, Reply reply)>;
using NotificationHandler = std::function<void(const Json& params, Session& session)>;

class Server {
 public:
  explicit Server(ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const ServerOptions& options() const;

  // Registration. Each checks its input (names, uniqueness, flat schemas, handler set) and
  // says why it refused. Tool/resource/prompt changes notify running sessions.
  Status AddTool(Tool tool);
  bool RemoveTool(const std::string& name);
  Status AddResource(Resource resource);
  bool RemoveResource(const std::string& uri);
  Status AddResourceTemplate(ResourceTemplate resource_template);
  Status AddPrompt(Prompt prompt);
  bool RemovePrompt(const std::string& name);
  void SetCompletionHandler(CompletionHandler handler);  // enables completions{}
  // A method outside the built-in set (refused for built-in names and "notifications/*").
  Status AddRequestHandler(const std::string& method, RequestHandler handler);
  Status AddNotificationHandler(const std::string& method, NotificationHandler handler);

  // Starts serving one client over `transport`; the session lives until the transport
  // closes or Close() is called. `tenant` is who the transport authenticated (e.g. the
  // HTTP bearer token's tenant), fixed for the session's life; empty when none.
  std::shared_ptr<Session> Connect(std::unique_ptr<Transport> transport, std::string tenant = {});

  // notifications/resources/updated {uri} to every session subscribed to `uri`.
  void NotifyResourceUpdated(const std::string& uri);
  // A notification to every initialized session (e.g. custom list_changed).
  void Broadcast(const std::string& method, const Json& params);

  // The capabilities object an initialize result would carry now.
  Json Capabilities() const;
  std::vector<std::shared_ptr<Session>> Sessions() const;
  // The live session with this id (Session::id()), or nullptr once it has closed (or never
  // was). For work that arrives outside any request, e.g. a log line for one client.
  std::shared_ptr<Session> FindSession(const std::string& session_id) const;

  // Closes all sessions, cancels in-flight work, waits for handlers. Idempotent.
  void Shutdown();

  // Checks `structured_content` against the output schema of tool `tool_name`; returns the
  // violations (empty = valid), or one entry saying the tool is unknown.
  std::vector<std::string> ValidateToolOutput(const std::string& tool_name,
                                              const Json& structured_content) const;

  // The input schema of tool `tool_name` that 2026-07-28 requests see (Tool::InputSchema);
  // null when there is none (the HTTP transport reads its x-mcp-header marks).
  Json ToolInputSchema(const std::string& tool_name) const;

  struct Impl;  // internal; sessions use it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace mcp
