// Session's intake, on the transport's thread: parsing and routing of messages and
// batches, the exactly-once response path (Finish), and notifications from the client
// (initialized, cancelled, roots changed). See session_impl.h.
#include <exception>

#include "mcp/log.h"
#include "mcp/session.h"
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
  if (auto refused = AdmitNewEra(request, *state)) {
    out(jsonrpc::MakeError(request.id, *refused));
    return;
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

std::optional<RpcError> Session::Impl::AdmitNewEra(const jsonrpc::Request& request,
                                                   RequestState& state) {
  {
    std::lock_guard lock(mu);
    // Even an initialize: today's clients never put a protocol version in _meta.
    if (phase == Phase::kNew && era2026::StartsNewEra(request.method, request.params)) {
      if (!server->options.serve_2026_era) {
        Json supported = Json::array();
        for (const char* v : kProtocolVersions) supported.push_back(v);
        return RpcError{era2026::kUnsupportedProtocolVersion,
                        std::string("Unsupported protocol version ") + era2026::kVersion +
                            ": this server speaks " + supported.dump() +
                            ", which start with initialize",
                        {{"supported", supported}, {"requested", era2026::kVersion}}};
      }
      phase = Phase::kStateless;  // one connection, one era
      version = era2026::kVersion;
    }
    if (phase != Phase::kStateless) return std::nullopt;
  }
  if (era2026::IsRemovedMethod(request.method)) {
    return RpcError{kMethodNotFound,
                    "Method not found: " + request.method + " (not part of protocol version " +
                        era2026::kVersion + ", which needs no initialize; per-request _meta " +
                        "replaces it)",
                    nullptr};
  }
  auto parsed = era2026::ParseRequestMeta(request.params);
  if (auto* error = std::get_if<RpcError>(&parsed)) return *error;
  auto& meta = std::get<era2026::RequestMeta>(parsed);
  {
    std::lock_guard lock(mu);
    client_capabilities = meta.client_capabilities;
    client_info = meta.client_info;
  }
  state.era_meta = std::move(meta);
  return AdmitInputRound(request.params, state);
}

void Session::Impl::Finish(const std::shared_ptr<RequestState>& state, Json response,
                           const ResponseOut& out) {
  if (state->era_meta && response.contains("result")) {
    era2026::DecorateResult(state->method, response["result"]);
  }
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

}  // namespace mcp
