// HttpServer: the application's extra routes (HttpOptions::routes) on the MCP listener.
// They pass the same Host/Origin checks as MCP; authentication is the route's own, and its
// 401/403 answers are reported like MCP's (on_auth_refused).
#include "mcp/http_server_impl.h"

namespace mcp {
namespace {

// `prefix` as a regular expression matching itself and every path under it.
std::string PrefixPattern(const std::string& prefix) {
  std::string out;
  for (char c : prefix) {
    if (std::strchr("\\^$.|?*+()[]{}", c)) out.push_back('\\');
    out.push_back(c);
  }
  return out + "(/.*)?";
}

}  // namespace

void HttpServer::Impl::AddRoutes() {
  for (const HttpRoute& route : opts.routes) {
    const std::string pattern = PrefixPattern(route.prefix);
    auto handler = [this, &route](const httplib::Request& q, httplib::Response& r) {
      HandleRoute(route, q, r);
    };
    http->Get(pattern, handler);
    http->Post(pattern, handler);
    http->Put(pattern, handler);
    http->Patch(pattern, handler);
    http->Delete(pattern, handler);
  }
}

void HttpServer::Impl::HandleRoute(const HttpRoute& route, const httplib::Request& req,
                                   httplib::Response& res) {
  if (!CheckHostOrigin(req, res)) return;
  HttpRouteRequest in;
  in.method = req.method;
  in.path = req.path;
  for (const auto& [key, value] : req.params) in.params.emplace_back(key, value);
  std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") in.bearer_token = auth.substr(7);
  in.peer = PeerAddress(req);
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
