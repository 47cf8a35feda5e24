// Streamable HTTP for mcp::Server. See http_server.h for the protocol summary.
//
// Routing of outgoing messages (the Transport has one Send for all of them): a response
// goes to the stream of the POST that carried its request; a progress notification to the
// stream of the request that gave its progressToken; anything else (logging, list_changed,
// server->client requests) to the standalone GET stream when one is open, else to the
// newest open POST stream, else it waits in the GET stream's backlog.
// CPPHTTPLIB_OPENSSL_SUPPORT comes from the cpp-httplib pkg-config target (every TU alike).
#include "mcp/http_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "mcp/http_task_queue.h"
#include "mcp/jsonrpc.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/transport.h"

namespace mcp {
namespace {

constexpr auto kKeepAlive = std::chrono::seconds(15);
constexpr auto kInitTimeout = std::chrono::seconds(30);
// What a stream keeps for resumption (Last-Event-ID), and what waits for a slow reader: the
// newest events up to both bounds (the newest one always). A client that never reads loses
// the oldest events instead of growing the server.
constexpr size_t kMaxEventsPerStream = 1024;
constexpr size_t kMaxBytesPerStream = 1 << 20;
// How often a POST stream's connection is probed while its calls run: a client gone
// mid-call is noticed within about two probes (the first write after the peer closed
// still succeeds).
constexpr auto kPostProbe = std::chrono::seconds(1);

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// "host:port" / "[::1]:port" -> host (lower case, brackets kept for IPv6).
std::string HostPart(const std::string& host_header) {
  std::string h = Lower(host_header);
  if (!h.empty() && h[0] == '[') {
    size_t end = h.find(']');
    return end == std::string::npos ? h : h.substr(0, end + 1);
  }
  size_t colon = h.find(':');
  return colon == std::string::npos ? h : h.substr(0, colon);
}

bool IsSupportedVersion(const std::string& v) {
  for (const char* known : kProtocolVersions) {
    if (v == known) return true;
  }
  return false;
}

void JsonError(httplib::Response& res, int status, const std::string& message,
               int code = kInvalidRequest) {
  res.status = status;
  Json body = {
      {"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}};
  res.set_content(body.dump(), "application/json");
}

// 413 naming the tenant's limit when the body is over it; true when refused.
bool RefuseOversizedBody(const httplib::Request& req, httplib::Response& res,
                         const HttpTenant& tenant) {
  if (tenant.max_body_bytes == 0 || req.body.size() <= tenant.max_body_bytes) return false;
  JsonError(res, 413,
            "Payload Too Large: body of " + std::to_string(req.body.size()) +
                " bytes exceeds the limit of " + std::to_string(tenant.max_body_bytes) +
                " bytes (tenant " + tenant.name + ")");
  return true;
}

// Nested deeper than jsonrpc::kMaxNestingDepth: refused before it is parsed and copied
// (each level is a recursion there; 100,000 levels overflow a thread's stack).
bool RefuseTooDeepBody(const httplib::Request& req, httplib::Response& res) {
  if (!jsonrpc::NestedDeeperThan(req.body)) return false;
  JsonError(res, 400,
            "Invalid Request: JSON nested deeper than " +
                std::to_string(jsonrpc::kMaxNestingDepth) + " levels of arrays and objects",
            kInvalidRequest);
  return true;
}

// Binding is exclusive: only SO_REUSEADDR (a restart may bind while the previous server's
// connections linger in TIME_WAIT). cpp-httplib's default options set SO_REUSEPORT, which
// lets a second server of the same user bind the same address and take part of the
// connections, so sessions break at random.
void SetListenSocketOptions(int sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// "cannot listen on ADDR:PORT: why", from the errno of cpp-httplib's last bind(2) or
// listen(2); `made_socket` false when it never got as far as a socket (the host did not
// resolve).
std::string ListenFailure(const std::string& host, int port, int err, bool made_socket) {
  std::string addr = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                     (port == 0 ? std::string("<any port>") : std::to_string(port));
  std::string why;
  if (!made_socket) {
    why = "no socket could be made for it (is " + host + " an address of this host?)";
  } else if (err == EADDRINUSE) {
    why = "address already in use (another server, perhaps another mcpcell, is listening there)";
  } else if (err == EADDRNOTAVAIL) {
    why = "address not available (not an address of this host)";
  } else if (err == EACCES) {
    why = "permission denied (a port below 1024 needs privilege)";
  } else {
    const char* name = err != 0 ? strerrorname_np(err) : nullptr;
    why = std::string(name ? name : "unknown error") + " (" + std::strerror(err) + ")";
  }
  return "cannot listen on " + addr + ": " + why;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  std::string h = Lower(host);
  if (h == "localhost" || h == "::1" || h == "[::1]") return true;
  return h.rfind("127.", 0) == 0;
}

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
  bool finished() const { return !standalone && pending.empty(); }
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
  bool legacy = false;  // HTTP+SSE (2024-11-05): everything goes to the one GET stream
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
  }
  void Retire(int stream_id) {
    post_order.erase(std::remove(post_order.begin(), post_order.end(), stream_id),
                     post_order.end());
  }

  bool Send(const Json& message, const Json* related_id = nullptr) {
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

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct HttpServer::Impl {
  Server& server;
  HttpOptions opts;
  std::unique_ptr<httplib::Server> http;
  int bound_port = 0;
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<HttpSessionEntry>> sessions;
  std::atomic<bool> stopping{false};
  std::thread housekeeper;
  std::mutex hk_mu;
  std::condition_variable hk_cv;
  size_t max_body = 0;
  int listen_fd = -1;  // the listening socket cpp-httplib made (its last one that bound)

  Impl(Server& s, HttpOptions o) : server(s), opts(std::move(o)) {}

  // The mcp::Session's tenant: the authenticated tenant's name; "" without authentication
  // (every request is then default_tenant, which names no one).
  std::string SessionTenant(const HttpSessionEntry& entry) const {
    return opts.authenticate ? entry.tenant : std::string();
  }
  std::chrono::milliseconds IdleTimeout(const HttpSessionEntry& entry) const {
    return entry.quotas.idle_timeout.count() > 0 ? entry.quotas.idle_timeout : opts.idle_timeout;
  }

  // ---- checks ----
  bool CheckHostOrigin(const httplib::Request& req, httplib::Response& res) {
    bool loopback = IsLoopbackHost(opts.host);
    std::string host = HostPart(req.get_header_value("Host"));
    bool host_ok = (loopback && IsLoopbackHost(host)) ||
                   std::find(opts.allowed_hosts.begin(), opts.allowed_hosts.end(), host) !=
                       opts.allowed_hosts.end() ||
                   (!loopback && opts.allowed_hosts.empty());
    if (!host_ok) {
      JsonError(res, 403,
                "Forbidden: Host header \"" + host +
                    "\" is not allowed (DNS-rebinding "
                    "protection); add it to the allowed hosts");
      return false;
    }
    if (req.has_header("Origin")) {
      std::string origin = Lower(req.get_header_value("Origin"));
      bool ok = std::find(opts.allowed_origins.begin(), opts.allowed_origins.end(), origin) !=
                opts.allowed_origins.end();
      if (!ok && loopback) {
        for (const char* scheme : {"http://", "https://"}) {
          if (origin.rfind(scheme, 0) == 0 &&
              IsLoopbackHost(HostPart(origin.substr(std::string(scheme).size())))) {
            ok = true;
          }
        }
      }
      if (!ok) {
        JsonError(res, 403,
                  "Forbidden: Origin \"" + origin +
                      "\" is not allowed (DNS-rebinding "
                      "protection)");
        return false;
      }
    }
    return true;
  }

  std::optional<HttpTenant> Authenticate(const httplib::Request& req, httplib::Response& res) {
    if (!opts.authenticate) return opts.default_tenant;
    std::string auth = req.get_header_value("Authorization");
    if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") {
      if (auto tenant = opts.authenticate(auth.substr(7))) return tenant;
      res.set_header("WWW-Authenticate",
                     "Bearer realm=\"mcp\", error=\"invalid_token\", "
                     "error_description=\"the bearer token is not valid\"");
      JsonError(res, 401, "Unauthorized: the bearer token is not valid");
      return std::nullopt;
    }
    res.set_header("WWW-Authenticate", "Bearer realm=\"mcp\"");
    JsonError(res, 401, "Unauthorized: send \"Authorization: Bearer <token>\"");
    return std::nullopt;
  }

  // The session named by Mcp-Session-Id, for this tenant; else answers 400/404.
  std::shared_ptr<HttpSessionEntry> FindSession(const httplib::Request& req, httplib::Response& res,
                                                const HttpTenant& tenant) {
    if (!req.has_header("Mcp-Session-Id")) {
      JsonError(res, 400, "Bad Request: Mcp-Session-Id header is required (initialize first)");
      return nullptr;
    }
    std::string id = req.get_header_value("Mcp-Session-Id");
    std::shared_ptr<HttpSessionEntry> entry;
    {
      std::lock_guard lock(mu);
      auto it = sessions.find(id);
      if (it != sessions.end() && it->second->tenant == tenant.name) entry = it->second;
    }
    if (!entry || entry->session->closed()) {
      JsonError(res, 404, "Not Found: session not found or expired; initialize a new session",
                -32001);
      return nullptr;
    }
    if (req.has_header("MCP-Protocol-Version")) {
      std::string v = req.get_header_value("MCP-Protocol-Version");
      if (!IsSupportedVersion(v)) {
        JsonError(res, 400, "Bad Request: unsupported MCP-Protocol-Version \"" + v + "\"");
        return nullptr;
      }
    }
    entry->last_used_ms = NowMs();
    return entry;
  }

  size_t TenantSessions(const std::string& tenant) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (auto& [id, e] : sessions) n += e->tenant == tenant && !e->session->closed();
    return n;
  }

  // ---- SSE writing ----
  // Writes `stream` from seq `from` until it is finished (POST) or the connection or
  // session ends. `gen` identifies this connection.
  void WriteStream(const std::shared_ptr<HttpChannel>& ch, const std::shared_ptr<Stream>& st,
                   int from, uint64_t gen, const std::string& preamble, httplib::DataSink& sink) {
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    if (!preamble.empty() && !write(preamble)) return;
    int next = from;
    std::unique_lock lock(ch->mu);
    for (;;) {
      if (st->attach_gen != gen) return;  // displaced by a resumption
      bool wrote = false;
      while (true) {
        auto it = std::find_if(st->events.begin(), st->events.end(),
                               [&](const auto& e) { return e.first >= next; });
        if (it == st->events.end()) break;
        std::string frame = "id: " + std::to_string(st->id) + "_" + std::to_string(it->first) +
                            "\nevent: message\ndata: " + it->second + "\n\n";
        next = it->first + 1;
        lock.unlock();
        bool ok = write(frame);
        lock.lock();
        if (!ok) {
          if (st->attach_gen == gen) st->attached = false;
          return;
        }
        wrote = true;
      }
      (void)wrote;
      if (st->finished() || ch->closed || stopping) {
        if (st->attach_gen == gen) st->attached = false;
        if (st->finished() && !st->standalone) ch->streams.erase(st->id);
        lock.unlock();
        sink.done();
        return;
      }
      // A legacy session ends with its stream, and a POST stream's calls are cancelled when
      // its client is gone for good (Housekeep): probe those often so a gone client is
      // noticed; the standalone GET stream only needs keep-alives.
      auto probe = ch->legacy || !st->standalone ? kPostProbe : kKeepAlive;
      if (!ch->cv.wait_for(lock, probe, [&] {
            return st->attach_gen != gen || ch->closed || stopping || st->finished() ||
                   (!st->events.empty() && st->events.back().first >= next);
          })) {
        lock.unlock();
        bool ok = write(": keep-alive\n\n");
        lock.lock();
        if (!ok) {
          if (st->attach_gen == gen) st->attached = false;
          return;
        }
      }
    }
  }

  void ServeSse(httplib::Response& res, const std::shared_ptr<HttpSessionEntry>& entry,
                const std::shared_ptr<Stream>& st, int from, bool priming) {
    std::string preamble;
    if (priming) preamble = "id: " + std::to_string(st->id) + "_0\ndata: \n\n";
    if (entry->channel->legacy) {
      preamble = "event: endpoint\ndata: " + opts.legacy_messages_path +
                 "?sessionId=" + entry->http_id + "\n\n";
    }
    uint64_t gen;
    {
      std::lock_guard lock(entry->channel->mu);
      gen = ++st->attach_gen;
      st->attached = true;
      entry->channel->cv.notify_all();
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("Mcp-Session-Id", entry->http_id);
    ++entry->active;
    auto ch = entry->channel;
    std::weak_ptr<HttpSessionEntry> weak = entry;
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ch, st, from, gen, preamble](size_t, httplib::DataSink& sink) {
          WriteStream(ch, st, from, gen, preamble, sink);
          return true;
        },
        [this, weak, ch, st, gen](bool) {
          {
            std::lock_guard lock(ch->mu);
            if (st->attach_gen == gen) st->attached = false;
          }
          if (auto e = weak.lock()) {
            e->last_used_ms = NowMs();
            --e->active;
            // A legacy session lives as long as its one GET stream.
            if (ch->legacy) CloseSession(e, "SSE stream closed");
          }
        });
  }

  // ---- handlers ----
  void HandlePost(const httplib::Request& req, httplib::Response& res) {
    if (!CheckHostOrigin(req, res)) return;
    auto tenant = Authenticate(req, res);
    if (!tenant) return;
    std::string ctype = Lower(req.get_header_value("Content-Type"));
    if (ctype.rfind("application/json", 0) != 0) {
      JsonError(
          res, 415,
          "Unsupported Media Type: Content-Type must be application/json, got \"" + ctype + "\"");
      return;
    }
    std::string accept = Lower(req.get_header_value("Accept"));
    bool accepts_json = accept.find("application/json") != std::string::npos ||
                        accept.find("*/*") != std::string::npos;
    bool accepts_sse = accept.find("text/event-stream") != std::string::npos ||
                       accept.find("*/*") != std::string::npos;
    if (!accepts_json || !accepts_sse) {
      JsonError(res, 406,
                "Not Acceptable: Accept must list both application/json and "
                "text/event-stream");
      return;
    }
    if (RefuseOversizedBody(req, res, *tenant) || RefuseTooDeepBody(req, res)) return;
    Json body = Json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
      JsonError(res, 400, "Parse error: the body is not valid JSON", kParseError);
      return;
    }
    std::vector<Json> items;
    if (body.is_array()) {
      for (auto& v : body) items.push_back(v);
    } else {
      items.push_back(body);
    }
    if (items.empty() ||
        !std::all_of(items.begin(), items.end(), [](const Json& v) { return v.is_object(); })) {
      JsonError(res, 400,
                "Invalid Request: the body must be a JSON-RPC message or a non-empty "
                "array of them");
      return;
    }
    bool is_init =
        body.is_object() && body.value("method", "") == "initialize" && body.contains("id");
    if (is_init) {
      Initialize(req, res, *tenant, body);
      return;
    }
    auto entry = FindSession(req, res, *tenant);
    if (!entry) return;
    ++entry->active;
    struct Done {
      HttpSessionEntry& e;
      ~Done() {
        e.last_used_ms = NowMs();
        --e.active;
      }
    } done{*entry};
    std::vector<std::string> keys;
    for (const Json& v : items) {
      if (v.contains("method") && v.contains("id")) {
        // The answer to a request is routed to its stream by id. An id the session cannot
        // echo (it answers id null) or one already in flight would leave this POST waiting
        // for an answer that never comes to it.
        const Json& rid = v["id"];
        if (!jsonrpc::IsValidId(rid)) {
          JsonError(
              res, 400,
              "Invalid Request: a request id must be a string or an integer, got " + rid.dump());
          return;
        }
        keys.push_back(jsonrpc::IdKey(rid));
      }
      if (v.value("method", "") == "initialize") {
        JsonError(res, 400, "Invalid Request: this session is already initialized");
        return;
      }
    }
    auto& ch = entry->channel;
    {
      std::lock_guard lock(ch->mu);
      std::set<std::string> seen;
      for (const std::string& key : keys) {
        if (ch->by_request.count(key) || !seen.insert(key).second) {
          JsonError(res, 409,
                    "Conflict: request id " + key +
                        " is already in use by a request in flight in this session; use a new "
                        "id for each request");
          return;
        }
      }
    }
    if (keys.empty()) {  // notifications and responses only
      Deliver(*ch, req.body);
      ch->ForgetCancelled(items);
      res.status = 202;
      return;
    }
    if (entry->quotas.max_concurrent_calls &&
        ch->InFlight() + keys.size() > entry->quotas.max_concurrent_calls) {
      res.set_header("Retry-After", "1");
      JsonError(res, 429,
                "Too Many Requests: limit of " +
                    std::to_string(entry->quotas.max_concurrent_calls) +
                    " concurrent calls per session reached (tenant " + entry->tenant +
                    "); retry when a call has finished");
      return;
    }
    std::shared_ptr<Stream> st;
    {
      std::lock_guard lock(ch->mu);
      st = ch->NewStream(false);
      for (const Json& v : items) {
        if (!v.contains("method") || !v.contains("id")) continue;
        std::string key = jsonrpc::IdKey(v["id"]);
        st->pending[key] = v["id"];
        ch->by_request[key] = st->id;
        const Json* params = v.contains("params") ? &v["params"] : nullptr;
        if (params && params->is_object() && params->contains("_meta") &&
            (*params)["_meta"].is_object() && (*params)["_meta"].contains("progressToken")) {
          std::string token = (*params)["_meta"]["progressToken"].dump();
          ch->by_progress[token] = st->id;
          ch->progress_of[key] = token;
        }
      }
    }
    bool priming = entry->session->protocol_version() >= "2025-11-25";
    ServeSse(res, entry, st, 1, priming);
    Deliver(*ch, req.body);
    ch->ForgetCancelled(items);
  }

  void Deliver(HttpChannel& ch, const std::string& text) {
    std::lock_guard lock(ch.deliver_mu);
    if (ch.callbacks.on_message) ch.callbacks.on_message(text);
  }

  void Initialize(const httplib::Request& req, httplib::Response& res, const HttpTenant& tenant,
                  const Json& body) {
    if (req.has_header("Mcp-Session-Id")) {
      // Re-initializing within a session is not allowed; a stale id just starts fresh.
      std::lock_guard lock(mu);
      auto it = sessions.find(req.get_header_value("Mcp-Session-Id"));
      if (it != sessions.end() && it->second->tenant == tenant.name &&
          !it->second->session->closed()) {
        JsonError(res, 400, "Invalid Request: this session is already initialized");
        return;
      }
    }
    if (tenant.max_sessions && TenantSessions(tenant.name) >= tenant.max_sessions) {
      res.set_header("Retry-After", "60");
      JsonError(res, 429,
                "Too Many Requests: tenant " + tenant.name +
                    " has reached its limit "
                    "of " +
                    std::to_string(tenant.max_sessions) +
                    " live sessions; end one (DELETE) or retry after one expires");
      return;
    }
    auto entry = std::make_shared<HttpSessionEntry>();
    entry->http_id = RandomHex(16);
    entry->tenant = tenant.name;
    entry->quotas = tenant;
    entry->channel = std::make_shared<HttpChannel>();
    entry->last_used_ms = NowMs();
    std::string key = jsonrpc::IdKey(body["id"]);
    std::shared_ptr<Stream> st;
    {
      std::lock_guard lock(entry->channel->mu);
      st = entry->channel->NewStream(false);
      st->pending[key] = body["id"];
      entry->channel->by_request[key] = st->id;
    }
    entry->session = server.Connect(std::make_unique<HttpSessionTransport>(entry->channel),
                                    SessionTenant(*entry));
    Deliver(*entry->channel, req.body);
    std::string answer;
    {
      std::unique_lock lock(entry->channel->mu);
      entry->channel->cv.wait_for(lock, kInitTimeout,
                                  [&] { return !st->events.empty() || entry->channel->closed; });
      if (!st->events.empty()) answer = st->events.front().second;
      entry->channel->streams.erase(st->id);
      entry->channel->Retire(st->id);
    }
    Json reply = Json::parse(answer, nullptr, false);
    if (answer.empty() || reply.is_discarded() || !reply.contains("result")) {
      entry->session->Close();
      if (answer.empty()) {
        JsonError(res, 500, "Internal error: initialize was not answered", kInternalError);
      } else {
        res.status = 200;  // a JSON-RPC error: delivered as is, no session made
        res.set_content(answer, "application/json");
      }
      return;
    }
    {
      std::lock_guard lock(mu);
      sessions[entry->http_id] = entry;
    }
    log::Info("http: session " + entry->session->id() + " opened for tenant " + tenant.name);
    res.status = 200;
    res.set_header("Mcp-Session-Id", entry->http_id);
    res.set_content(answer, "application/json");
  }

  void HandleGet(const httplib::Request& req, httplib::Response& res) {
    if (!CheckHostOrigin(req, res)) return;
    auto tenant = Authenticate(req, res);
    if (!tenant) return;
    if (Lower(req.get_header_value("Accept")).find("text/event-stream") == std::string::npos) {
      JsonError(res, 406, "Not Acceptable: GET needs \"Accept: text/event-stream\"");
      return;
    }
    auto entry = FindSession(req, res, *tenant);
    if (!entry) return;
    auto& ch = entry->channel;
    std::shared_ptr<Stream> st;
    int from = 1;
    if (req.has_header("Last-Event-ID")) {
      std::string last = req.get_header_value("Last-Event-ID");
      size_t us = last.find('_');
      int sid = 0, seq = 0;
      try {
        if (us == std::string::npos) throw std::invalid_argument("no _");
        sid = std::stoi(last.substr(0, us));
        seq = std::stoi(last.substr(us + 1));
      } catch (const std::exception&) {
        JsonError(res, 400,
                  "Bad Request: Last-Event-ID \"" + last +
                      "\" is not an event id of "
                      "this server");
        return;
      }
      std::lock_guard lock(ch->mu);
      st = ch->Find(sid);
      if (!st) {
        JsonError(res, 404, "Not Found: stream of event " + last + " is finished or unknown");
        return;
      }
      from = seq + 1;
    } else {
      std::lock_guard lock(ch->mu);
      st = ch->Find(ch->standalone_id);
      if (st && st->attached) {
        JsonError(res, 409, "Conflict: this session already has an open GET stream");
        return;
      }
      if (!st) st = ch->NewStream(true);
    }
    ServeSse(res, entry, st, from, false);
  }

  // ---- legacy HTTP+SSE (2024-11-05) ----
  void HandleLegacySse(const httplib::Request& req, httplib::Response& res) {
    if (!CheckHostOrigin(req, res)) return;
    auto tenant = Authenticate(req, res);
    if (!tenant) return;
    if (Lower(req.get_header_value("Accept")).find("text/event-stream") == std::string::npos) {
      JsonError(
          res, 406,
          "Not Acceptable: GET " + opts.legacy_sse_path + " needs \"Accept: text/event-stream\"");
      return;
    }
    if (tenant->max_sessions && TenantSessions(tenant->name) >= tenant->max_sessions) {
      res.set_header("Retry-After", "60");
      JsonError(res, 429,
                "Too Many Requests: tenant " + tenant->name +
                    " has reached its limit "
                    "of " +
                    std::to_string(tenant->max_sessions) +
                    " live sessions; end one or retry after one expires");
      return;
    }
    auto entry = std::make_shared<HttpSessionEntry>();
    entry->http_id = RandomHex(16);
    entry->tenant = tenant->name;
    entry->quotas = *tenant;
    entry->channel = std::make_shared<HttpChannel>();
    entry->channel->legacy = true;
    entry->last_used_ms = NowMs();
    std::shared_ptr<Stream> st;
    {
      std::lock_guard lock(entry->channel->mu);
      st = entry->channel->NewStream(true);
    }
    entry->session = server.Connect(std::make_unique<HttpSessionTransport>(entry->channel),
                                    SessionTenant(*entry));
    {
      std::lock_guard lock(mu);
      sessions[entry->http_id] = entry;
    }
    ServeSse(res, entry, st, 1, false);
  }

  void HandleLegacyMessage(const httplib::Request& req, httplib::Response& res) {
    if (!CheckHostOrigin(req, res)) return;
    auto tenant = Authenticate(req, res);
    if (!tenant) return;
    std::string id = req.get_param_value("sessionId");
    std::shared_ptr<HttpSessionEntry> entry;
    {
      std::lock_guard lock(mu);
      auto it = sessions.find(id);
      if (it != sessions.end() && it->second->tenant == tenant->name &&
          it->second->channel->legacy) {
        entry = it->second;
      }
    }
    if (!entry || entry->session->closed()) {
      JsonError(
          res, 404,
          "Not Found: no SSE session \"" + id + "\"; open GET " + opts.legacy_sse_path + " first");
      return;
    }
    std::string ctype = Lower(req.get_header_value("Content-Type"));
    if (ctype.rfind("application/json", 0) != 0) {
      JsonError(res, 415, "Unsupported Media Type: Content-Type must be application/json");
      return;
    }
    if (RefuseOversizedBody(req, res, *tenant) || RefuseTooDeepBody(req, res)) return;
    if (Json::parse(req.body, nullptr, false).is_discarded()) {
      JsonError(res, 400, "Parse error: the body is not valid JSON", kParseError);
      return;
    }
    entry->last_used_ms = NowMs();
    Deliver(*entry->channel, req.body);
    res.status = 202;
    res.set_content("Accepted", "text/plain");
  }

  void HandleDelete(const httplib::Request& req, httplib::Response& res) {
    if (!CheckHostOrigin(req, res)) return;
    auto tenant = Authenticate(req, res);
    if (!tenant) return;
    auto entry = FindSession(req, res, *tenant);
    if (!entry) return;
    CloseSession(entry, "deleted by the client");
    res.status = 200;
  }

  void CloseSession(const std::shared_ptr<HttpSessionEntry>& entry, const std::string& reason) {
    {
      std::lock_guard lock(mu);
      auto it = sessions.find(entry->http_id);
      if (it == sessions.end() || it->second != entry) return;  // already closing
      sessions.erase(it);
    }
    entry->session->Close();
    entry->channel->Close();
    log::Info("http: session " + entry->session->id() + " (tenant " + entry->tenant +
              ") closed: " + reason);
    if (opts.on_session_closed) opts.on_session_closed(entry->session->id(), entry->tenant, reason);
  }

  void Housekeep() {
    std::unique_lock lock(hk_mu);
    while (!stopping) {
      hk_cv.wait_for(lock, std::chrono::seconds(1));
      if (stopping) break;
      std::vector<std::pair<std::shared_ptr<HttpSessionEntry>, std::string>> doomed;
      {
        std::lock_guard l(mu);
        int64_t now = NowMs();
        for (auto& [id, e] : sessions) {
          if (e->session->closed()) {
            doomed.emplace_back(e, "transport closed");
          } else if (e->active == 0 && e->channel->InFlight() == 0 &&
                     now - e->last_used_ms > IdleTimeout(*e).count()) {
            doomed.emplace_back(
                e, "idle for more than " + std::to_string(IdleTimeout(*e).count() / 1000) + " s");
          }
        }
      }
      lock.unlock();
      for (auto& [e, why] : doomed) CloseSession(e, why);
      ReapUnattachedStreams();
      lock.lock();
    }
  }

  // POST streams whose connection is gone: kept opts.resume_grace for the client to resume
  // them (GET with Last-Event-ID); after that, their unanswered requests are cancelled (as
  // if the client had sent notifications/cancelled: a running command is killed) and,
  // once answered, the streams and their events are dropped.
  void ReapUnattachedStreams() {
    std::vector<std::shared_ptr<HttpSessionEntry>> all;
    {
      std::lock_guard l(mu);
      for (auto& [id, e] : sessions) all.push_back(e);
    }
    const int64_t now = NowMs();
    const int64_t grace = opts.resume_grace.count();
    for (auto& e : all) {
      HttpChannel& ch = *e->channel;
      std::vector<Json> cancels;
      {
        std::lock_guard l(ch.mu);
        if (ch.legacy) continue;  // one stream, which ends the session
        for (auto it = ch.streams.begin(); it != ch.streams.end();) {
          Stream& st = *it->second;
          if (st.standalone || st.attached) {
            st.unattached_since_ms = 0;
            ++it;
            continue;
          }
          if (st.unattached_since_ms == 0) st.unattached_since_ms = now;
          if (now - st.unattached_since_ms < grace) {
            ++it;
            continue;
          }
          if (!st.cancelled && !st.pending.empty()) {
            st.cancelled = true;
            for (const auto& [key, id] : st.pending) cancels.push_back(id);
          }
          if (st.finished()) {
            ch.Retire(st.id);
            it = ch.streams.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (const Json& id : cancels) {
        Json note = {{"jsonrpc", "2.0"},
                     {"method", "notifications/cancelled"},
                     {"params",
                      {{"requestId", id},
                       {"reason",
                        "the client's connection closed and the stream was not "
                        "resumed within " +
                            std::to_string(grace / 1000) + " s"}}}};
        log::Info("http: session " + e->session->id() + ": cancelling request " + id.dump() +
                  " (its client went away)");
        Deliver(ch, note.dump());
        ch.ForgetCancelled({note});
      }
    }
  }
};

HttpServer::HttpServer(Server& server, HttpOptions options)
    : impl_(std::make_unique<Impl>(server, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Bind() {
  Impl& m = *impl_;
  if (!m.opts.tls_cert_file.empty() || !m.opts.tls_key_file.empty()) {
    if (m.opts.tls_cert_file.empty() || m.opts.tls_key_file.empty()) {
      return Status::Error("TLS needs both a certificate and a key file");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(m.opts.tls_cert_file.c_str(),
                                                    m.opts.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return Status::Error("cannot load the TLS certificate " + m.opts.tls_cert_file + " or key " +
                           m.opts.tls_key_file);
    }
    m.http = std::move(ssl);
  } else {
    m.http = std::make_unique<httplib::Server>();
  }
  size_t threads = m.opts.threads;
  m.http->new_task_queue = [threads] {
    return new ElasticTaskQueue(std::min<size_t>(8, threads), threads, std::chrono::seconds(30));
  };
  m.max_body = m.opts.default_tenant.max_body_bytes;
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once
  // (a hundred agents after a restart) overflows it and the extra connections wait for SYN
  // retransmits or fail. Remember the socket so Bind can listen again with a real backlog.
  m.http->set_socket_options([&m](int sock) {
    SetListenSocketOptions(sock);
    m.listen_fd = sock;
  });
  // The largest any tenant may send is checked per tenant in HandlePost; this only stops
  // absurd bodies before they are read.
  m.http->set_payload_max_length(std::max<size_t>(m.max_body, 64u << 20));  // = hard_limit
  m.http->set_read_timeout(30, 0);
  m.http->set_keep_alive_max_count(1000);
  m.http->set_tcp_nodelay(true);  // SSE frames are small: no Nagle delay
  const std::string& path = m.opts.path;
  m.http->Post(path, [&m](const httplib::Request& q, httplib::Response& r) { m.HandlePost(q, r); });
  m.http->Get(path, [&m](const httplib::Request& q, httplib::Response& r) { m.HandleGet(q, r); });
  m.http->Delete(path,
                 [&m](const httplib::Request& q, httplib::Response& r) { m.HandleDelete(q, r); });
  if (!m.opts.legacy_sse_path.empty()) {
    m.http->Get(m.opts.legacy_sse_path,
                [&m](const httplib::Request& q, httplib::Response& r) { m.HandleLegacySse(q, r); });
    m.http->Post(
        m.opts.legacy_messages_path,
        [&m](const httplib::Request& q, httplib::Response& r) { m.HandleLegacyMessage(q, r); });
  }
  size_t hard_limit = std::max<size_t>(m.max_body, 64u << 20);
  m.http->set_error_handler([hard_limit](const httplib::Request&, httplib::Response& r) {
    if (!r.body.empty()) return;  // our own handlers' errors carry their message
    if (r.status == 413) {
      JsonError(r, 413,
                "Payload Too Large: the request body exceeds the limit of " +
                    std::to_string(hard_limit) + " bytes");
    } else if (r.status == 404 && r.body.empty()) {
      JsonError(r, 404, "Not Found: MCP is served at another path");
    } else if (r.status == 405 && r.body.empty()) {
      JsonError(r, 405, "Method Not Allowed: use POST, GET or DELETE");
    }
  });
  // cpp-httplib returns only success or failure. On failure errno is still that of its last
  // bind(2) or listen(2): all it does after it is close(2) of that socket and
  // freeaddrinfo(3), which leave errno alone when they succeed. No socket made at all
  // (listen_fd unset) means the host did not resolve.
  m.listen_fd = -1;
  errno = 0;
  int port = m.opts.port == 0 ? m.http->bind_to_any_port(m.opts.host)
                              : (m.http->bind_to_port(m.opts.host, m.opts.port) ? m.opts.port : -1);
  if (port <= 0) {
    int err = errno;
    bool made_socket = m.listen_fd >= 0;
    m.listen_fd = -1;  // closed by cpp-httplib
    return Status::Error(ListenFailure(m.opts.host, m.opts.port, err, made_socket));
  }
  m.bound_port = port;
  // listen(2) on a listening socket only changes its backlog (capped by somaxconn).
  if (m.listen_fd >= 0 && ::listen(m.listen_fd, SOMAXCONN) != 0) {
    log::Warn(std::string("http: listen(backlog ") + std::to_string(SOMAXCONN) +
              ") failed: " + std::strerror(errno) + "; keeping cpp-httplib's backlog of 5");
  }
  return Status::Ok();
}

int HttpServer::port() const { return impl_->bound_port; }

std::string HttpServer::url() const {
  const auto& o = impl_->opts;
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  if (host == "0.0.0.0") host = "127.0.0.1";
  bool tls = !o.tls_cert_file.empty();
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port()) + o.path;
}

void HttpServer::Run() {
  Impl& m = *impl_;
  if (!m.http) return;
  m.housekeeper = std::thread([&m] { m.Housekeep(); });
  m.http->listen_after_bind();
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  {
    std::lock_guard lock(m.hk_mu);
    m.hk_cv.notify_all();
  }
  std::vector<std::shared_ptr<HttpSessionEntry>> all;
  {
    std::lock_guard lock(m.mu);
    for (auto& [id, e] : m.sessions) all.push_back(e);
  }
  for (auto& e : all) {
    std::lock_guard lock(e->channel->mu);
    e->channel->cv.notify_all();
  }
  for (auto& e : all) m.CloseSession(e, "server stopping");
  if (m.http) m.http->stop();
  if (m.housekeeper.joinable()) m.housekeeper.join();
}

size_t HttpServer::live_sessions() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

// ---- ServeHttp ----

int ServeHttp(Server& server, HttpOptions options, int stop_fd,
              const std::function<void(const HttpServer&)>& on_ready) {
  HttpServer http(server, std::move(options));
  if (Status st = http.Bind(); !st) {
    log::Error("http: " + st.message());
    std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
    return 2;
  }
  // The watcher stops the server when stop_fd becomes readable, or leaves when released
  // (Run ended for another reason).
  int release[2];
  if (::pipe2(release, O_CLOEXEC) != 0) return 2;
  std::thread watcher([&http, stop_fd, release_fd = release[0]] {
    pollfd fds[2] = {{release_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    while (::poll(fds, stop_fd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR) {
    }
    if (fds[0].revents == 0) http.Stop();
  });
  if (on_ready) on_ready(http);
  http.Run();
  char byte = 0;
  [[maybe_unused]] ssize_t ignored = ::write(release[1], &byte, 1);
  watcher.join();
  http.Stop();
  ::close(release[0]);
  ::close(release[1]);
  return 0;
}

}  // namespace mcp
