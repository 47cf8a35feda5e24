#include "egress/http_request.h"

#include <algorithm>
#include <set>

namespace mcpcell::egress {
namespace {

constexpr size_t kMaxHeaders = 100;

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Request targets: visible ASCII only (RFC 9112 §3.2); no fragments, no spaces.
Status CheckTargetChars(std::string_view target) {
  for (char c : target) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f)
      return Error::Msg("request target contains a control, space or non-ASCII byte");
    if (c == '#') return Error::Msg("request target contains a fragment ('#')");
  }
  return Ok();
}

Status ParseRequestLine(std::string_view line, ProxyRequest& req) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return Error::Msg("malformed request line");
  req.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  req.version = std::string(line.substr(sp2 + 1));
  if (!IsToken(req.method)) return Error::Msg("malformed method");
  if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0")
    return Error::Msg("unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
  if (Status s = CheckTargetChars(target); !s) return s;
  req.is_connect = req.method == "CONNECT";
  if (req.is_connect) {
    Result<Authority> a = ParseAuthority(target);
    if (!a) return a.error().Wrap("CONNECT target");
    if (!a->port) return Error::Msg("CONNECT target needs a port (host:port)");
    req.target = std::move(a.value());
    return Ok();
  }
  std::string lower = LowerAscii(target.substr(0, std::min<size_t>(target.size(), 8)));
  if (lower.starts_with("https://"))
    return Error::Msg("https:// URLs go through CONNECT (use the proxy for https as HTTPS_PROXY)");
  if (!lower.starts_with("http://")) {
    if (target.starts_with("/"))
      return Error::Msg("origin-form request: this is a proxy, send the absolute URL");
    return Error::Msg("only http:// absolute URLs and CONNECT are proxied");
  }
  std::string_view rest = target.substr(7);
  size_t path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos)
    return Error::Msg("user information in the URL is not allowed");
  Result<Authority> a = ParseAuthority(authority);
  if (!a) return a.error().Wrap("URL host");
  if (!a->port) a->port = 80;
  req.target = std::move(a.value());
  req.path = path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (req.path.front() == '?') req.path.insert(0, "/");
  return Ok();
}

Status ParseHeaderLine(std::string_view line, ProxyRequest& req) {
  if (line.front() == ' ' || line.front() == '\t')
    return Error::Msg("obsolete line folding in headers");
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Error::Msg("header line without ':'");
  std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) return Error::Msg("malformed header name");
  std::string_view value = Trim(line.substr(colon + 1));
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      return Error::Msg("control character in header " + std::string(name));
  }
  if (req.headers.size() >= kMaxHeaders) return Error::Msg("more than 100 headers");
  req.headers.push_back({std::string(name), std::string(value)});
  return Ok();
}

// Host must name the request target (plain HTTP), so that a request for an allowed host
// cannot be routed by a virtual-hosting upstream to another site.
Status CheckHost(ProxyRequest& req) {
  const HttpHeader* host = nullptr;
  for (const HttpHeader& h : req.headers) {
    if (!EqualsIgnoreCase(h.name, "host")) continue;
    if (host) return Error::Msg("more than one Host header");
    host = &h;
  }
  if (!host) {
    if (req.version == "HTTP/1.1") return Error::Msg("missing Host header");
    return Ok();  // HTTP/1.0: ForwardedHead adds one from the target
  }
  Result<Authority> a = ParseAuthority(host->value);
  if (!a) return a.error().Wrap("Host header");
  uint16_t port = a->port.value_or(80);
  if (a->host.name != req.target.host.name || port != req.port())
    return Error::Msg("Host header \"" + host->value + "\" does not match the URL's host " +
                      req.target.host.Display() + ":" + std::to_string(req.port()));
  return Ok();
}

Status CheckBodyFraming(ProxyRequest& req) {
  const HttpHeader* length = nullptr;
  for (const HttpHeader& h : req.headers) {
    if (EqualsIgnoreCase(h.name, "transfer-encoding"))
      return Error::Msg(
          "Transfer-Encoding request bodies are not proxied for plain http:// "
          "(send Content-Length, or use https)");
    if (!EqualsIgnoreCase(h.name, "content-length")) continue;
    if (length && length->value != h.value) return Error::Msg("conflicting Content-Length headers");
    length = &h;
  }
  if (!length) return Ok();
  const std::string& v = length->value;
  if (v.empty() || v.size() > 15 ||
      !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Error::Msg("malformed Content-Length");
  req.content_length = std::stoull(v);
  return Ok();
}

}  // namespace

size_t FindHeadEnd(std::string_view data) {
  size_t end = data.find("\r\n\r\n");
  return end == std::string_view::npos ? 0 : end + 4;
}

Result<ProxyRequest> ParseProxyRequest(std::string_view head) {
  if (head.size() > kMaxRequestHead)
    return Error::Msg("request head larger than " + std::to_string(kMaxRequestHead) + " bytes");
  if (!head.ends_with("\r\n\r\n")) return Error::Msg("incomplete request head");
  head.remove_suffix(2);  // keep one CRLF so that every line ends in one
  ProxyRequest req;
  bool first = true;
  while (!head.empty()) {
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      return Error::Msg("bare CR or LF in request head");
    if (line.find('\0') != std::string_view::npos) return Error::Msg("NUL byte in request head");
    if (line.empty()) return Error::Msg("empty line inside the request head");
    Status s = first ? ParseRequestLine(line, req) : ParseHeaderLine(line, req);
    if (!s) return s.error();
    first = false;
  }
  if (first) return Error::Msg("empty request");
  if (req.is_connect) return req;
  if (Status s = CheckHost(req); !s) return s.error();
  if (Status s = CheckBodyFraming(req); !s) return s.error();
  return req;
}

std::string ForwardedHead(const ProxyRequest& request, const std::vector<HttpHeader>& set) {
  // Hop-by-hop headers (RFC 9110 §7.6.1) and those the client listed in Connection; the
  // proxy's own credentials never go upstream.
  std::set<std::string> drop = {
      "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
      "te",         "trailer",          "upgrade"};
  for (const HttpHeader& h : request.headers) {
    if (!EqualsIgnoreCase(h.name, "connection")) continue;
    std::string_view list = h.value;
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view token = Trim(list.substr(0, comma));
      if (!token.empty()) drop.insert(LowerAscii(token));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  drop.erase("host");  // never let Connection remove the header the policy checked
  drop.erase("content-length");
  for (const HttpHeader& h : set) drop.insert(LowerAscii(h.name));
  std::string out = request.method + " " + request.path + " " + request.version + "\r\n";
  bool has_host = false;
  for (const HttpHeader& h : request.headers) {
    if (drop.count(LowerAscii(h.name))) continue;
    has_host = has_host || EqualsIgnoreCase(h.name, "host");
    out += h.name + ": " + h.value + "\r\n";
  }
  if (!has_host) {
    out += "Host: " + request.target.host.Display();
    if (request.port() != 80) out += ":" + std::to_string(request.port());
    out += "\r\n";
  }
  for (const HttpHeader& h : set) out += h.name + ": " + h.value + "\r\n";
  out += "Connection: close\r\n\r\n";
  return out;
}

}  // namespace mcpcell::egress
