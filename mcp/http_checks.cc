// HttpServer: the checks every request passes (Host and Origin, bearer token, session
// lookup) and the helpers of the JSON error answers.
#include "mcp/http_server_impl.h"

namespace mcp {

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

bool HeaderNameEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

bool HttpRequest::has_header(const std::string& name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return HeaderNameEquals(h.first, name); });
}

std::string HttpRequest::get_header_value(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (HeaderNameEquals(key, name)) return value;
  }
  return "";
}

std::string HttpRequest::get_param_value(const std::string& name) const {
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return "";
}

std::string PeerAddress(const HttpRequest& req) {
  const std::string port = std::to_string(req.remote_port);
  return req.remote_addr.find(':') != std::string::npos ? "[" + req.remote_addr + "]:" + port
                                                        : req.remote_addr + ":" + port;
}

void JsonError(HttpResponse& res, int status, const std::string& message, int code) {
  res.status = status;
  Json body = {
      {"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}};
  res.set_content(body.dump(), "application/json");
}

// 413 naming the tenant's limit when the body is over it; true when refused.
bool RefuseOversizedBody(const HttpRequest& req, HttpResponse& res, const HttpTenant& tenant) {
  if (tenant.max_body_bytes == 0 || req.body.size() <= tenant.max_body_bytes) return false;
  JsonError(res, 413,
            "Payload Too Large: body of " + std::to_string(req.body.size()) +
                " bytes exceeds the limit of " + std::to_string(tenant.max_body_bytes) +
                " bytes (tenant " + tenant.name + ")");
  return true;
}

// Nested deeper than jsonrpc::kMaxNestingDepth: refused before it is parsed and copied
// (each level is a recursion there; 100,000 levels overflow a thread's stack).
bool RefuseTooDeepBody(const HttpRequest& req, HttpResponse& res) {
  if (!jsonrpc::NestedDeeperThan(req.body)) return false;
  JsonError(res, 400,
            "Invalid Request: JSON nested deeper than " +
                std::to_string(jsonrpc::kMaxNestingDepth) + " levels of arrays and objects",
            kInvalidRequest);
  return true;
}

bool IsLoopbackHost(const std::string& host) {
  std::string h = Lower(host);
  if (h == "localhost" || h == "::1" || h == "[::1]") return true;
  return h.rfind("127.", 0) == 0;
}

bool HttpServer::Impl::CheckHostOrigin(const HttpRequest& req, HttpResponse& res) {
  bool loopback = IsLoopbackHost(opts.host);
  std::string host = HostPart(req.get_header_value("Host"));
  bool host_ok = (loopback && IsLoopbackHost(host)) ||
                 std::find(opts.allowed_hosts.begin(), opts.allowed_hosts.end(), host) !=
                     opts.allowed_hosts.end() ||
                 (!loopback && opts.allowed_hosts.empty());
  if (!host_ok) {
    ReportRefusal(req, 403, "Host \"" + host + "\" not allowed");
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
      ReportRefusal(req, 403, "Origin \"" + origin + "\" not allowed");
      JsonError(res, 403,
                "Forbidden: Origin \"" + origin +
                    "\" is not allowed (DNS-rebinding "
                    "protection)");
      return false;
    }
  }
  return true;
}

std::optional<HttpTenant> HttpServer::Impl::Authenticate(const HttpRequest& req,
                                                         HttpResponse& res) {
  if (!opts.authenticate) {
    res.tenant = opts.default_tenant.name;
    return opts.default_tenant;
  }
  std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") {
    if (auto tenant = opts.authenticate(auth.substr(7))) {
      res.tenant = tenant->name;
      return tenant;
    }
    ReportRefusal(req, 401, "invalid bearer token");
    res.set_header("WWW-Authenticate",
                   "Bearer realm=\"mcp\", error=\"invalid_token\", "
                   "error_description=\"the bearer token is not valid\"");
    JsonError(res, 401, "Unauthorized: the bearer token is not valid");
    return std::nullopt;
  }
  ReportRefusal(req, 401, "no bearer token");
  res.set_header("WWW-Authenticate", "Bearer realm=\"mcp\"");
  JsonError(res, 401, "Unauthorized: send \"Authorization: Bearer <token>\"");
  return std::nullopt;
}

void HttpServer::Impl::ReportRefusal(const HttpRequest& req, int status,
                                     const std::string& reason) const {
  if (!opts.on_auth_refused) return;
  HttpRefusal refusal;
  refusal.peer = PeerAddress(req);
  refusal.status = status;
  refusal.method = req.method;
  refusal.path = req.path;
  refusal.reason = reason;
  opts.on_auth_refused(refusal);
}

std::shared_ptr<HttpSessionEntry> HttpServer::Impl::FindSession(const HttpRequest& req,
                                                                HttpResponse& res,
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
  const std::string version = req.get_header_value("MCP-Protocol-Version");
  const bool version_ok = version.empty() || IsSupportedVersion(version);
  // An id the server does not hold may name a session the application kept (revive_session).
  if (!entry && version_ok) {
    entry = Revive(id, req, res, tenant);
    if (!entry && res.status == 429) return nullptr;
  }
  // The one place an unknown (or another tenant's, or closed) session id is refused.
  if (!entry || entry->session->closed()) {
    JsonError(res, 404, "Not Found: session not found or expired; initialize a new session",
              -32001);
    return nullptr;
  }
  if (!version_ok) {
    JsonError(res, 400, "Bad Request: unsupported MCP-Protocol-Version \"" + version + "\"");
    return nullptr;
  }
  entry->last_used_ms = NowMs();
  return entry;
}

size_t HttpServer::Impl::TenantSessions(const std::string& tenant) {
  std::lock_guard lock(mu);
  size_t n = 0;
  for (auto& [id, e] : sessions) n += e->tenant == tenant && !e->session->closed();
  return n;
}

}  // namespace mcp
