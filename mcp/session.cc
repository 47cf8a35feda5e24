// Session: its public face (state, notify and log, server->client requests, close and
// wait) and its lifecycle: start, drain after the peer's EOF, close. Intake is
// session_intake.cc, dispatch to handlers session_dispatch.cc, the requests the server
// sends the client session_outgoing.cc.
#include "mcp/session.h"

#include <exception>

#include "mcp/log.h"
#include "mcp/session_impl.h"
#include "mcp/transport.h"

namespace mcp {

// ---- lifecycle ----

Session::Impl::Impl(std::shared_ptr<Server::Impl> server_impl, std::unique_ptr<Transport> t,
                    std::string sid, std::string tenant_name)
    : server(std::move(server_impl)),
      transport(std::move(t)),
      id(std::move(sid)),
      tenant(std::move(tenant_name)),
      level(server->options.default_client_log_level) {}

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

void Session::Impl::OnTransportClosed() {
  auto keep = weak.lock();  // the server's reference is dropped below
  std::vector<std::shared_ptr<RequestState>> cancelled;
  std::map<int64_t, Outgoing> lost;
  // Requests still waiting for the session's share of the worker pool never start; destroyed
  // outside the lock (each one's token counts itself done, which locks mu).
  std::deque<std::function<void()>> never_started;
  bool fire_end = false;
  {
    std::lock_guard lock(mu);
    if (phase == Phase::kClosed) return;
    phase = Phase::kClosed;
    fire_end = started_hook;
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
  if (fire_end && server->options.on_session_ended && keep) {
    server->options.on_session_ended(*keep);
  }
  server->Forget(id);
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
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->subscriptions.count(uri) > 0) return true;
  }
  return impl_->ListensTo(uri);  // a new-era subscriptions/listen stream
}

bool Session::Notify(const std::string& method, Json params) {
  Impl::Phase phase;
  {
    std::lock_guard lock(impl_->mu);
    phase = impl_->phase;
  }
  // A new-era session hears notifications only through its subscriptions/listen streams.
  if (phase == Impl::Phase::kStateless) return impl_->NotifyListeners(method, params);
  if (phase != Impl::Phase::kInitialized) return false;
  return impl_->Send(jsonrpc::MakeNotification(method, std::move(params)));
}

bool Session::Impl::NotifyRelated(const std::string& method, Json params, const Json& related_id) {
  {
    std::lock_guard lock(mu);
    if (phase != Phase::kInitialized && phase != Phase::kStateless) return false;
  }
  return transport->SendRelated(jsonrpc::MakeNotification(method, std::move(params)), related_id);
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
