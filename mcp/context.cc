#include "mcp/context.h"

#include <future>

#include "mcp/jsonrpc.h"
#include "mcp/session_impl.h"

namespace mcp {

Context::Context(std::shared_ptr<Session> session, std::shared_ptr<RequestState> request)
    : session_(std::move(session)), request_(std::move(request)) {}

const Json& Context::request_id() const { return request_->id; }
const std::string& Context::method() const { return request_->method; }
const Json& Context::meta() const { return request_->meta; }

bool Context::cancelled() const { return request_->cancelled.load(); }

void Context::OnCancel(std::function<void()> fn) { request_->OnCancel(std::move(fn)); }

void Context::Log(LogLevel level, Json data, const std::string& logger) const {
  if (!request_->era_meta) {
    session_->LogRelated(level, std::move(data), logger, &request_->id);
    return;
  }
  // New era: no log level in _meta, no log messages.
  const auto& wanted = request_->era_meta->log_level;
  Session::Impl& impl = *session_->impl_;
  if (!impl.server->options.enable_logging || !wanted || level == LogLevel::kOff ||
      level < *wanted) {
    return;
  }
  Json params = {{"level", LogLevelName(level)}, {"data", std::move(data)}};
  if (!logger.empty()) params["logger"] = logger;
  impl.NotifyRelated("notifications/message", std::move(params), request_->id);
}

const std::shared_ptr<RequestState>& RequestOf(const Context& ctx) { return ctx.request_; }

bool Context::era_2026() const { return request_->era_meta.has_value(); }

Json Context::AwaitInput(Json input_requests) const {
  if (!input_requests.is_object() || input_requests.empty()) {
    throw RpcException(kInternalError, "a handler asked for client input without input requests");
  }
  const Json& given = request_->input_responses;
  bool all_given = given.is_object();
  for (const auto& [key, unused] : input_requests.items()) {
    all_given = all_given && given.contains(key);
  }
  if (all_given) {
    Json out = Json::object();
    for (const auto& [key, unused] : input_requests.items()) out[key] = given[key];
    return out;
  }
  if (auto task = request_->task.lock()) return task->AwaitInput(input_requests);
  RequireInput(std::move(input_requests));
}

void Context::OnTaskInput(std::function<void(const Json& responses)> fn) const {
  if (auto task = request_->task.lock()) task->OnInput(std::move(fn));
}

const Json& Context::input_responses() const { return request_->input_responses; }
const Json& Context::request_state() const { return request_->request_state; }

void Context::RequireInput(Json input_requests, Json state) const {
  if (!request_->era_meta) {
    throw RpcException(kInternalError,
                       "a handler asked for client input with an input_required result, which "
                       "only protocol version 2026-07-28 has; this session speaks " +
                           session_->protocol_version());
  }
  throw InputRequired{std::move(input_requests), std::move(state)};
}

Json Context::client_capabilities() const {
  if (request_->era_meta) return request_->era_meta->client_capabilities;
  return session_->client_capabilities();
}

void Context::RequireClientCapability(const std::string& name, const std::string& why) const {
  Json caps = client_capabilities();
  if (caps.is_object() && caps.contains(name)) return;
  throw RpcException(era2026::MissingCapability(name, why));
}

bool Context::Progress(double progress, double total, const std::string& message) const {
  if (auto task = request_->task.lock()) {
    // A task's client polls: the latest progress is its tasks/get statusMessage.
    std::string status = message;
    if (status.empty()) {
      status = "progress " + Json(progress).dump() + (total > 0 ? " of " + Json(total).dump() : "");
    }
    task->SetStatusMessage(std::move(status));
  }
  if (!request_->meta.is_object()) return false;
  auto token = request_->meta.find("progressToken");
  if (token == request_->meta.end() || !jsonrpc::IsValidId(*token)) return false;
  Json params = {{"progressToken", *token}, {"progress", progress}};
  if (total > 0) params["total"] = total;
  if (!message.empty()) params["message"] = message;
  if (request_->era_meta) {
    return session_->impl_->NotifyRelated("notifications/progress", std::move(params),
                                          request_->id);
  }
  return session_->Notify("notifications/progress", std::move(params));
}

void Context::SendRequest(const std::string& method, Json params, ResponseCallback done,
                          std::chrono::milliseconds timeout) const {
  Session::Impl& impl = *session_->impl_;
  int64_t oid = impl.StartOutgoing(method, std::move(params), std::move(done), timeout);
  if (oid == 0) return;
  // Cancelling the client's request abandons what it asked of the client in turn.
  std::weak_ptr<Session> weak = session_;
  request_->OnCancel([weak, oid, method] {
    if (auto s = weak.lock()) {
      s->impl_->FailOutgoing(
          oid,
          {kRequestCancelled,
           "request " + method + " abandoned: the request that made it was cancelled", nullptr},
          true);
    }
  });
}

ClientResponse Context::SendRequestAndWait(const std::string& method, Json params,
                                           std::chrono::milliseconds timeout) const {
  auto promise = std::make_shared<std::promise<ClientResponse>>();
  auto future = promise->get_future();
  SendRequest(
      method, std::move(params), [promise](ClientResponse r) { promise->set_value(std::move(r)); },
      timeout);
  return future.get();
}

}  // namespace mcp
