#include "mcp/http_channel.h"

#include <chrono>

#include "mcp/log.h"

namespace mcp {

bool HttpChannel::Send(const Json& message, const Json* related_id) {
  std::string text = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::lock_guard lock(mu);
  if (closed) return false;
  std::shared_ptr<Stream> target;
  if (related_id != nullptr && !legacy) {
    // Sent while handling that request (a log line of a tool call): its own stream, as
    // long as the request is open there.
    auto it = by_request.find(jsonrpc::IdKey(*related_id));
    if (it != by_request.end()) target = Find(it->second);
  }
  bool is_response = message.is_object() && !message.contains("method") && message.contains("id");
  if (message.is_array()) {  // a batch response: to the stream of its first element
    for (const Json& r : message) {
      if (r.contains("id")) {
        auto it = by_request.find(jsonrpc::IdKey(r["id"]));
        if (it != by_request.end() && !target) target = Find(it->second);
      }
    }
    for (const Json& r : message) {
      if (r.contains("id")) ForgetRequest(jsonrpc::IdKey(r["id"]));
    }
  } else if (is_response) {
    std::string key = jsonrpc::IdKey(message["id"]);
    auto it = by_request.find(key);
    if (it != by_request.end()) target = Find(it->second);
    ForgetRequest(key);
  } else if (!target && message.value("method", "") == "notifications/progress") {
    const Json& params = message.contains("params") ? message["params"] : Json();
    if (params.is_object() && params.contains("progressToken")) {
      auto it = by_progress.find(params["progressToken"].dump());
      if (it != by_progress.end()) target = Find(it->second);
    }
  }
  if (legacy) target = Find(standalone_id);
  if (!target && !is_response && !message.is_array()) {
    auto standalone = Find(standalone_id);
    if (standalone && standalone->attached) {
      target = standalone;
    } else if (!post_order.empty()) {
      target = Find(post_order.back());
    } else {
      if (!standalone) standalone = NewStream(true);
      target = standalone;
    }
  }
  if (!target) {
    log::Warn("http: dropped a response with no open stream: " + text.substr(0, 200));
    return false;
  }
  Push(*target, text);
  if (target->finished()) Retire(target->id);
  return true;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace mcp
