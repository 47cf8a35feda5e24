// Session's requests to the client (Session::SendRequest): their ids and timeouts, and
// the client's responses matched to them. See session_impl.h.
#include "mcp/log.h"
#include "mcp/session.h"
#include "mcp/session_impl.h"
#include "mcp/transport.h"

namespace mcp {

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
    if (phase == Phase::kStateless) {
      // 2026-07-28 has no server->client requests: a handler asks the client through an
      // input_required result instead.
      lock.unlock();
      done(ClientResponse{nullptr,
                          RpcError{kMethodNotFound,
                                   "request " + method + " cannot be sent: protocol version " +
                                       era2026::kVersion + " has no server-to-client requests",
                                   nullptr}});
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

}  // namespace mcp
