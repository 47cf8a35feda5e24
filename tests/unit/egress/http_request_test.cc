#include "egress/http_request.h"

#include <gtest/gtest.h>

namespace mcpcell::egress {
namespace {

std::string ParseError(const std::string& head) {
  auto r = ParseProxyRequest(head);
  EXPECT_FALSE(r.ok()) << head;
  return r.ok() ? "" : r.error().message;
}

TEST(HttpRequest, FindHeadEnd) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n\r\nbody"), 18u);
}

TEST(HttpRequest, Connect) {
  auto r = ParseProxyRequest("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->is_connect);
  EXPECT_EQ(r->target.host.name, "pypi.org");
  EXPECT_EQ(r->port(), 443);
  auto v6 = ParseProxyRequest("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_TRUE(v6->target.host.is_ip());
  EXPECT_EQ(v6->target.host.Display(), "[2001:db8::1]");
}

TEST(HttpRequest, AbsoluteFormHttp) {
  auto r = ParseProxyRequest(
      "GET http://Example.com:8080/simple/?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n"
      "User-Agent: t\r\nContent-Length: 3\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->is_connect);
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->target.host.name, "example.com");
  EXPECT_EQ(r->port(), 8080);
  EXPECT_EQ(r->path, "/simple/?q=1");
  EXPECT_EQ(r->content_length, 3u);
  auto bare = ParseProxyRequest("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->path, "/");
  EXPECT_EQ(bare->port(), 80);
  auto query = ParseProxyRequest("GET http://example.com?x HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_TRUE(query.ok());
  EXPECT_EQ(query->path, "/?x");
}

TEST(HttpRequest, ForwardedHeadIsOriginFormWithoutHopByHopHeaders) {
  auto r = ParseProxyRequest(
      "POST http://example.com/upload HTTP/1.1\r\n"
      "Host: example.com\r\n"
      "Proxy-Authorization: Basic c2VjcmV0\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "Connection: keep-alive, X-Secret-Hop\r\n"
      "X-Secret-Hop: 1\r\n"
      "Keep-Alive: timeout=5\r\n"
      "Upgrade: websocket\r\n"
      "Accept: */*\r\n"
      "Content-Length: 2\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(ForwardedHead(*r),
            "POST /upload HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HttpRequest, HeadersTheProxySetsReplaceTheClientsCopies) {
  auto r = ParseProxyRequest(
      "GET http://svc.internal/x HTTP/1.1\r\nHost: svc.internal\r\nx-mcpcell-session: forged\r\n"
      "Accept: */*\r\nX-MCPCELL-SESSION: forged too\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(ForwardedHead(*r, {{"X-Mcpcell-Session", "s-7"}}),
            "GET /x HTTP/1.1\r\nHost: svc.internal\r\nAccept: */*\r\nX-Mcpcell-Session: s-7\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HttpRequest, ConnectionHeaderCannotDropHostOrContentLength) {
  auto r = ParseProxyRequest(
      "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: host, "
      "content-length\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(
      ForwardedHead(*r),
      "POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST(HttpRequest, Http10WithoutHostGetsOne) {
  auto r = ParseProxyRequest("GET http://example.com:81/x HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(ForwardedHead(*r),
            "GET /x HTTP/1.0\r\nHost: example.com:81\r\nConnection: close\r\n\r\n");
}

TEST(HttpRequest, HostMustMatchTheTarget) {
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\n\r\n"), "missing Host header");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n"),
            "Host header \"b.com\" does not match the URL's host a.com:80");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com:8080\r\n\r\n"),
            "Host header \"a.com:8080\" does not match the URL's host a.com:80");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n"),
            "more than one Host header");
  EXPECT_TRUE(ParseProxyRequest("GET http://a.com/ HTTP/1.1\r\nHost: A.COM.:80\r\n\r\n").ok());
}

TEST(HttpRequest, RefusedForms) {
  EXPECT_EQ(ParseError("GET https://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n"),
            "https:// URLs go through CONNECT (use the proxy for https as HTTPS_PROXY)");
  EXPECT_EQ(ParseError("GET / HTTP/1.1\r\nHost: a.com\r\n\r\n"),
            "origin-form request: this is a proxy, send the absolute URL");
  EXPECT_EQ(ParseError("GET ftp://a.com/ HTTP/1.1\r\n\r\n"),
            "only http:// absolute URLs and CONNECT are proxied");
  EXPECT_EQ(ParseError("CONNECT a.com HTTP/1.1\r\n\r\n"),
            "CONNECT target needs a port (host:port)");
  EXPECT_EQ(ParseError("CONNECT a.com:0 HTTP/1.1\r\n\r\n"),
            "CONNECT target: port \"0\" is not 1..65535");
  EXPECT_EQ(ParseError("GET http://user:pw@a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n"),
            "user information in the URL is not allowed");
  EXPECT_EQ(ParseError("GET http://127.1/ HTTP/1.1\r\nHost: 127.1\r\n\r\n"),
            "URL host: numeric host that is not a dotted-quad IPv4 address");
  EXPECT_EQ(ParseError("GET http://a.com/#x HTTP/1.1\r\nHost: a.com\r\n\r\n"),
            "request target contains a fragment ('#')");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/2.0\r\nHost: a.com\r\n\r\n"),
            "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
  EXPECT_EQ(ParseError(
                "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked\r\n\r\n"),
            "Transfer-Encoding request bodies are not proxied for plain http:// (send "
            "Content-Length, or use https)");
  EXPECT_EQ(ParseError("POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 1\r\n"
                       "Content-Length: 2\r\n\r\n"),
            "conflicting Content-Length headers");
  EXPECT_EQ(ParseError("POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: -1\r\n\r\n"),
            "malformed Content-Length");
}

TEST(HttpRequest, HostileInput) {
  EXPECT_EQ(ParseError("\r\n\r\n"), "empty line inside the request head");
  EXPECT_EQ(ParseError("GARBAGE\r\n\r\n"), "malformed request line");
  EXPECT_EQ(ParseError("GET  http://a.com/ HTTP/1.1\r\n\r\n"), "malformed request line");
  EXPECT_EQ(ParseError("G(T http://a.com/ HTTP/1.1\r\n\r\n"), "malformed method");
  EXPECT_EQ(ParseError("GET http://a.com/\x01 HTTP/1.1\r\n\r\n"),
            "request target contains a control, space or non-ASCII byte");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n folded\r\n\r\n"),
            "obsolete line folding in headers");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com\nX: y\r\n\r\n"),
            "bare CR or LF in request head");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost a.com\r\n\r\n"),
            "header line without ':'");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nBad Name: x\r\n\r\n"),
            "malformed header name");
  const char with_nul[] = "GET http://a.com/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
  EXPECT_EQ(ParseError(std::string(with_nul, sizeof with_nul - 1)), "NUL byte in request head");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nX: a\x7f\r\n\r\n"),
            "control character in header X");
  EXPECT_EQ(ParseError("GET http://bücher.de/ HTTP/1.1\r\n\r\n"),
            "request target contains a control, space or non-ASCII byte");
  EXPECT_EQ(ParseError("CONNECT [::1 HTTP/1.1\r\n\r\n"), "CONNECT target: '[' without ']'");
  EXPECT_EQ(ParseError("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n"), "incomplete request head");
  std::string huge =
      "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nX: " + std::string(kMaxRequestHead, 'a') +
      "\r\n\r\n";
  EXPECT_EQ(ParseError(huge), "request head larger than 16384 bytes");
  std::string many = "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n";
  for (int i = 0; i < 101; ++i) many += "X: y\r\n";
  EXPECT_EQ(ParseError(many + "\r\n"), "more than 100 headers");
}

}  // namespace
}  // namespace mcpcell::egress
