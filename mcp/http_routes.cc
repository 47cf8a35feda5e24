// HttpServer: which handler answers a request (MCP at opts.path, legacy HTTP+SSE, the
// application's extra routes, else 404/405), run on the handler pool; and the extra routes
// themselves (HttpOptions::routes). They pass the same Host/Origin checks as MCP;
// authentication is the route's own, and its 401/403 answers are reported like MCP's
// (on_auth_refused).
#include "mcp/http_server_impl.h"

namespace mcp {
namespace {

// `path` is `prefix` or under it ("/admin" matches "/admin" and "/admin/x", not "/adminx").
bool UnderPrefix(const std::string& path, const std::string& prefix) {
  if (path.rfind(prefix, 0) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/' ||
         (!prefix.empty() && prefix.back() == '/');
}

bool IsRouteMethod(const std::string& m) {
  return m == "GET" || m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE";
}

}  // namespace

bool HttpServer::Impl::MayBlock(const HttpRequest& req) const {
  if (req.path == opts.path) {
    // An id the server does not hold may be revived (revive_session), which waits on the
    // application and on the new session's initialize.
    if (opts.revive_session && req.has_header("Mcp-Session-Id")) {
      std::lock_guard lock(mu);
      if (sessions.count(req.get_header_value("Mcp-Session-Id")) == 0) return true;
    }
    if (req.method == "GET") return false;
    // A POST hands its messages to the session, which answers its quick methods at once
    // and runs the rest on mcp::Server's pool; initialize makes a session (the
    // application's hooks run) and waits for its answer.
    if (req.method == "POST") return req.body.find("\"initialize\"") != std::string::npos;
    return true;  // DELETE closes the session: on_session_closed runs
  }
  // A legacy message is delivered like a POST; opening a legacy stream makes a session,
  // and the extra routes are the application's.
  return !(req.method == "POST" && !opts.legacy_sse_path.empty() &&
           req.path == opts.legacy_messages_path &&
           req.body.find("\"initialize\"") == std::string::npos);
}

void HttpServer::Impl::Handle(HttpRequest req, std::function<void(HttpResponse)> done) {
  auto run = [this, req = std::move(req), done = std::move(done)] {
    HttpResponse res;
    try {
      Dispatch(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse();
      JsonError(res, 500, std::string("Internal error: ") + e.what(), kInternalError);
    }
    if (res.status == 0) {
      JsonError(res, 500, "Internal error: the request was not answered", kInternalError);
    }
    done(std::move(res));
  };
  if (MayBlock(req)) {
    handlers.enqueue(std::move(run));
  } else {
    run();  // on the connection's I/O thread: no hand-off for the common calls
  }
}

void HttpServer::Impl::Dispatch(const HttpRequest& req, HttpResponse& res) {
  const std::string& m = req.method;
  if (req.path == opts.path) {
    res.route = "mcp";
    if (m == "POST") return HandlePost(req, res);
    if (m == "GET") return HandleGet(req, res);
    if (m == "DELETE") return HandleDelete(req, res);
    res.set_header("Allow", "GET, POST, DELETE");
    return JsonError(res, 405, "Method Not Allowed: use POST, GET or DELETE");
  }
  if (!opts.legacy_sse_path.empty()) {
    if (req.path == opts.legacy_sse_path && m == "GET") {
      res.route = "legacy";
      return HandleLegacySse(req, res);
    }
    if (req.path == opts.legacy_messages_path && m == "POST") {
      res.route = "legacy";
      return HandleLegacyMessage(req, res);
    }
  }
  if (IsRouteMethod(m)) {
    for (const HttpRoute& route : opts.routes) {
      if (UnderPrefix(req.path, route.prefix)) {
        res.route = "route";
        return HandleRoute(route, req, res);
      }
    }
  }
  JsonError(res, 404, "Not Found: MCP is served at another path");
}

void HttpServer::Impl::Answered(const std::string& method, const std::string& path,
                                const HttpResponse& res) const {
  if (opts.on_request_done) {
    opts.on_request_done(
        HttpRequestDone{method, res.route == "none" ? "other" : res.route, res.status, res.tenant});
  }
  if (log::Enabled(LogLevel::kDebug)) {
    log::Debug("http: " + method + " " + path + " (" + res.route +
               (res.tenant.empty() ? "" : ", tenant " + res.tenant) + ") -> " +
               std::to_string(res.status));
  }
}

void HttpServer::Impl::HandleRoute(const HttpRoute& route, const HttpRequest& req,
                                   HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  HttpRouteRequest in;
  in.method = req.method;
  in.path = req.path;
  in.params = req.params;
  std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") in.bearer_token = auth.substr(7);
  in.peer = PeerAddress(req);
  // The route authenticates for itself; the tenant is only for on_request_done.
  if (opts.on_request_done && opts.authenticate && !in.bearer_token.empty()) {
    if (auto tenant = opts.authenticate(in.bearer_token)) res.tenant = tenant->name;
  }
  HttpRouteResponse out = route.handler(in);
  if (out.status == 401 || out.status == 403) {
    ReportRefusal(req, out.status,
                  out.refusal_reason.empty() ? "refused by the route" : out.refusal_reason);
  }
  res.status = out.status;
  for (const auto& [name, value] : out.headers) res.set_header(name, value);
  res.set_content(out.body, out.content_type);
}

}  // namespace mcp
