// The HTTP/1.x request head a cell's client sends to the egress proxy, and the head the
// proxy forwards upstream.
//
// Two forms are accepted: CONNECT in authority-form ("CONNECT pypi.org:443 HTTP/1.1") and
// plain HTTP in absolute-form ("GET http://host[:port]/path HTTP/1.1"). https:// in
// absolute-form is refused (the client must use CONNECT, so TLS stays end to end), and so is
// origin-form (the client is not talking to a proxy). Parsing is strict and bounded
// (kMaxRequestHead): CRLF line ends, no obs-fold, token header names, one Host that must
// name the target's host and port, no Transfer-Encoding (request bodies are forwarded by
// Content-Length only, so nothing after the body can reach the upstream as a second
// request). The forwarded head is origin-form with hop-by-hop headers removed and
// "Connection: close": one request per proxied plain-HTTP connection.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "egress/host.h"

namespace mcpcell::egress {

inline constexpr size_t kMaxRequestHead = 16 * 1024;

struct HttpHeader {
  std::string name;   // as sent
  std::string value;  // leading and trailing whitespace removed
};

struct ProxyRequest {
  std::string method;   // "CONNECT", "GET", ...
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  bool is_connect = false;
  Authority target;  // host and port (port always set: from the target or 80)
  std::string path;  // plain HTTP: origin-form path and query ("/simple/?x=1")
  std::vector<HttpHeader> headers;
  uint64_t content_length = 0;  // plain HTTP request body length

  uint16_t port() const { return *target.port; }
};

// Length of the head (through the blank line) at the start of data, or 0 when the blank
// line has not arrived yet.
size_t FindHeadEnd(std::string_view data);

// Parses a complete head (FindHeadEnd's prefix). Errors are one line, fit for a 400 body.
Result<ProxyRequest> ParseProxyRequest(std::string_view head);

// The head to send upstream for a plain-HTTP request: origin-form request line, the
// client's end-to-end headers in order, Host as the client sent it, "Connection: close".
// `set` headers are added by the proxy; any the client sent under those names (any case)
// are dropped, so the receiver can trust them.
std::string ForwardedHead(const ProxyRequest& request, const std::vector<HttpHeader>& set = {});

}  // namespace mcpcell::egress
