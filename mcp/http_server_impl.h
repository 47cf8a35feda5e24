// The inside of HttpServer (internal to mcp/): HttpServer::Impl and the helpers its parts
// share. Its member functions live by concern:
//   http_checks.cc    Host/Origin, bearer token, session lookup; the JSON error answers
//   http_post.cc      POST: headers, body, request ids, quotas, the POST's SSE stream
//   http_handlers.cc  GET (standalone stream, resumption), legacy HTTP+SSE, DELETE
//   http_sse.cc       writing an SSE stream to a connection
//   http_sessions.cc  the session store: closing, expiry, dropped POST streams
//   http_server.cc    Bind, Run, Stop, ServeHttp
//   http_routes.cc    which handler answers a request; the extra routes (HttpRoute)
// The network side (sockets, TLS, the event loop) is http_listener.h; the per-session
// streams and message routing are http_channel.h.
// Threading: connections live on the listener's I/O threads and never block. A quick
// request is handled right there; one that may wait (MayBlock: initialize, DELETE, the
// routes) goes to `handlers` (a bounded pool that grows on demand), whose answer is posted
// back to the connection's strand. An SSE answer is then written by the I/O threads as
// events come (NextSse). Tool calls run on mcp::Server's own worker pool. `mu` guards `sessions`;
// the housekeeper thread expires sessions and reaps dropped streams.
#pragma once

#include <fcntl.h>
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
#include "mcp/http_message.h"
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

class HttpListener;

// What the I/O side does next with an SSE answer (HttpServer::Impl::NextSse).
struct SseStep {
  enum Kind {
    kWrite,      // write `frames`, then ask again
    kWait,       // nothing new: the stream's waker will be called (or probe after `probe`)
    kEnd,        // the stream is finished: end the answer, the connection may go on
    kDisplaced,  // another connection resumed this stream: drop this connection
  };
  Kind kind = kWait;
  std::string frames;
  std::chrono::milliseconds probe{0};
};

std::string RandomHex(size_t bytes);
std::string Lower(std::string s);
// "host:port" / "[::1]:port" -> host (lower case, brackets kept for IPv6).
std::string HostPart(const std::string& host_header);
bool IsSupportedVersion(const std::string& v);
// The request's peer as "addr:port" ("[v6]:port").
std::string PeerAddress(const HttpRequest& req);
void JsonError(HttpResponse& res, int status, const std::string& message,
               int code = kInvalidRequest);
// 413 naming the tenant's limit when the body is over it; true when refused.
bool RefuseOversizedBody(const HttpRequest& req, HttpResponse& res, const HttpTenant& tenant);
// Nested deeper than jsonrpc::kMaxNestingDepth: refused before it is parsed and copied
// (each level is a recursion there; 100,000 levels overflow a thread's stack).
bool RefuseTooDeepBody(const HttpRequest& req, HttpResponse& res);

struct HttpServer::Impl {
  Server& server;
  HttpOptions opts;
  std::unique_ptr<HttpListener> listener;  // made by Bind
  // Runs the requests' handlers (they may block: initialize waits for its answer, DELETE
  // and the routes call the application).
  ElasticTaskQueue handlers;
  int bound_port = 0;
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<HttpSessionEntry>> sessions;
  std::mutex revive_mu;  // Revive: one at a time (taken before mu)
  std::atomic<bool> stopping{false};
  std::thread housekeeper;
  std::mutex hk_mu;
  std::condition_variable hk_cv;
  size_t max_body = 0;
  // No request body beyond this is read at all (the tenant's own limit is checked after).
  size_t max_body_hard_limit = 64u << 20;

  Impl(Server& s, HttpOptions o);
  ~Impl();  // the listener (and its connections) go first: they call back into Impl

  // The mcp::Session's tenant: the authenticated tenant's name; "" without authentication
  // (every request is then default_tenant, which names no one).
  std::string SessionTenant(const HttpSessionEntry& entry) const {
    return opts.authenticate ? entry.tenant : std::string();
  }
  std::chrono::milliseconds IdleTimeout(const HttpSessionEntry& entry) const {
    return entry.quotas.idle_timeout.count() > 0 ? entry.quotas.idle_timeout : opts.idle_timeout;
  }

  // ---- checks ----
  bool CheckHostOrigin(const HttpRequest& req, HttpResponse& res);

  std::optional<HttpTenant> Authenticate(const HttpRequest& req, HttpResponse& res);

  // Tells opts.on_auth_refused (if set) of a 401/403 answered to `req`.
  void ReportRefusal(const HttpRequest& req, int status, const std::string& reason) const;

  // ---- routing (http_routes.cc) ----
  // Runs the request's handler, then `done` with the answer (on that thread): on
  // `handlers` when it may wait (MayBlock), else right away on the calling I/O thread.
  void Handle(HttpRequest req, std::function<void(HttpResponse)> done);
  bool MayBlock(const HttpRequest& req) const;
  // Which handler answers: MCP, legacy SSE, an extra route, or 404/405.
  void Dispatch(const HttpRequest& req, HttpResponse& res);
  // Called once for every answer the server gives (handlers' and the connection's own: 400,
  // 413, 431), with its final status: the one place that sees every request's outcome.
  void Answered(const std::string& method, const std::string& path, const HttpResponse& res) const;
  void HandleRoute(const HttpRoute& route, const HttpRequest& req, HttpResponse& res);

  // The session named by Mcp-Session-Id, for this tenant; else answers 400/404.
  std::shared_ptr<HttpSessionEntry> FindSession(const HttpRequest& req, HttpResponse& res,
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
  std::shared_ptr<HttpSessionEntry> Revive(const std::string& http_id, const HttpRequest& req,
                                           HttpResponse& res, const HttpTenant& tenant);

  // ---- SSE (http_sse.cc) ----
  // The frames of `a`'s stream from seq `next` on (advancing it), or what to do instead.
  // On kWait, `waker` is registered with the stream: called (under the channel's lock, so
  // it must only post) when an event comes or the stream ends.
  SseStep NextSse(const SseAttachment& a, int& next, std::function<void()> waker);
  // The connection writing `a` is gone or done with it (called once, from the lease).
  void LeaveSse(const SseAttachment& a);

  // Answers with `st` as an SSE stream from seq `from` (the connection writes it).
  void ServeSse(HttpResponse& res, const std::shared_ptr<HttpSessionEntry>& entry,
                const std::shared_ptr<Stream>& st, int from, bool priming);

  // ---- handlers ----
  // A POST's Content-Type and Accept: JSON in, and both JSON and SSE accepted back.
  bool CheckPostHeaders(const HttpRequest& req, HttpResponse& res);

  // The POST body as JSON-RPC messages (one, or the elements of a batch), each an object;
  // nullopt after answering 413 or 400.
  std::optional<std::vector<Json>> ParsePostBody(const HttpRequest& req, HttpResponse& res,
                                                 const HttpTenant& tenant, Json& body);

  // The id keys of the requests among `items` of an initialized session; nullopt after
  // answering 400 (an id the session cannot echo, a second initialize) or 409 (an id in
  // flight already, or twice in the batch).
  std::optional<std::vector<std::string>> RequestKeys(HttpChannel& ch,
                                                      const std::vector<Json>& items,
                                                      HttpResponse& res);

  // 429 when `calls` more would exceed the tenant's concurrent calls per session.
  bool RefuseOverCallQuota(HttpSessionEntry& entry, size_t calls, HttpResponse& res);

  // The POST's own SSE stream, with its requests (and their progress tokens) routed to it.
  std::shared_ptr<Stream> OpenPostStream(HttpChannel& ch, const std::vector<Json>& items);

  void HandlePost(const HttpRequest& req, HttpResponse& res);

  // ---- 2026-07-28 requests (http_era2026.cc) ----
  // A POST without a session that speaks 2026-07-28 (by MCP-Protocol-Version, else by body).
  bool IsNewEraPost(const HttpRequest& req, const Json& body) const;
  // The header and _meta checks of a new-era request; the error to answer, or nullopt.
  std::optional<RpcError> CheckNewEraRequest(const HttpRequest& req, const Json& body) const;
  // Serves it with a Session of its own, closed once the answer is out.
  void HandleNewEraPost(const HttpRequest& req, HttpResponse& res, const HttpTenant& tenant,
                        const Json& body);

  void Deliver(HttpChannel& ch, const std::string& text);

  void Initialize(const HttpRequest& req, HttpResponse& res, const HttpTenant& tenant,
                  const Json& body);

  void HandleGet(const HttpRequest& req, HttpResponse& res);

  // ---- legacy HTTP+SSE (2024-11-05) ----
  void HandleLegacySse(const HttpRequest& req, HttpResponse& res);

  void HandleLegacyMessage(const HttpRequest& req, HttpResponse& res);

  void HandleDelete(const HttpRequest& req, HttpResponse& res);

  void CloseSession(const std::shared_ptr<HttpSessionEntry>& entry, const std::string& reason);

  void Housekeep();

  // POST streams whose connection is gone: kept opts.resume_grace for the client to resume
  // them (GET with Last-Event-ID); after that, their unanswered requests are cancelled (as
  // if the client had sent notifications/cancelled: a running command is killed) and,
  // once answered, the streams and their events are dropped.
  void ReapUnattachedStreams();
};

}  // namespace mcp
