// The inside of HttpServer (internal to mcp/): HttpServer::Impl and the helpers its parts
// share. Its member functions live by concern:
//   http_checks.cc    Host/Origin, bearer token, session lookup; the JSON error answers
//   http_post.cc      POST: headers, body, request ids, quotas, the POST's SSE stream
//   http_handlers.cc  GET (standalone stream, resumption), legacy HTTP+SSE, DELETE
//   http_sse.cc       writing an SSE stream to a connection
//   http_sessions.cc  the session store: closing, expiry, dropped POST streams
//   http_server.cc    bind/listen, Run, Stop, ServeHttp
//   http_routes.cc    the application's extra routes (HttpRoute)
// The per-session streams and message routing are http_channel.h.
// Threading: HTTP requests run on cpp-httplib's pool; `mu` guards `sessions`; the
// housekeeper thread expires sessions and reaps dropped streams.
#pragma once

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

#include "mcp/http_channel.h"
#include "mcp/http_server.h"
#include "mcp/http_task_queue.h"
#include "mcp/jsonrpc.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/transport.h"

namespace mcp {

constexpr auto kKeepAlive = std::chrono::seconds(15);
constexpr auto kInitTimeout = std::chrono::seconds(30);
// How often a POST stream's connection is probed while its calls run: a client gone
// mid-call is noticed within about two probes (the first write after the peer closed
// still succeeds).
constexpr auto kPostProbe = std::chrono::seconds(1);

std::string RandomHex(size_t bytes);
std::string Lower(std::string s);
// "host:port" / "[::1]:port" -> host (lower case, brackets kept for IPv6).
std::string HostPart(const std::string& host_header);
bool IsSupportedVersion(const std::string& v);
// The request's peer as "addr:port" ("[v6]:port").
std::string PeerAddress(const httplib::Request& req);
void JsonError(httplib::Response& res, int status, const std::string& message,
               int code = kInvalidRequest);
// 413 naming the tenant's limit when the body is over it; true when refused.
bool RefuseOversizedBody(const httplib::Request& req, httplib::Response& res,
                         const HttpTenant& tenant);
// Nested deeper than jsonrpc::kMaxNestingDepth: refused before it is parsed and copied
// (each level is a recursion there; 100,000 levels overflow a thread's stack).
bool RefuseTooDeepBody(const httplib::Request& req, httplib::Response& res);

struct HttpServer::Impl {
  Server& server;
  HttpOptions opts;
  std::unique_ptr<httplib::Server> http;
  int bound_port = 0;
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<HttpSessionEntry>> sessions;
  std::mutex revive_mu;  // Revive: one at a time (taken before mu)
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
  bool CheckHostOrigin(const httplib::Request& req, httplib::Response& res);

  std::optional<HttpTenant> Authenticate(const httplib::Request& req, httplib::Response& res);

  // Tells opts.on_auth_refused (if set) of a 401/403 answered to `req`.
  void ReportRefusal(const httplib::Request& req, int status, const std::string& reason) const;

  // ---- extra routes (http_routes.cc) ----
  void AddRoutes();
  void HandleRoute(const HttpRoute& route, const httplib::Request& req, httplib::Response& res);

  // The session named by Mcp-Session-Id, for this tenant; else answers 400/404.
  std::shared_ptr<HttpSessionEntry> FindSession(const httplib::Request& req, httplib::Response& res,
                                                const HttpTenant& tenant);

  size_t TenantSessions(const std::string& tenant);

  // ---- sessions made (http_post.cc) ----
  std::shared_ptr<HttpSessionEntry> NewEntry(const std::string& http_id, const HttpTenant& tenant);
  // Connects entry's Session and delivers `initialize` (a request with id `id`); returns its
  // answer, "" when none came within kInitTimeout.
  std::string ConnectInitialized(const std::shared_ptr<HttpSessionEntry>& entry, const Json& id,
                                 const std::string& initialize);
  // A session the application keeps beyond its HTTP session (HttpOptions::revive_session),
  // connected again under `http_id`; nullptr when there is none for this tenant, or after
  // answering 429 (the tenant's live sessions at their limit).
  std::shared_ptr<HttpSessionEntry> Revive(const std::string& http_id, const httplib::Request& req,
                                           httplib::Response& res, const HttpTenant& tenant);

  // ---- SSE writing ----
  // Writes `stream` from seq `from` until it is finished (POST) or the connection or
  // session ends. `gen` identifies this connection.
  void WriteStream(const std::shared_ptr<HttpChannel>& ch, const std::shared_ptr<Stream>& st,
                   int from, uint64_t gen, const std::string& preamble, httplib::DataSink& sink);

  void ServeSse(httplib::Response& res, const std::shared_ptr<HttpSessionEntry>& entry,
                const std::shared_ptr<Stream>& st, int from, bool priming);

  // ---- handlers ----
  // A POST's Content-Type and Accept: JSON in, and both JSON and SSE accepted back.
  bool CheckPostHeaders(const httplib::Request& req, httplib::Response& res);

  // The POST body as JSON-RPC messages (one, or the elements of a batch), each an object;
  // nullopt after answering 413 or 400.
  std::optional<std::vector<Json>> ParsePostBody(const httplib::Request& req,
                                                 httplib::Response& res, const HttpTenant& tenant,
                                                 Json& body);

  // The id keys of the requests among `items` of an initialized session; nullopt after
  // answering 400 (an id the session cannot echo, a second initialize) or 409 (an id in
  // flight already, or twice in the batch).
  std::optional<std::vector<std::string>> RequestKeys(HttpChannel& ch,
                                                      const std::vector<Json>& items,
                                                      httplib::Response& res);

  // 429 when `calls` more would exceed the tenant's concurrent calls per session.
  bool RefuseOverCallQuota(HttpSessionEntry& entry, size_t calls, httplib::Response& res);

  // The POST's own SSE stream, with its requests (and their progress tokens) routed to it.
  std::shared_ptr<Stream> OpenPostStream(HttpChannel& ch, const std::vector<Json>& items);

  void HandlePost(const httplib::Request& req, httplib::Response& res);

  void Deliver(HttpChannel& ch, const std::string& text);

  void Initialize(const httplib::Request& req, httplib::Response& res, const HttpTenant& tenant,
                  const Json& body);

  void HandleGet(const httplib::Request& req, httplib::Response& res);

  // ---- legacy HTTP+SSE (2024-11-05) ----
  void HandleLegacySse(const httplib::Request& req, httplib::Response& res);

  void HandleLegacyMessage(const httplib::Request& req, httplib::Response& res);

  void HandleDelete(const httplib::Request& req, httplib::Response& res);

  void CloseSession(const std::shared_ptr<HttpSessionEntry>& entry, const std::string& reason);

  void Housekeep();

  // POST streams whose connection is gone: kept opts.resume_grace for the client to resume
  // them (GET with Last-Event-ID); after that, their unanswered requests are cancelled (as
  // if the client had sent notifications/cancelled: a running command is killed) and,
  // once answered, the streams and their events are dropped.
  void ReapUnattachedStreams();
};

}  // namespace mcp
