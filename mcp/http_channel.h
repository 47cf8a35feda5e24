// The inside of one HTTP session of HttpServer (internal to mcp/): its SSE streams (each
// POST's own, and the standalone GET stream), the routing of the session's outgoing
// messages to them (HttpChannel::Send), and the mcp::Transport the session's
// mcp::Session talks to (HttpSessionTransport).
// Threading: HttpChannel's state is guarded by its `mu`; the HTTP handler pool, the I/O
// threads writing its streams, the session's handlers and the housekeeper use it
// concurrently. Shared (shared_ptr) so
// callbacks and HTTP threads may outlive the transport object.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mcp/http_server.h"
#include "mcp/jsonrpc.h"
#include "mcp/session.h"
#include "mcp/transport.h"
#include "mcp/types.h"

namespace mcp {

// What a stream keeps for resumption (Last-Event-ID), and what waits for a slow reader: the
// newest events up to both bounds (the newest one always). A client that never reads loses
// the oldest events instead of growing the server.
constexpr size_t kMaxEventsPerStream = 1024;
constexpr size_t kMaxBytesPerStream = 1 << 20;
// ---- one SSE stream of a session ----

struct Stream {
  int id = 0;
  bool standalone = false;              // the GET stream
  std::map<std::string, Json> pending;  // id key -> id of requests still unanswered (POST)
  std::deque<std::pair<int, std::string>> events;  // seq -> SSE "data" payload
  size_t event_bytes = 0;                          // of events' payloads
  int next_seq = 1;
  int first_seq = 1;        // seq of events.front()
  bool attached = false;    // an HTTP connection is writing it
  uint64_t attach_gen = 0;  // a newer connection displaces an older one
  // Housekeeping of a POST stream without a connection (the client went away): since when
  // (0 = attached), and whether its unanswered requests were cancelled.
  int64_t unattached_since_ms = 0;
  bool cancelled = false;
  // Set by the connection writing this stream while it waits for events; called once
  // (under the channel's mu: it only posts to the connection's strand) when there is
  // something new: an event, the stream finished, the session closed, or a resumption.
  std::function<void()> wake;
  bool finished() const { return !standalone && pending.empty(); }
  void Wake() {
    if (!wake) return;
    std::function<void()> fn = std::move(wake);
    wake = nullptr;
    fn();
  }
};

// The Transport of one HTTP session; shared state so callbacks and HTTP threads may
// outlive the object.
struct HttpChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::mutex deliver_mu;  // on_message one at a time
  TransportCallbacks callbacks;
  bool closed = false;
  bool close_notified = false;
  bool legacy = false;     // HTTP+SSE (2024-11-05): everything goes to the one GET stream
  bool ephemeral = false;  // one 2026-07-28 request: its session ends with the answer
  std::map<int, std::shared_ptr<Stream>> streams;
  int next_stream = 1;
  int standalone_id = 0;
  std::map<std::string, int> by_request;           // id key -> stream
  std::map<std::string, int> by_progress;          // progressToken dump -> stream
  std::map<std::string, std::string> progress_of;  // id key -> token dump
  std::deque<int> post_order;                      // open POST streams, newest last

  // Under mu.
  std::shared_ptr<Stream> NewStream(bool standalone) {
    auto s = std::make_shared<Stream>();
    s->id = next_stream++;
    s->standalone = standalone;
    streams[s->id] = s;
    if (standalone) {
      standalone_id = s->id;
    } else {
      post_order.push_back(s->id);
    }
    return s;
  }
  std::shared_ptr<Stream> Find(int id) {
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second;
  }
  void Push(Stream& s, const std::string& data) {
    s.events.emplace_back(s.next_seq++, data);
    s.event_bytes += data.size();
    while (s.events.size() > 1 &&
           (s.events.size() > kMaxEventsPerStream || s.event_bytes > kMaxBytesPerStream)) {
      s.event_bytes -= s.events.front().second.size();
      s.events.pop_front();
      s.first_seq = s.events.front().first;
    }
    cv.notify_all();
    s.Wake();
  }
  void WakeAll() {
    for (auto& [id, s] : streams) s->Wake();
  }
  void Retire(int stream_id) {
    post_order.erase(std::remove(post_order.begin(), post_order.end(), stream_id),
                     post_order.end());
  }

  // Routes an outgoing message to a stream: a response to the stream of the POST that
  // carried its request; a progress notification to the stream of the request that gave
  // its progressToken; anything else (logging, list_changed, server->client requests) to
  // the standalone GET stream when one is open, else to the newest open POST stream, else
  // it waits in the GET stream's backlog. False when closed or no stream can take it.
  bool Send(const Json& message, const Json* related_id = nullptr);

  // Under mu.
  void ForgetRequest(const std::string& key) {
    auto it = by_request.find(key);
    if (it == by_request.end()) return;
    if (auto s = Find(it->second)) s->pending.erase(key);
    by_request.erase(it);
    if (auto p = progress_of.find(key); p != progress_of.end()) {
      by_progress.erase(p->second);
      progress_of.erase(p);
    }
  }

  // Per the spec a cancelled request gets no response, so nothing would ever finish its
  // stream: forget the requests that `items` cancel (their POST streams then end, and a
  // late answer is dropped).
  void ForgetCancelled(const std::vector<Json>& items) {
    std::lock_guard lock(mu);
    for (const Json& v : items) {
      if (!v.is_object() || v.value("method", "") != "notifications/cancelled") continue;
      const Json* params = v.contains("params") ? &v["params"] : nullptr;
      if (params && params->is_object() && params->contains("requestId")) {
        ForgetRequest(jsonrpc::IdKey((*params)["requestId"]));
      }
    }
    cv.notify_all();
    WakeAll();
  }

  size_t InFlight() {
    std::lock_guard lock(mu);
    return by_request.size();
  }

  void Close() {
    {
      std::lock_guard lock(mu);
      if (closed) return;
      closed = true;
      cv.notify_all();
      WakeAll();
    }
  }
};

class HttpSessionTransport : public Transport {
 public:
  explicit HttpSessionTransport(std::shared_ptr<HttpChannel> ch) : ch_(std::move(ch)) {}
  ~HttpSessionTransport() override { ch_->Close(); }
  void Start(TransportCallbacks callbacks) override {
    std::lock_guard lock(ch_->deliver_mu);
    ch_->callbacks = std::move(callbacks);
  }
  bool Send(const Json& message) override { return ch_->Send(message); }
  bool SendRelated(const Json& message, const Json& related_id) override {
    return ch_->Send(message, &related_id);
  }
  void Close() override {
    {
      std::lock_guard lock(ch_->mu);
      if (ch_->close_notified) return;
      ch_->close_notified = true;
    }
    ch_->Close();
    // on_close runs on its own thread: Close() may be called with session locks held.
    std::thread([ch = ch_] {
      std::function<void()> fn;
      {
        std::lock_guard lock(ch->deliver_mu);
        fn = ch->callbacks.on_close;
      }
      if (fn) fn();
    }).detach();
  }

 private:
  std::shared_ptr<HttpChannel> ch_;
};

struct HttpSessionEntry {
  std::string http_id;
  std::string tenant;
  HttpTenant quotas;
  std::shared_ptr<HttpChannel> channel;
  std::shared_ptr<Session> session;
  std::atomic<int> active{0};  // HTTP requests and open streams using it
  std::atomic<int64_t> last_used_ms{0};
};

int64_t NowMs();

}  // namespace mcp
