// Session: message intake and routing (on the transport's thread), the exactly-once
// response path, cancellation, server->client requests, close and wait.
#include "mcp/session.h"

#include <boost/asio/post.hpp>
#include <exception>

#include "mcp/log.h"
#include "mcp/session_impl.h"
#include "mcp/transport.h"

namespace mcp {

// ---- RequestState ----

void RequestState::Cancel() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mu);
    if (cancelled.exchange(true)) return;
    callbacks.swap(on_cancel);
  }
  for (auto& fn : callbacks) {
    try {
      fn();
    } catch (const std::exception& e) {
      log::Error("cancel callback of request " + id.dump() + " threw: " + e.what());
    }
  }
}

void RequestState::OnCancel(std::function<void()> fn) {
  {
    std::lock_guard lock(mu);
    if (!cancelled.load()) {
      on_cancel.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

// ---- Batch ----

struct Batch {
  std::mutex mu;
  std::vector<Json> responses;
  size_t pending = 1;  // the batch itself, released after its last element was read
  std::function<void(Json)> send;

  void Expect() {
    std::lock_guard lock(mu);
    ++pending;
  }
  void Deliver(std::optional<Json> response) {
    Json out;
    {
      std::lock_guard lock(mu);
      if (response) responses.push_back(std::move(*response));
      if (--pending != 0 || responses.empty()) return;
      out = Json(std::move(responses));
    }
    send(std::move(out));
  }
};

// ---- intake ----

Session::Impl::Impl(std::shared_ptr<Server::Impl> server_impl, std::unique_ptr<Transport> t,
                    std::string sid, std::string tenant_name)
    : server(std::move(server_impl)),
      transport(std::move(t)),
      id(std::move(sid)),
      tenant(std::move(tenant_name)),
      level(server->options.default_client_log_level) {}

bool Session::Impl::Send(const Json& message) {
  if (log::Enabled(LogLevel::kDebug)) {
    log::Debug(id + " <- " + message.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  return transport->Send(message);
}

void Session::Impl::OnTransportError(const RpcError& error, const jsonrpc::Peek& peek) {
  if (peek.response) {
    log::Warn(id + ": dropped a response from the client (" + peek.id.dump() +
              "): " + error.message);
    if (!peek.id.is_null()) {
      RpcError failed = error;
      failed.message = "the client's response could not be read: " + error.message;
      HandleResponse(jsonrpc::Response{peek.id, nullptr, std::move(failed)});
    }
    return;
  }
  Send(jsonrpc::MakeError(peek.id, error));
}

void Session::Impl::OnText(const std::string& text) {
  size_t limit = server->options.max_message_bytes;
  if (limit && text.size() > limit) {
    OnTransportError(
        RpcError{kInvalidRequest,
                 "Invalid Request: message of " + std::to_string(text.size()) +
                     " bytes exceeds the maximum message size of " + std::to_string(limit) +
                     " bytes; send large data in smaller parts",
                 nullptr},
        jsonrpc::PeekMessageIn(text));
    return;
  }
  if (log::Enabled(LogLevel::kDebug)) log::Debug(id + " -> " + text.substr(0, 4096));
  auto parsed = jsonrpc::Parse(text);
  if (auto* error = std::get_if<RpcError>(&parsed)) {
    // Valid JSON refused (nested too deep) may still carry a readable id.
    OnTransportError(*error,
                     error->code == kParseError ? jsonrpc::Peek{} : jsonrpc::PeekMessageIn(text));
    return;
  }
  const Json& value = std::get<Json>(parsed);
  if (!value.is_array()) {
    HandleValue(value, nullptr);
    return;
  }
  std::string negotiated;
  {
    std::lock_guard lock(mu);
    negotiated = version;
  }
  if (value.empty()) {
    OnTransportError({kInvalidRequest, "Invalid Request: empty batch", nullptr});
    return;
  }
  if (negotiated != "2025-03-26") {
    OnTransportError({kInvalidRequest,
                      "Invalid Request: JSON-RPC batches are only supported in protocol version "
                      "2025-03-26 (this session: " +
                          (negotiated.empty() ? std::string("not initialized") : negotiated) + ")",
                      nullptr});
    return;
  }
  auto batch = std::make_shared<Batch>();
  std::weak_ptr<Session> w = weak;
  batch->send = [w](Json responses) {
    if (auto s = w.lock()) s->impl_->Send(responses);
  };
  for (const Json& element : value) HandleValue(element, batch);
  batch->Deliver(std::nullopt);
}

void Session::Impl::HandleValue(const Json& value, const std::shared_ptr<Batch>& batch) {
  ResponseOut out;
  if (batch) {
    out = [batch](std::optional<Json> r) { batch->Deliver(std::move(r)); };
  } else {
    std::weak_ptr<Session> w = weak;
    out = [w](std::optional<Json> r) {
      if (auto s = w.lock(); s && r) s->impl_->Send(*r);
    };
  }
  jsonrpc::Message message = jsonrpc::Classify(value);
  if (auto* invalid = std::get_if<jsonrpc::Invalid>(&message)) {
    if (!invalid->answer) {
      log::Warn(id + ": dropped a message from the client: " + invalid->error.message);
      return;
    }
    if (batch) batch->Expect();
    out(jsonrpc::MakeError(invalid->id, invalid->error));
  } else if (auto* request = std::get_if<jsonrpc::Request>(&message)) {
    if (batch) batch->Expect();
    if (batch && request->method == "initialize") {
      out(jsonrpc::MakeError(
          request->id,
          {kInvalidRequest, "Invalid Request: initialize must not be part of a batch", nullptr}));
      return;
    }
    HandleRequest(std::move(*request), out);
  } else if (auto* notification = std::get_if<jsonrpc::Notification>(&message)) {
    HandleNotification(*notification);
  } else {
    HandleResponse(std::get<jsonrpc::Response>(message));
  }
}

void Session::Impl::HandleRequest(jsonrpc::Request request, const ResponseOut& out) {
  auto state = std::make_shared<RequestState>();
  state->id = request.id;
  state->key = jsonrpc::IdKey(request.id);
  state->method = request.method;
  if (request.params.is_object()) {
    if (auto m = request.params.find("_meta"); m != request.params.end()) state->meta = *m;
  }
  {
    std::lock_guard lock(mu);
    if (phase == Phase::kClosed) return;
    if (phase == Phase::kNew && request.method != "initialize" && request.method != "ping") {
      out(jsonrpc::MakeError(request.id,
                             {kInvalidRequest,
                              "Invalid Request: server not initialized: send \"initialize\" "
                              "before \"" +
                                  request.method + "\"",
                              nullptr}));
      return;
    }
    if (!in_flight.emplace(state->key, state).second) {
      out(jsonrpc::MakeError(request.id, {kInvalidRequest,
                                          "Invalid Request: duplicate request id " + state->key +
                                              ": a request with this id is still in flight",
                                          nullptr}));
      return;
    }
  }
  std::weak_ptr<Session> w = weak;
  Reply reply(request.id, request.method, [w, state, out](Json response) {
    if (auto s = w.lock()) s->impl_->Finish(state, std::move(response), out);
  });
  Dispatch(state, request.params, std::move(reply));
}

void Session::Impl::Finish(const std::shared_ptr<RequestState>& state, Json response,
                           const ResponseOut& out) {
  bool drop;
  {
    std::lock_guard lock(mu);
    auto it = in_flight.find(state->key);
    if (it != in_flight.end() && it->second == state) in_flight.erase(it);
    // Per the spec a cancelled request gets no response.
    drop = state->cancelled.load() || phase == Phase::kClosed;
    // Wait() and WaitFor() need the closed phase; until then a wake-up is wasted (the
    // thread blocked in Wait() would run on every call just to sleep again).
    if (phase == Phase::kClosed) idle_cv.notify_all();
  }
  // Erased before sending, so a client that reuses the id right after the response is not
  // told it is a duplicate.
  out(drop ? std::nullopt : std::optional<Json>(std::move(response)));
  CloseIfDrained();
}

void Session::Impl::OnPeerFinished() {
  {
    std::lock_guard lock(mu);
    if (phase == Phase::kClosed) return;
    draining = true;
  }
  log::Info("session " + id + ": client finished sending; draining requests in flight");
  auto timer =
      std::make_shared<boost::asio::steady_timer>(server->io, server->options.drain_timeout);
  std::weak_ptr<Session> w = weak;
  timer->async_wait([w, timer](const boost::system::error_code& ec) {
    if (auto s = w.lock(); s && !ec) s->CloseAsync();
  });
  CloseIfDrained();
}

void Session::Impl::CloseIfDrained() {
  {
    std::lock_guard lock(mu);
    if (!draining || phase == Phase::kClosed || !in_flight.empty() || running_tasks != 0) return;
  }
  if (auto self = weak.lock()) self->CloseAsync();
}

namespace {
// Runs a built-in method, mapping exceptions to errors. Params: null -> {}.
void RunBuiltin(Session::Impl& impl, Session::Impl::Method method, const Json& params, Context& ctx,
                Reply& reply) {
  try {
    if (!params.is_null() && !params.is_object()) {
      throw RpcException(kInvalidParams, "Invalid params: \"params\" must be an object");
    }
    reply.Ok((impl.*method)(params.is_null() ? Json::object() : params, ctx));
  } catch (const RpcException& e) {
    reply.Fail(e.error());
  } catch (const std::exception& e) {
    reply.Fail(kInternalError, std::string("Internal error: ") + e.what());
  }
}
}  // namespace

void Session::Impl::Dispatch(const std::shared_ptr<RequestState>& state, const Json& params,
                             Reply reply) {
  auto self = weak.lock();
  if (!self) return;
  Context ctx(self, state);
  const auto& builtins = Builtins();
  auto builtin = builtins.find(state->method);
  std::shared_ptr<const RequestHandler> custom;
  if (builtin == builtins.end()) {
    custom = server->FindMethod(state->method);
    if (!custom) {
      reply.Fail(kMethodNotFound, "Method not found: " + state->method);
      return;
    }
  } else if (builtin->second.on_reader_thread) {
    RunBuiltin(*this, builtin->second.method, params, ctx, reply);
    return;
  }
  // Everything else runs on the worker pool. The token counts the task until it is destroyed, run
  // or not, so Wait() covers tasks dropped at shutdown too.
  {
    std::lock_guard lock(mu);
    ++running_tasks;
  }
  struct TaskToken {
    explicit TaskToken(std::shared_ptr<Session> s) : session(std::move(s)) {}
    TaskToken(const TaskToken&) = delete;
    TaskToken& operator=(const TaskToken&) = delete;
    ~TaskToken() { session->impl_->TaskDone(); }
    std::shared_ptr<Session> session;
  };
  auto token = std::make_shared<TaskToken>(self);
  auto shared_reply = std::make_shared<Reply>(std::move(reply));
  Method method = builtin == builtins.end() ? nullptr : builtin->second.method;
  PostTask([this, token, shared_reply, ctx, params, custom, method]() mutable {
    if (ctx.cancelled()) return;  // cancelled while queued: the dropped reply is discarded
    if (method) {
      RunBuiltin(*this, method, params, ctx, *shared_reply);
      return;
    }
    RunCustom(*custom, params, ctx, shared_reply);
  });
}

namespace {
// Passes a response envelope on to `reply`.
void Forward(Reply& reply, const Json& response) {
  if (!response.contains("error")) {
    reply.Ok(response.value("result", Json::object()));
    return;
  }
  const Json& e = response["error"];
  reply.Fail(RpcError{e.value("code", kInternalError), e.value("message", std::string()),
                      e.contains("data") ? e["data"] : Json()});
}
}  // namespace

void Session::Impl::RunCustom(const RequestHandler& handler, const Json& params, Context ctx,
                              const std::shared_ptr<Reply>& reply) {
  // The handler takes its Reply by value, so when it throws, that Reply dies during stack
  // unwinding and would answer a bare -32603 before we could see the exception. The
  // handler gets a forwarding Reply instead; a fallback produced while an exception is in
  // flight is held back so the catch below can answer with the exception's own error.
  auto held_back = std::make_shared<std::optional<Json>>();
  Reply forwarding(ctx.request_id(), ctx.method(), [reply, held_back](Json response) {
    if (std::uncaught_exceptions() > 0) {
      *held_back = std::move(response);
      return;
    }
    Forward(*reply, response);
  });
  try {
    handler(params, ctx, std::move(forwarding));
  } catch (const RpcException& e) {
    reply->Fail(e.error());  // ignored if the handler already replied
  } catch (const std::exception& e) {
    reply->Fail(kInternalError, std::string("Internal error: ") + e.what());
  }
  if (held_back->has_value()) Forward(*reply, **held_back);  // ignored if already replied
}

void Session::Impl::PostTask(std::function<void()> task) {
  size_t cap = server->options.max_session_tasks;
  {
    std::lock_guard lock(mu);
    if (cap != 0 && pool_tasks >= cap) {
      waiting_tasks.push_back(std::move(task));
      return;
    }
    ++pool_tasks;
  }
  RunOnPool(std::move(task), /*offer_to_transport=*/true);
}

// The task's own token keeps the session alive while it runs, and so `this`. A task of the
// message being delivered may run on the transport's thread that read it (AdoptTask);
// it still counts as one of the session's worker-pool tasks.
void Session::Impl::RunOnPool(std::function<void()> task, bool offer_to_transport) {
  std::function<void()> run = [this, task = std::move(task)]() mutable {
    struct Next {
      Impl* impl;
      ~Next() { impl->PoolTaskDone(); }
    } next{this};
    task();
  };
  if (offer_to_transport && transport && transport->AdoptTask(run)) return;
  server->Post(std::move(run));
}

// A finished task hands its place to the session's next waiting one.
void Session::Impl::PoolTaskDone() {
  std::function<void()> next;
  {
    std::lock_guard lock(mu);
    if (waiting_tasks.empty()) {
      --pool_tasks;
      return;
    }
    next = std::move(waiting_tasks.front());
    waiting_tasks.pop_front();
  }
  RunOnPool(std::move(next));
}

void Session::Impl::TaskDone() {
  {
    std::lock_guard lock(mu);
    --running_tasks;
    if (phase == Phase::kClosed) idle_cv.notify_all();  // see Finish
  }
  CloseIfDrained();
}

void Session::Impl::HandleNotification(const jsonrpc::Notification& n) {
  if (n.method == "notifications/initialized") {
    std::lock_guard lock(mu);
    if (phase == Phase::kInitialized) client_ready = true;
    return;
  }
  if (n.method == "notifications/cancelled") {
    if (!n.params.is_object() || !jsonrpc::IsValidId(n.params.value("requestId", Json()))) {
      log::Info(id + ": notifications/cancelled without a valid requestId ignored");
      return;
    }
    std::shared_ptr<RequestState> target;
    {
      std::lock_guard lock(mu);
      auto it = in_flight.find(jsonrpc::IdKey(n.params["requestId"]));
      if (it != in_flight.end() && it->second->method != "initialize") target = it->second;
    }
    if (!target) {
      log::Debug(id + ": cancel of unknown request " + n.params["requestId"].dump() + " ignored");
      return;
    }
    log::Info(id + ": request " + target->key +
              " cancelled: " + n.params.value("reason", std::string("no reason given")));
    target->Cancel();
    return;
  }
  auto handler = server->FindNotificationHandler(n.method);
  auto self = weak.lock();
  if (!handler || !self) {
    log::Debug(id + ": notification " + n.method + " ignored");
    return;
  }
  try {
    (*handler)(n.params, *self);
  } catch (const std::exception& e) {
    log::Error(id + ": handler of " + n.method + " threw: " + e.what());
  }
}

void Session::Impl::HandleResponse(const jsonrpc::Response& response) {
  Outgoing entry;
  {
    std::lock_guard lock(mu);
    auto it = response.id.is_number_integer() ? outgoing.find(response.id.get<int64_t>())
                                              : outgoing.end();
    if (it == outgoing.end()) {
      log::Info(id + ": response to unknown request " + response.id.dump() + " ignored");
      return;
    }
    entry = std::move(it->second);
    outgoing.erase(it);
  }
  if (entry.timer) entry.timer->cancel();
  entry.done(ClientResponse{response.result, response.error});
}

void Session::Impl::OnTransportClosed() {
  auto keep = weak.lock();  // the server's reference is dropped below
  std::vector<std::shared_ptr<RequestState>> cancelled;
  std::map<int64_t, Outgoing> lost;
  // Requests still waiting for the session's share of the worker pool never start; destroyed
  // outside the lock (each one's token counts itself done, which locks mu).
  std::deque<std::function<void()>> never_started;
  {
    std::lock_guard lock(mu);
    if (phase == Phase::kClosed) return;
    phase = Phase::kClosed;
    for (auto& [key, state] : in_flight) cancelled.push_back(state);
    lost.swap(outgoing);
    never_started.swap(waiting_tasks);
    idle_cv.notify_all();
  }
  log::Info("session " + id + " closed; cancelling " + std::to_string(cancelled.size()) +
            " request(s) in flight");
  for (auto& state : cancelled) state->Cancel();
  for (auto& [oid, entry] : lost) {
    if (entry.timer) entry.timer->cancel();
    entry.done(ClientResponse{
        nullptr, RpcError{kConnectionClosed,
                          "session closed before the client answered " + entry.method, nullptr}});
  }
  server->Forget(id);
}

// ---- server->client requests ----

int64_t Session::Impl::StartOutgoing(const std::string& method, Json params, ResponseCallback done,
                                     std::chrono::milliseconds timeout) {
  int64_t oid;
  {
    std::unique_lock lock(mu);
    if (phase == Phase::kClosed) {
      lock.unlock();
      done(ClientResponse{nullptr, RpcError{kConnectionClosed, "session is closed", nullptr}});
      return 0;
    }
    oid = next_outgoing_id++;
    auto timer = std::make_shared<boost::asio::steady_timer>(server->io, timeout);
    outgoing[oid] = Outgoing{method, std::move(done), timer};
    std::weak_ptr<Session> w = weak;
    timer->async_wait([w, oid, timer, timeout, method](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: answered or closed
      if (auto s = w.lock()) {
        s->impl_->FailOutgoing(
            oid,
            {kRequestTimeout,
             "request " + method + " timed out after " + std::to_string(timeout.count()) + " ms",
             nullptr},
            true);
      }
    });
  }
  Send(jsonrpc::MakeRequest(oid, method, std::move(params)));
  return oid;
}

void Session::Impl::FailOutgoing(int64_t oid, RpcError error, bool tell_client) {
  Outgoing entry;
  {
    std::lock_guard lock(mu);
    auto it = outgoing.find(oid);
    if (it == outgoing.end()) return;
    entry = std::move(it->second);
    outgoing.erase(it);
  }
  if (entry.timer) entry.timer->cancel();
  if (tell_client) {
    Send(jsonrpc::MakeNotification("notifications/cancelled",
                                   {{"requestId", oid}, {"reason", error.message}}));
  }
  entry.done(ClientResponse{nullptr, std::move(error)});
}

// ---- Session ----

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() {
  if (impl_->transport) impl_->transport->Close();
}

const std::string& Session::id() const { return impl_->id; }

const std::string& Session::tenant() const { return impl_->tenant; }

bool Session::initialized() const {
  std::lock_guard lock(impl_->mu);
  return impl_->phase == Impl::Phase::kInitialized;
}

bool Session::closed() const {
  std::lock_guard lock(impl_->mu);
  return impl_->phase == Impl::Phase::kClosed;
}

std::string Session::protocol_version() const {
  std::lock_guard lock(impl_->mu);
  return impl_->version;
}

Json Session::client_info() const {
  std::lock_guard lock(impl_->mu);
  return impl_->client_info;
}

Json Session::client_capabilities() const {
  std::lock_guard lock(impl_->mu);
  return impl_->client_capabilities;
}

LogLevel Session::log_level() const {
  std::lock_guard lock(impl_->mu);
  return impl_->level;
}

bool Session::IsSubscribed(const std::string& uri) const {
  std::lock_guard lock(impl_->mu);
  return impl_->subscriptions.count(uri) > 0;
}

bool Session::Notify(const std::string& method, Json params) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->phase != Impl::Phase::kInitialized) return false;
  }
  return impl_->Send(jsonrpc::MakeNotification(method, std::move(params)));
}

void Session::Log(LogLevel level, Json data, const std::string& logger) {
  LogRelated(level, std::move(data), logger, nullptr);
}

void Session::LogRelated(LogLevel level, Json data, const std::string& logger,
                         const Json* related_id) {
  if (!impl_->server->options.enable_logging || level == LogLevel::kOff) return;
  if (level < log_level()) return;
  Json params = {{"level", LogLevelName(level)}, {"data", std::move(data)}};
  if (!logger.empty()) params["logger"] = logger;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->phase != Impl::Phase::kInitialized) return;
  }
  Json message = jsonrpc::MakeNotification("notifications/message", std::move(params));
  if (related_id == nullptr) {
    (void)impl_->Send(message);
  } else {
    (void)impl_->transport->SendRelated(message, *related_id);
  }
}

void Session::SendRequest(const std::string& method, Json params, ResponseCallback done,
                          std::chrono::milliseconds timeout) {
  impl_->StartOutgoing(method, std::move(params), std::move(done), timeout);
}

void Session::CloseAsync() {
  impl_->transport->Close();
  impl_->OnTransportClosed();
}

void Session::Close() {
  CloseAsync();
  Wait();
  impl_->server->Forget(impl_->id);  // the closing thread may not have got there yet
}

void Session::Wait() {
  std::unique_lock lock(impl_->mu);
  impl_->idle_cv.wait(lock, [this] {
    return impl_->phase == Impl::Phase::kClosed && impl_->in_flight.empty() &&
           impl_->running_tasks == 0;
  });
}

bool Session::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  return impl_->idle_cv.wait_for(lock, timeout, [this] {
    return impl_->phase == Impl::Phase::kClosed && impl_->in_flight.empty() &&
           impl_->running_tasks == 0;
  });
}

}  // namespace mcp
