#include "mcp/reply.h"

#include <atomic>

#include "mcp/jsonrpc.h"
#include "mcp/log.h"

namespace mcp {

struct Reply::State {
  Json id;
  std::string method;
  Sink send;
  std::atomic<bool> done{false};

  // Claims the one reply; false (and a log line) if it was already given.
  bool Claim() {
    if (!done.exchange(true)) return true;
    log::Warn("second reply to request " + id.dump() + " (" + method + ") ignored");
    return false;
  }
};

Reply::Reply(Json id, std::string method, Sink send) : state_(std::make_unique<State>()) {
  state_->id = std::move(id);
  state_->method = std::move(method);
  state_->send = std::move(send);
}

Reply::Reply(Reply&&) noexcept = default;

Reply& Reply::operator=(Reply&& other) noexcept {
  if (this != &other) {
    Reply dying(std::move(*this));  // answers -32603 if it was still owed
    state_ = std::move(other.state_);
  }
  return *this;
}

Reply::~Reply() {
  if (!state_ || state_->done.exchange(true)) return;
  try {
    state_->send(
        jsonrpc::MakeError(state_->id, RpcError{kInternalError,
                                                "Internal error: the handler of \"" +
                                                    state_->method + "\" finished without replying",
                                                nullptr}));
  } catch (const std::exception& e) {
    log::Error(std::string("sending the fallback reply failed: ") + e.what());
  }
}

void Reply::Ok(Json result) {
  if (!state_ || !state_->Claim()) return;
  state_->send(jsonrpc::MakeResult(state_->id, std::move(result)));
}

void Reply::Fail(RpcError error) {
  if (!state_ || !state_->Claim()) return;
  state_->send(jsonrpc::MakeError(state_->id, error));
}

bool Reply::replied() const { return !state_ || state_->done.load(); }

const Json& Reply::id() const {
  static const Json kNull;
  return state_ ? state_->id : kNull;
}

}  // namespace mcp
