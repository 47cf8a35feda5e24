// AdminListener: the operators' listener of `mcpcell serve --admin [ADDR:]PORT`, a second,
// small plain-HTTP listener beside the transport (stdio or --http) that serves only the
// application's routes (/metrics, /healthz, /readyz, /admin/...), never MCP. It is a
// minimal cpp-httplib server of its own: mcp::HttpServer always serves MCP and needs an
// mcp::Server, which an operators' port must not expose. Routes are mcp::HttpRoute, the
// same handlers as on the HTTP listener, so they answer alike on both.
//
// Bound to a loopback address it answers only requests whose Host is a loopback name
// (DNS rebinding: a web page must not read it through a name that resolves to 127.0.0.1);
// a non-loopback address is refused unless the HTTP config has operators (the routes then
// want an operator token). 401/403 answers go to `on_refused` (the audit's auth.refused).
// Threading: one thread of its own accepts; requests run on cpp-httplib's worker pool.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/http_server.h"

namespace mcpcell::serve {

struct ListenAddress {
  std::string host = "127.0.0.1";
  int port = 0;
};

// "[ADDR:]PORT" (ADDR defaults to 127.0.0.1; "[::1]:9100" for IPv6); the error names
// `flag` (when not empty), the text and the expected form.
Result<ListenAddress> ParseListenAddress(const std::string& text, const std::string& flag);

struct AdminListenerOptions {
  ListenAddress address;
  std::vector<mcp::HttpRoute> routes;
  bool have_operators = false;  // required for a non-loopback address
  std::function<void(const mcp::HttpRefusal&)> on_refused;
};

class AdminListener {
 public:
  // Binds and starts serving; the error says why it could not.
  static Result<std::unique_ptr<AdminListener>> Start(AdminListenerOptions options);
  ~AdminListener();  // Stop()
  AdminListener(const AdminListener&) = delete;
  AdminListener& operator=(const AdminListener&) = delete;

  int port() const;
  std::string url() const;  // http://ADDR:PORT
  void Stop();              // idempotent

  struct Impl;

 private:
  explicit AdminListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcpcell::serve
