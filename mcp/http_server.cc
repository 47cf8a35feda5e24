// Streamable HTTP for mcp::Server: binding and listening, Run, Stop and ServeHttp. See
// http_server.h for the protocol summary and http_server_impl.h for where the rest lives.
// CPPHTTPLIB_OPENSSL_SUPPORT comes from the cpp-httplib pkg-config target (every TU alike).
#include "mcp/http_server_impl.h"

namespace mcp {
namespace {

// Binding is exclusive: only SO_REUSEADDR (a restart may bind while the previous server's
// connections linger in TIME_WAIT). cpp-httplib's default options set SO_REUSEPORT, which
// lets a second server of the same user bind the same address and take part of the
// connections, so sessions break at random.
void SetListenSocketOptions(int sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// "cannot listen on ADDR:PORT: why", from the errno of cpp-httplib's last bind(2) or
// listen(2); `made_socket` false when it never got as far as a socket (the host did not
// resolve).
std::string ListenFailure(const std::string& host, int port, int err, bool made_socket) {
  std::string addr = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                     (port == 0 ? std::string("<any port>") : std::to_string(port));
  std::string why;
  if (!made_socket) {
    why = "no socket could be made for it (is " + host + " an address of this host?)";
  } else if (err == EADDRINUSE) {
    why = "address already in use (another server, perhaps another mcpcell, is listening there)";
  } else if (err == EADDRNOTAVAIL) {
    why = "address not available (not an address of this host)";
  } else if (err == EACCES) {
    why = "permission denied (a port below 1024 needs privilege)";
  } else {
    const char* name = err != 0 ? strerrorname_np(err) : nullptr;
    why = std::string(name ? name : "unknown error") + " (" + std::strerror(err) + ")";
  }
  return "cannot listen on " + addr + ": " + why;
}

// The request's route kind and tenant, for HttpOptions::on_request_done.
HttpRequestDone RequestDone(const HttpOptions& o, const httplib::Request& q,
                            const httplib::Response& r) {
  HttpRequestDone done{q.method, "other", r.status, ""};
  if (q.path == o.path) {
    done.route_kind = "mcp";
  } else if (!o.legacy_sse_path.empty() &&
             (q.path == o.legacy_sse_path || q.path == o.legacy_messages_path)) {
    done.route_kind = "legacy";
  } else {
    for (const HttpRoute& route : o.routes) {
      if (q.path == route.prefix || q.path.rfind(route.prefix + "/", 0) == 0)
        done.route_kind = "route";
    }
  }
  std::string auth = q.get_header_value("Authorization");
  if (o.authenticate && auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") {
    if (auto tenant = o.authenticate(auth.substr(7))) done.tenant = tenant->name;
  }
  return done;
}

}  // namespace

HttpServer::HttpServer(Server& server, HttpOptions options)
    : impl_(std::make_unique<Impl>(server, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Bind() {
  Impl& m = *impl_;
  if (!m.opts.tls_cert_file.empty() || !m.opts.tls_key_file.empty()) {
    if (m.opts.tls_cert_file.empty() || m.opts.tls_key_file.empty()) {
      return Status::Error("TLS needs both a certificate and a key file");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(m.opts.tls_cert_file.c_str(),
                                                    m.opts.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return Status::Error("cannot load the TLS certificate " + m.opts.tls_cert_file + " or key " +
                           m.opts.tls_key_file);
    }
    m.http = std::move(ssl);
  } else {
    m.http = std::make_unique<httplib::Server>();
  }
  size_t threads = m.opts.threads;
  m.http->new_task_queue = [threads] {
    return new ElasticTaskQueue(std::min<size_t>(8, threads), threads, std::chrono::seconds(30));
  };
  m.max_body = m.opts.default_tenant.max_body_bytes;
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once
  // (a hundred agents after a restart) overflows it and the extra connections wait for SYN
  // retransmits or fail. Remember the socket so Bind can listen again with a real backlog.
  m.http->set_socket_options([&m](int sock) {
    SetListenSocketOptions(sock);
    m.listen_fd = sock;
  });
  // The largest any tenant may send is checked per tenant in HandlePost; this only stops
  // absurd bodies before they are read.
  m.http->set_payload_max_length(std::max<size_t>(m.max_body, 64u << 20));  // = hard_limit
  m.http->set_read_timeout(30, 0);
  m.http->set_keep_alive_max_count(1000);
  m.http->set_tcp_nodelay(true);  // SSE frames are small: no Nagle delay
  const std::string& path = m.opts.path;
  m.http->Post(path, [&m](const httplib::Request& q, httplib::Response& r) { m.HandlePost(q, r); });
  m.http->Get(path, [&m](const httplib::Request& q, httplib::Response& r) { m.HandleGet(q, r); });
  m.http->Delete(path,
                 [&m](const httplib::Request& q, httplib::Response& r) { m.HandleDelete(q, r); });
  if (!m.opts.legacy_sse_path.empty()) {
    m.http->Get(m.opts.legacy_sse_path,
                [&m](const httplib::Request& q, httplib::Response& r) { m.HandleLegacySse(q, r); });
    m.http->Post(
        m.opts.legacy_messages_path,
        [&m](const httplib::Request& q, httplib::Response& r) { m.HandleLegacyMessage(q, r); });
  }
  m.AddRoutes();
  // The one place every answered request passes (after its response is written).
  if (m.opts.on_request_done) {
    m.http->set_logger([&m](const httplib::Request& q, const httplib::Response& r) {
      m.opts.on_request_done(RequestDone(m.opts, q, r));
    });
  }
  size_t hard_limit = std::max<size_t>(m.max_body, 64u << 20);
  m.http->set_error_handler([hard_limit](const httplib::Request&, httplib::Response& r) {
    if (!r.body.empty()) return;  // our own handlers' errors carry their message
    if (r.status == 413) {
      JsonError(r, 413,
                "Payload Too Large: the request body exceeds the limit of " +
                    std::to_string(hard_limit) + " bytes");
    } else if (r.status == 404 && r.body.empty()) {
      JsonError(r, 404, "Not Found: MCP is served at another path");
    } else if (r.status == 405 && r.body.empty()) {
      JsonError(r, 405, "Method Not Allowed: use POST, GET or DELETE");
    }
  });
  // cpp-httplib returns only success or failure. On failure errno is still that of its last
  // bind(2) or listen(2): all it does after it is close(2) of that socket and
  // freeaddrinfo(3), which leave errno alone when they succeed. No socket made at all
  // (listen_fd unset) means the host did not resolve.
  m.listen_fd = -1;
  errno = 0;
  int port = m.opts.port == 0 ? m.http->bind_to_any_port(m.opts.host)
                              : (m.http->bind_to_port(m.opts.host, m.opts.port) ? m.opts.port : -1);
  if (port <= 0) {
    int err = errno;
    bool made_socket = m.listen_fd >= 0;
    m.listen_fd = -1;  // closed by cpp-httplib
    return Status::Error(ListenFailure(m.opts.host, m.opts.port, err, made_socket));
  }
  m.bound_port = port;
  // listen(2) on a listening socket only changes its backlog (capped by somaxconn).
  if (m.listen_fd >= 0 && ::listen(m.listen_fd, SOMAXCONN) != 0) {
    log::Warn(std::string("http: listen(backlog ") + std::to_string(SOMAXCONN) +
              ") failed: " + std::strerror(errno) + "; keeping cpp-httplib's backlog of 5");
  }
  return Status::Ok();
}

int HttpServer::port() const { return impl_->bound_port; }

std::string HttpServer::url() const {
  const auto& o = impl_->opts;
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  if (host == "0.0.0.0") host = "127.0.0.1";
  bool tls = !o.tls_cert_file.empty();
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port()) + o.path;
}

void HttpServer::Run() {
  Impl& m = *impl_;
  if (!m.http) return;
  m.housekeeper = std::thread([&m] { m.Housekeep(); });
  m.http->listen_after_bind();
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  {
    std::lock_guard lock(m.hk_mu);
    m.hk_cv.notify_all();
  }
  std::vector<std::shared_ptr<HttpSessionEntry>> all;
  {
    std::lock_guard lock(m.mu);
    for (auto& [id, e] : m.sessions) all.push_back(e);
  }
  for (auto& e : all) {
    std::lock_guard lock(e->channel->mu);
    e->channel->cv.notify_all();
  }
  for (auto& e : all) m.CloseSession(e, "server stopping");
  if (m.http) m.http->stop();
  if (m.housekeeper.joinable()) m.housekeeper.join();
}

size_t HttpServer::live_sessions() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

// ---- ServeHttp ----

int ServeHttp(Server& server, HttpOptions options, int stop_fd,
              const std::function<void(const HttpServer&)>& on_ready) {
  HttpServer http(server, std::move(options));
  if (Status st = http.Bind(); !st) {
    log::Error("http: " + st.message());
    std::fprintf(stderr, "mcpcell: %s\n", st.message().c_str());
    return 2;
  }
  // The watcher stops the server when stop_fd becomes readable, or leaves when released
  // (Run ended for another reason).
  int release[2];
  if (::pipe2(release, O_CLOEXEC) != 0) return 2;
  std::thread watcher([&http, stop_fd, release_fd = release[0]] {
    pollfd fds[2] = {{release_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    while (::poll(fds, stop_fd >= 0 ? 2 : 1, -1) < 0 && errno == EINTR) {
    }
    if (fds[0].revents == 0) http.Stop();
  });
  if (on_ready) on_ready(http);
  http.Run();
  char byte = 0;
  [[maybe_unused]] ssize_t ignored = ::write(release[1], &byte, 1);
  watcher.join();
  http.Stop();
  ::close(release[0]);
  ::close(release[1]);
  return 0;
}

}  // namespace mcp
