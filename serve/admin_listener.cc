#include "serve/admin_listener.h"

#include <httplib.h>
#include <strings.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace mcpcell::serve {

struct AdminListener::Impl {
  AdminListenerOptions options;
  httplib::Server http;
  int port = 0;
  std::thread thread;
  std::atomic<bool> ended{false};  // the accept loop returned

  void Handle(const mcp::HttpRoute& route, const httplib::Request& q, httplib::Response& r);
};

namespace {

// "localhost", "127.0.0.1", "[::1]", with or without ":port".
bool LoopbackHostHeader(std::string host) {
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    host = close == std::string::npos ? host : host.substr(1, close - 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return mcp::IsLoopbackHost(host);
}

std::string Peer(const httplib::Request& q) {
  return q.remote_addr + ":" + std::to_string(q.remote_port);
}

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

void AdminListener::Impl::Handle(const mcp::HttpRoute& route, const httplib::Request& q,
                                 httplib::Response& r) {
  if (mcp::IsLoopbackHost(options.address.host) &&
      !LoopbackHostHeader(q.get_header_value("Host"))) {
    r.status = 403;
    r.set_content("{\"error\":\"Forbidden: Host is not a loopback name\"}\n", "application/json");
    if (options.on_refused)
      options.on_refused({Peer(q), 403, q.method, q.path, "Host not loopback"});
    return;
  }
  mcp::HttpRouteRequest in{q.method, q.path, {}, "", Peer(q)};
  for (const auto& [key, value] : q.params) in.params.emplace_back(key, value);
  std::string auth = q.get_header_value("Authorization");
  if (auth.size() > 7 && strncasecmp(auth.c_str(), "bearer ", 7) == 0)
    in.bearer_token = auth.substr(7);
  mcp::HttpRouteResponse out = route.handler(in);
  if ((out.status == 401 || out.status == 403) && options.on_refused) {
    options.on_refused({in.peer, out.status, q.method, q.path,
                        out.refusal_reason.empty() ? "refused by the route" : out.refusal_reason});
  }
  r.status = out.status;
  for (const auto& [name, value] : out.headers) r.set_header(name, value);
  r.set_content(out.body, out.content_type);
}

Result<ListenAddress> ParseListenAddress(const std::string& text, const std::string& flag) {
  ListenAddress out;
  std::string port = text;
  if (size_t colon = port.rfind(':'); colon != std::string::npos) {
    out.host = port.substr(0, colon);
    if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
      out.host = out.host.substr(1, out.host.size() - 2);
    port = port.substr(colon + 1);
  }
  char* end = nullptr;
  long n = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (n < 0 || n > 65535 || *end != '\0' || out.host.empty()) {
    return Error::Msg((flag.empty() ? "" : flag + " ") + text +
                      ": expected [ADDR:]PORT, e.g. 9100 or 0.0.0.0:9100");
  }
  out.port = static_cast<int>(n);
  return out;
}

Result<std::unique_ptr<AdminListener>> AdminListener::Start(AdminListenerOptions options) {
  const ListenAddress addr = options.address;
  if (!mcp::IsLoopbackHost(addr.host) && !options.have_operators) {
    return Error::Msg("--admin " + addr.host +
                      ": refusing a non-loopback address without operators: give --http-config "
                      "with at least one [[operator]] (see docs/metrics.md)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  Impl* m = impl.get();
  for (const mcp::HttpRoute& route : m->options.routes) {
    auto handler = [m, &route](const httplib::Request& q, httplib::Response& r) {
      m->Handle(route, q, r);
    };
    const std::string pattern = PrefixPattern(route.prefix);
    m->http.Get(pattern, handler);
    m->http.Post(pattern, handler);
    m->http.Delete(pattern, handler);
  }
  m->http.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  errno = 0;
  m->port = addr.port == 0 ? m->http.bind_to_any_port(addr.host)
                           : (m->http.bind_to_port(addr.host, addr.port) ? addr.port : -1);
  if (m->port <= 0) {
    return Error::Sys("--admin: cannot listen on " + addr.host + ":" + std::to_string(addr.port));
  }
  m->thread = std::thread([m] {
    m->http.listen_after_bind();
    m->ended = true;
  });
  return std::unique_ptr<AdminListener>(new AdminListener(std::move(impl)));
}

AdminListener::AdminListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminListener::~AdminListener() { Stop(); }

int AdminListener::port() const { return impl_->port; }

std::string AdminListener::url() const {
  const std::string& host = impl_->options.address.host;
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(impl_->port);
}

void AdminListener::Stop() {
  if (!impl_->thread.joinable()) return;
  // stop() does nothing before the accept loop runs: wait for it to start (it starts at
  // once on a bound socket).
  while (!impl_->http.is_running() && !impl_->ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
  impl_->thread.join();
}

}  // namespace mcpcell::serve
