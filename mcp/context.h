// Context: what a request handler can see and do while it serves one request. It is a
// cheap copyable handle (it keeps the session and the request's state alive), so a
// handler may hand it to other threads.
//
//   cancelled() / OnCancel(fn)  the client sent notifications/cancelled for this request
//                               (or the session is closing); the response is then dropped.
//   Log(level, data)            notifications/message, if the session's level lets it through.
//   Progress(p, total, msg)     notifications/progress, if the request had a progressToken.
//   SendRequest(...)            a server->client request (sampling/createMessage,
//                               elicitation/create, roots/list, ...); today's era only.
//
// In the 2026-07-28 era (era2026.h) the same calls follow that era's rules: Log sends only
// when the request's _meta asked for a log level, at or above it; Progress and Log travel
// with the request; SendRequest fails at once (the era has no server->client requests).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "mcp/types.h"

namespace mcp {

class Session;

// The client's answer to a server->client request: a result, or an error (which may be
// kRequestTimeout or kConnectionClosed, produced locally).
struct ClientResponse {
  Json result{};
  std::optional<RpcError> error{};
  bool ok() const { return !error.has_value(); }
};
using ResponseCallback = std::function<void(ClientResponse)>;

// What Context::RequireInput throws: the handler's input requests and the state it wants
// back. Not a std::exception, so handlers' catch-alls let it through to the session.
struct InputRequired {
  Json input_requests;
  Json state;
};

inline constexpr std::chrono::milliseconds kDefaultRequestTimeout{60'000};

// The per-request state shared by the Context and the session (cancellation flag and
// callbacks). Internal; declared here so Context can hold it.
struct RequestState;

class Context {
 public:
  Context(std::shared_ptr<Session> session, std::shared_ptr<RequestState> request);

  // The request's id and method, and params._meta (null when absent).
  const Json& request_id() const;
  const std::string& method() const;
  const Json& meta() const;

  // Cancellation. OnCancel runs `fn` once on cancellation (on the thread that cancels), or
  // immediately if already cancelled. Callbacks must be quick and must not block.
  bool cancelled() const;
  void OnCancel(std::function<void()> fn);

  // notifications/message at `level`, filtered by the session's logging/setLevel.
  void Log(LogLevel level, Json data, const std::string& logger = "") const;
  // notifications/progress for this request's progressToken; false (nothing sent) if the
  // request had none. `total` <= 0 and an empty message are omitted.
  bool Progress(double progress, double total = 0, const std::string& message = "") const;

  // The client capabilities that hold for this request: its _meta's in the 2026-07-28 era,
  // the initialize's otherwise.
  Json client_capabilities() const;
  // Throws RpcException with the missing-capability error (-32021, data.requiredCapabilities
  // {name: {}}) when client_capabilities() lacks `name`; `why` says what needed it.
  void RequireClientCapability(const std::string& name, const std::string& why) const;

  // Multi-round requests (2026-07-28; tools/call, prompts/get, resources/read). A handler
  // that needs the client (an elicitation, a sampling, its roots) calls RequireInput with
  // {key: {method, params}} and any state it wants back; the client answers with a retry
  // carrying input_responses() {key: result} and that state, request_state(), which the
  // server sealed (RequestStateMac) and has verified. Both are null on a first call.
  // RequireInput does not return; in today's era it throws RpcException (use SendRequest).
  const Json& input_responses() const;
  const Json& request_state() const;
  [[noreturn]] void RequireInput(Json input_requests, Json state = nullptr) const;

  // A server->client request. `done` runs exactly once: with the client's response, or an
  // error on timeout (the client is then sent notifications/cancelled), on session close,
  // or when this request is cancelled.
  void SendRequest(const std::string& method, Json params, ResponseCallback done,
                   std::chrono::milliseconds timeout = kDefaultRequestTimeout) const;
  // Blocking form of SendRequest for synchronous handlers.
  ClientResponse SendRequestAndWait(
      const std::string& method, Json params,
      std::chrono::milliseconds timeout = kDefaultRequestTimeout) const;

  // Whether this request speaks 2026-07-28 (era2026.h).
  bool era_2026() const;

  // The Tasks extension (tasks.h), for the handlers of task-capable tools. AwaitInput asks
  // the client for `input_requests` ({key: {method, params}}) and returns its answers
  // {key: result}: from this request's inputResponses when they answer every key (a retry);
  // else, in a call that may be a task, the call answers with the task now (if it has not
  // yet), the task shows them as pending input requests, and AwaitInput blocks until
  // tasks/update answered them all (RpcException kRequestCancelled if the task is
  // cancelled meanwhile); else it does what RequireInput does. OnTaskInput runs `fn` with
  // every tasks/update's inputResponses (e.g. data for the program's stdin), on the thread
  // of that request; it must be quick. It never runs for a call that is not a task.
  Json AwaitInput(Json input_requests) const;
  void OnTaskInput(std::function<void(const Json& responses)> fn) const;

  Session& session() const { return *session_; }
  std::shared_ptr<Session> session_ptr() const { return session_; }

 private:
  friend const std::shared_ptr<RequestState>& RequestOf(const Context& ctx);
  std::shared_ptr<Session> session_;
  std::shared_ptr<RequestState> request_;
};

// The request state behind `ctx` (internal to mcp/).
const std::shared_ptr<RequestState>& RequestOf(const Context& ctx);

}  // namespace mcp
