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
  session_->LogRelated(level, std::move(data), logger, &request_->id);
}

bool Context::Progress(double progress, double total, const std::string& message) const {
  if (!request_->meta.is_object()) return false;
  auto token = request_->meta.find("progressToken");
  if (token == request_->meta.end() || !jsonrpc::IsValidId(*token)) return false;
  Json params = {{"progressToken", *token}, {"progress", progress}};
  if (total > 0) params["total"] = total;
  if (!message.empty()) params["message"] = message;
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
