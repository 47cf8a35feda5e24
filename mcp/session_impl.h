// Internal to mcp/: the state behind a Session and the per-request state behind a Context.
// Lock order: Session::Impl::mu, then RequestState::mu; callbacks (cancel, response) always
// run with no lock held.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mcp/era2026.h"
#include "mcp/jsonrpc.h"
#include "mcp/reply.h"
#include "mcp/server.h"
#include "mcp/server_impl.h"
#include "mcp/session.h"

namespace mcp {

struct RequestState {
  Json id;
  std::string key;  // jsonrpc::IdKey(id)
  std::string method;
  Json meta;  // params._meta or null
  // Set for a 2026-07-28 request: what its _meta says (capabilities, log level).
  std::optional<era2026::RequestMeta> era_meta;
  // A new-era retry of an input_required result: params.inputResponses (an object) and the
  // handler's state, opened and verified; null when the request carried none.
  Json input_responses;
  Json request_state;
  // Set when the call may become a task (tasks.h): the task the handler's Context reports
  // progress and asks input through. The handler then runs with a request state of its own,
  // which the session's close does not cancel. Weak: the task owns this state (Task::run_),
  // and the handler's run holds the task while it runs; a strong pointer back was a cycle
  // that kept every task and its request state alive (ASan's leak check).
  std::weak_ptr<Task> task;
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::vector<std::function<void()>> on_cancel;  // guarded by mu

  void Cancel();  // sets the flag and runs the callbacks once
  void OnCancel(std::function<void()> fn);
};

// Collects the responses of one batch and sends them as one array when the last is in.
struct Batch;

// Where a request's response goes: the transport, or its batch. nullopt = no response
// (the request was cancelled).
using ResponseOut = std::function<void(std::optional<Json>)>;

struct Session::Impl {
  Impl(std::shared_ptr<Server::Impl> server_impl, std::unique_ptr<Transport> t, std::string sid,
       std::string tenant_name = {});

  std::weak_ptr<Session> weak;  // set by Server::Connect
  std::shared_ptr<Server::Impl> server;
  std::unique_ptr<Transport> transport;
  const std::string id;
  const std::string tenant;  // Server::Connect's tenant; "" when none

  // kStateless: the connection speaks 2026-07-28 (era2026.h), chosen by its first request.
  enum class Phase { kNew, kInitialized, kStateless, kClosed };
  mutable std::mutex mu;
  std::condition_variable idle_cv;
  Phase phase = Phase::kNew;
  bool client_ready = false;  // notifications/initialized received
  bool started_hook = false;  // on_session_started accepted the session (guarded by mu)
  std::string version;
  Json client_info, client_capabilities;
  LogLevel level;
  std::set<std::string> subscriptions;
  std::map<std::string, std::shared_ptr<RequestState>> in_flight;
  size_t running_tasks = 0;
  // This session's share of the server's worker pool (ServerOptions::max_session_tasks): tasks
  // posted and not finished, and those waiting for one of them to finish, in order.
  size_t pool_tasks = 0;
  std::deque<std::function<void()>> waiting_tasks;
  bool draining = false;  // the peer sent EOF; close once idle
  struct Outgoing {
    std::string method;
    ResponseCallback done;
    std::shared_ptr<boost::asio::steady_timer> timer;
  };
  std::map<int64_t, Outgoing> outgoing;
  int64_t next_outgoing_id = 1;
  // Open subscriptions/listen requests (listen.cc), by request key: what each asked for,
  // and its Reply, held unanswered while the subscription lives.
  struct Listener {
    Json id;
    Json filter;  // the acknowledged SubscriptionFilter
    std::shared_ptr<Reply> reply;
  };
  std::map<std::string, Listener> listeners;

  // ---- intake, on the transport's thread (session_intake.cc; the lifecycle in
  // session.cc, dispatch and the worker pool in session_dispatch.cc) ----
  void OnText(const std::string& text);
  // Answers a message that could not be handled (id null unless `peek` read one). A
  // response (peek.response) is not answered: the request of ours it answers, if its id
  // was read, fails with `error` (rather than waiting for its timeout).
  void OnTransportError(const RpcError& error, const jsonrpc::Peek& peek = {});
  void OnTransportClosed();
  void OnPeerFinished();  // stdin EOF: drain, then close
  void CloseIfDrained();
  void HandleValue(const Json& value, const std::shared_ptr<Batch>& batch);
  void HandleRequest(jsonrpc::Request request, const ResponseOut& out);
  // The era checks of a request that arrives before initialize or on a new-era connection;
  // an error to answer, or nullopt to serve it. Takes mu.
  std::optional<RpcError> AdmitNewEra(const jsonrpc::Request& request, RequestState& state);
  // ---- input_required rounds (input_required.cc) ----
  // Checks and opens a retry's inputResponses and requestState into `state`.
  std::optional<RpcError> AdmitInputRound(const Json& params, RequestState& state) const;
  // The input_required result a handler asked for with Context::RequireInput.
  // (RequireInput throws it for new-era requests only.)
  Json InputRequiredResult(const std::string& method, const Json& params,
                           const InputRequired& need) const;
  void HandleNotification(const jsonrpc::Notification& notification);
  void HandleResponse(const jsonrpc::Response& response);
  void Dispatch(const std::shared_ptr<RequestState>& state, const Json& params, Reply reply);
  // ---- subscriptions/listen (listen.cc) ----
  void Listen(const std::shared_ptr<RequestState>& state, const Json& params, Reply reply);
  // Sends a list-changed or resource-updated notification to the listen streams that asked
  // for it; false when none did. ListensTo: whether one asked for updates of `uri`.
  bool NotifyListeners(const std::string& method, const Json& params);
  bool ListensTo(const std::string& uri) const;
  void RunCustom(const RequestHandler& handler, const Json& params, Context ctx,
                 const std::shared_ptr<Reply>& reply);
  void Finish(const std::shared_ptr<RequestState>& state, Json response, const ResponseOut& out);
  bool Send(const Json& message);
  // A notification that belongs to the client's request `related_id` (progress, log),
  // sent with it (Transport::SendRelated) in either era; false when not sent.
  bool NotifyRelated(const std::string& method, Json params, const Json& related_id);
  void TaskDone();
  void PostTask(std::function<void()> task);  // through the session's share of the worker pool
  void RunOnPool(std::function<void()> task, bool offer_to_transport = false);
  void PoolTaskDone();

  // ---- server->client requests (session_outgoing.cc) ----
  int64_t StartOutgoing(const std::string& method, Json params, ResponseCallback done,
                        std::chrono::milliseconds timeout);
  void FailOutgoing(int64_t outgoing_id, RpcError error, bool tell_client);

  // ---- built-in methods (methods.cc); each may throw RpcException ----
  using Method = Json (Impl::*)(const Json& params, Context& ctx);
  struct Builtin {
    Method method;
    bool on_reader_thread;  // quick and order-sensitive: answered inline
  };
  static const std::map<std::string, Builtin, std::less<>>& Builtins();
  Json Initialize(const Json& params, Context& ctx);
  Json Ping(const Json& params, Context& ctx);
  Json SetLevel(const Json& params, Context& ctx);
  Json ListTools(const Json& params, Context& ctx);
  Json CallTool(const Json& params, Context& ctx);
  Json ListResources(const Json& params, Context& ctx);
  Json ListResourceTemplates(const Json& params, Context& ctx);
  Json ReadResource(const Json& params, Context& ctx);
  Json Subscribe(const Json& params, Context& ctx);
  Json Unsubscribe(const Json& params, Context& ctx);
  Json ListPrompts(const Json& params, Context& ctx);
  Json GetPrompt(const Json& params, Context& ctx);
  Json Complete(const Json& params, Context& ctx);
  Json Discover(const Json& params, Context& ctx);  // server/discover (discover.cc)
  // The tool's handler on this thread, its failures mapped as tools/call maps them.
  Json RunTool(const Tool& tool, const Json& args, Context& ctx);
  // ---- the Tasks extension (task_methods.cc) ----
  // tools/call of a task-capable tool by a client that declared the extension.
  Json CallToolAsTask(const std::shared_ptr<const Tool>& tool, const Json& args, Context& ctx);
  Json GetTask(const Json& params, Context& ctx);
  Json UpdateTask(const Json& params, Context& ctx);
  Json CancelTask(const Json& params, Context& ctx);
};

}  // namespace mcp
