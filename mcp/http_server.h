// HttpServer: MCP over Streamable HTTP (spec 2025-11-25 "Transports") at one path (/mcp).
// Every HTTP session (Mcp-Session-Id, issued at initialize) is one mcp::Session fed by an
// internal Transport, so the Server and its tools never know which transport they run on.
//
//   POST   client messages. Requests are answered on an SSE stream (text/event-stream)
//          carrying their responses plus the notifications and server->client requests
//          sent meanwhile; initialize is answered as application/json. Notifications and
//          responses alone get 202.
//   GET    the session's standalone server->client SSE stream (one at a time), or, with
//          Last-Event-ID, resumption of any stream of the session from that event.
//   DELETE ends the session (on_session_closed follows).
// Also the legacy HTTP+SSE transport (GET /sse + POST /messages?sessionId=...).
//
// Extra application routes (HttpRoute) share the listener and the Host/Origin checks;
// every 401/403 is reported to on_auth_refused (for an audit trail).
//
// Checks, in order: Host and Origin (DNS rebinding; 403), bearer token (401 with
// WWW-Authenticate), content type (415), Accept (406), body size (413), JSON (400),
// Mcp-Session-Id (400 missing, 404 unknown/expired/another tenant's), MCP-Protocol-Version
// (400 unsupported), quotas (429 with Retry-After and a message naming the limit).
//
// Every mcp::Session made here carries its tenant's name (Session::tenant(); empty when
// there is no authentication), so the Server's per-session hooks can tell tenants apart.
//
// Threading: event-driven (Boost.Asio): `threads` I/O threads serve every connection and
// stream, and no connection or open stream holds a thread. Request handlers run on a
// bounded pool that grows on demand (`handler_threads`); tool calls run on mcp::Server's
// worker pool. Sessions idle past their idle timeout (no request and no open stream) are
// closed by a housekeeping thread. See docs/architecture.md, "Threading of the HTTP server".
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mcp/types.h"

namespace mcp {

class Server;
class Session;

// An extra route beside MCP (e.g. an admin API of the application): requests whose path is
// `prefix` or under `prefix/` pass the same Host/Origin checks as MCP, then go to `handler`
// on the request's thread. mcp/ does no authentication for them: the handler gets the
// bearer token (without "Bearer ") and answers. A 401 or 403 it answers is reported to
// HttpOptions::on_auth_refused like MCP's own.
struct HttpRouteRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;
  std::vector<std::pair<std::string, std::string>> params;  // query parameters, in order
  std::string bearer_token;                                 // "" when none was sent
  std::string peer;                                         // "addr:port"
};
struct HttpRouteResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string refusal_reason;  // for on_auth_refused when status is 401/403
};
struct HttpRoute {
  std::string prefix;  // e.g. "/admin"
  std::function<HttpRouteResponse(const HttpRouteRequest&)> handler;
};

// An HTTP request refused for its Host/Origin (403) or its credentials (401, 403).
struct HttpRefusal {
  std::string peer;  // "addr:port"
  int status = 0;
  std::string method;
  std::string path;
  std::string reason;
};

// One HTTP request answered (HttpOptions::on_request_done), e.g. for request metrics.
struct HttpRequestDone {
  std::string method;  // "GET", "POST", ...
  // Which part of the server answered it: "mcp" (HttpOptions::path), "legacy" (the legacy
  // HTTP+SSE paths), "route" (an HttpRoute) or "other" (anything else: a 404, a bad request).
  std::string route_kind;
  int status = 0;
  // The tenant of the request's bearer token; "" when it sent none or an invalid one, or
  // when there is no authentication.
  std::string tenant;
};

// Who a request comes from, and what they may use. 0 = unlimited.
struct HttpTenant {
  std::string name = "default";
  size_t max_sessions = 0;          // live sessions of this tenant
  size_t max_concurrent_calls = 0;  // requests in flight per session
  size_t max_body_bytes = 4 * 1024 * 1024;
  // A session idle this long (no request, no open stream) is closed; 0 = the server's
  // HttpOptions::idle_timeout.
  std::chrono::milliseconds idle_timeout{0};
};

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port (see HttpServer::port())
  // A listening TCP socket to serve on instead of binding host:port (systemd socket
  // activation); the server owns it from Bind on. It must be bound to host (and to port
  // unless 0), which the Host and token checks rely on; Bind says what is wrong otherwise.
  int listen_fd = -1;
  std::string path = "/mcp";
  // Legacy HTTP+SSE (2024-11-05) for older clients: GET legacy_sse_path opens the stream
  // (first event "endpoint" = legacy_messages_path?sessionId=...), client messages are
  // POSTed there (202). The session ends with its stream. Empty = off.
  std::string legacy_sse_path = "/sse";
  std::string legacy_messages_path = "/messages";
  // Host header names (without port) and exact Origin values accepted besides the local
  // ones (localhost, 127.0.0.1, [::1]), which are accepted only when bound to loopback.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  // Bearer token -> tenant; nullopt = invalid token. Unset = no authentication: every
  // request is `default_tenant`.
  std::function<std::optional<HttpTenant>(const std::string& token)> authenticate;
  HttpTenant default_tenant;
  std::chrono::milliseconds idle_timeout{15 * 60 * 1000};
  // Optional TLS (PEM files); both empty = plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // I/O threads: every connection and SSE stream is served by these few threads, none of
  // them held by an open connection. 0 = one per CPU core.
  size_t threads = 0;
  // Threads running request handlers (a handler may wait: initialize for its answer,
  // DELETE and the routes for the application), made on demand up to this; requests
  // beyond it wait their turn. Tool calls do not count here (mcp::Server's pool runs them).
  size_t handler_threads = 64;
  // A request's body must arrive within this of its header, and every write to a client
  // (an answer, an SSE event) must be taken by it within this; else the connection closes.
  std::chrono::milliseconds request_timeout{30000};
  // A connection idle between requests (or whose request header is still incomplete) this
  // long is closed.
  std::chrono::milliseconds keep_alive_timeout{60000};
  // A POST stream whose connection dropped before its calls were answered may be resumed
  // (GET with Last-Event-ID) for this long; then its calls are cancelled (a running
  // command is killed) and its events dropped.
  std::chrono::milliseconds resume_grace{10000};
  // Called once per session that ends (DELETE, expiry, client gone, shutdown), after its
  // requests have finished, with the mcp::Session id, the tenant and the reason.
  std::function<void(const std::string& session_id, const std::string& tenant,
                     const std::string& reason)>
      on_session_closed;
  // Sessions that outlive their HTTP session (e.g. hibernated across a server restart).
  // Called with the Mcp-Session-Id of a request (POST, GET or DELETE) that names no live
  // session, and the tenant the session would have (Session::tenant(): "" without
  // authentication), once per id at a time. nullopt (or unset): 404 as for any unknown id;
  // it must also be nullopt for another tenant's id, so a foreign id cannot be told from an
  // unknown one. Otherwise a new Session is connected under the SAME id, initialized with
  // the answer (an initialize with its client info and capabilities and the request's
  // MCP-Protocol-Version, else `protocol_version`, then notifications/initialized, both
  // answered inside the server), on_session_opened is called, and the request is served in
  // it as in any session. A DELETE of such an id thus ends it for good (on_session_closed).
  // A tenant at its max_sessions gets 429 for it (asked after the hook said yes).
  struct RevivedSession {
    std::string protocol_version;
    Json client_info = Json::object();
    Json client_capabilities = Json::object();
  };
  std::function<std::optional<RevivedSession>(const std::string& http_id,
                                              const std::string& tenant)>
      revive_session;
  // Called once per session made (initialize answered, or revived), with its Mcp-Session-Id,
  // before any other request of the session is served.
  std::function<void(const std::string& http_id, const Session& session)> on_session_opened;
  // Extra routes (see HttpRoute), matched before the 404 of unknown paths.
  std::vector<HttpRoute> routes;
  // Called on the request's thread for every 401/403 answered by MCP or by a route; must be
  // quick and must not block on the server.
  std::function<void(const HttpRefusal&)> on_auth_refused;
  // Called once per request answered (after its response, a stream's when it ends), on the
  // request's thread, from one place in the server; must be quick and must not block.
  std::function<void(const HttpRequestDone&)> on_request_done;
};

class HttpServer {
 public:
  HttpServer(Server& server, HttpOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket (and loads TLS files); says why it could not.
  Status Bind();
  int port() const;
  std::string url() const;  // e.g. http://127.0.0.1:8080/mcp
  // Serves until Stop(). Bind() first.
  void Run();
  // Stops accepting, closes every session (on_session_closed for each). Idempotent.
  void Stop();
  size_t live_sessions() const;
  // Ends live session `id` (its Mcp-Session-Id or its mcp::Session id) for the
  // embedder, e.g. an operator's end: its open streams close, its in-flight calls are
  // cancelled as by the session's close, on_session_closed follows with `reason`, and the
  // client's next request with that id gets 404 (unless revive_session revives it). False
  // when no live session has that id. Thread-safe; may be called from a route's handler.
  bool CloseSession(const std::string& id, const std::string& reason);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Binds, calls on_ready, serves until `stop_fd` is readable (-1 = until Stop from
// elsewhere), calls on_stopping (the server is still there: the last moment to let go of
// it), then stops. Returns an exit status. Installs no signal handlers: the application
// turns SIGTERM/SIGINT into a readable stop_fd (e.g. a self-pipe) and should ignore
// SIGPIPE.
int ServeHttp(Server& server, HttpOptions options, int stop_fd,
              const std::function<void(HttpServer&)>& on_ready = {},
              const std::function<void()>& on_stopping = {});

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

}  // namespace mcp
