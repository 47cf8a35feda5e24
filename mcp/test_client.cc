#include "mcp/test_client.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "mcp/jsonrpc.h"
#include "mcp/memory_transport.h"
#include "mcp/server.h"
#include "mcp/session.h"

namespace mcp {

struct MemoryClient::Impl {
  std::unique_ptr<MemoryTransport> transport;
  std::shared_ptr<Session> session;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<Json> received;
  std::map<std::string, Json> responses;  // by IdKey
  std::set<std::string> our_ids;
  std::vector<Json> unmatched;
  std::vector<Json> notifications;
  RequestHandler handler;
  int64_t next_id = 1;
  bool reader_done = false;  // the transport's delivery thread has run its last callback

  void OnValue(const Json& m) {
    bool is_request = m.is_object() && m.contains("method") && m.contains("id");
    if (is_request) {
      Answer(m);
      return;
    }
    std::lock_guard lock(mu);
    if (m.is_object() && m.contains("method")) {
      notifications.push_back(m);
    } else if (m.is_object() && m.contains("id") && our_ids.count(jsonrpc::IdKey(m["id"]))) {
      responses[jsonrpc::IdKey(m["id"])] = m;
    } else {
      unmatched.push_back(m);
    }
    cv.notify_all();
  }

  void Answer(const Json& request) {
    RequestHandler h;
    {
      std::lock_guard lock(mu);
      h = handler;
    }
    Json response;
    try {
      if (!h)
        throw RpcException(kMethodNotFound,
                           "Method not found: " + request["method"].get<std::string>());
      response = jsonrpc::MakeResult(request["id"],
                                     h(request["method"], request.value("params", Json::object())));
    } catch (const RpcException& e) {
      response = jsonrpc::MakeError(request["id"], e.error());
    } catch (const std::exception& e) {
      response = jsonrpc::MakeError(request["id"], {kInternalError, e.what(), nullptr});
    }
    transport->Send(response);
  }
};

MemoryClient::MemoryClient(Server& server, size_t transport_limit, std::string tenant)
    : impl_(std::make_unique<Impl>()) {
  auto [client_end, server_end] = CreateMemoryTransportPair(transport_limit);
  impl_->transport = std::move(client_end);
  Impl* impl = impl_.get();
  TransportCallbacks callbacks;
  callbacks.on_message = [impl](std::string text) {
    Json m = Json::parse(text, nullptr, false);
    {
      std::lock_guard lock(impl->mu);
      impl->received.push_back(m);
    }
    if (m.is_array()) {
      // A batch response: each element is matched like a single response.
      for (const Json& e : m) impl->OnValue(e);
      std::lock_guard lock(impl->mu);
      impl->unmatched.push_back(m);  // the array itself too, so tests can see it was a batch
      impl->cv.notify_all();
    } else {
      impl->OnValue(m);
    }
  };
  callbacks.on_close = [impl] {
    std::lock_guard lock(impl->mu);
    impl->reader_done = true;
    impl->cv.notify_all();
  };
  impl_->transport->Start(std::move(callbacks));
  impl_->session = server.Connect(std::move(server_end), std::move(tenant));
}

MemoryClient::~MemoryClient() {
  Close();
  if (impl_->session) impl_->session->Wait();
  // The delivery thread may still be answering a server->client request through
  // impl_->transport (found by tests/fuzz/fuzz_jsonrpc): wait for its last callback before
  // the pointer goes; then the reset joins the finished thread.
  {
    std::unique_lock lock(impl_->mu);
    impl_->cv.wait(lock, [&] { return impl_->reader_done; });
  }
  impl_->transport.reset();
}

Json MemoryClient::Initialize(const std::string& protocol_version, bool send_initialized) {
  Json response =
      Request("initialize", {{"protocolVersion", protocol_version},
                             {"capabilities", Json::object()},
                             {"clientInfo", {{"name", "memory-client"}, {"version", "1.0"}}}});
  if (send_initialized) Notify("notifications/initialized");
  return response;
}

Json MemoryClient::Request(const std::string& method, Json params,
                           std::chrono::milliseconds timeout) {
  Json id;
  {
    std::lock_guard lock(impl_->mu);
    id = impl_->next_id++;
  }
  SendRequest(id, method, std::move(params));
  return WaitResponse(id, timeout);
}

void MemoryClient::SendRequest(const Json& id, const std::string& method, Json params) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->our_ids.insert(jsonrpc::IdKey(id));
  }
  impl_->transport->Send(jsonrpc::MakeRequest(id, method, std::move(params)));
}

Json MemoryClient::WaitResponse(const Json& id, std::chrono::milliseconds timeout) {
  std::string key = jsonrpc::IdKey(id);
  std::unique_lock lock(impl_->mu);
  impl_->our_ids.insert(key);
  if (!impl_->cv.wait_for(lock, timeout, [&] { return impl_->responses.count(key) > 0; })) {
    return nullptr;
  }
  Json r = std::move(impl_->responses[key]);
  impl_->responses.erase(key);
  return r;
}

void MemoryClient::Notify(const std::string& method, Json params) {
  impl_->transport->Send(jsonrpc::MakeNotification(method, std::move(params)));
}

void MemoryClient::SendJson(const Json& message) { impl_->transport->Send(message); }

void MemoryClient::SendRaw(const std::string& text) { impl_->transport->SendRaw(text); }

std::vector<Json> MemoryClient::Unmatched(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait_for(lock, timeout, [&] { return impl_->unmatched.size() >= count; });
  return impl_->unmatched;
}

std::vector<Json> MemoryClient::Notifications(const std::string& method, size_t count,
                                              std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  auto matching = [&] {
    std::vector<Json> out;
    for (const auto& n : impl_->notifications) {
      if (method.empty() || n["method"] == method) out.push_back(n);
    }
    return out;
  };
  impl_->cv.wait_for(lock, timeout, [&] { return matching().size() >= count; });
  return matching();
}

std::vector<Json> MemoryClient::Received() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

void MemoryClient::SetRequestHandler(RequestHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->handler = std::move(handler);
}

std::shared_ptr<Session> MemoryClient::session() const { return impl_->session; }

void MemoryClient::Close() { impl_->transport->Close(); }

}  // namespace mcp
