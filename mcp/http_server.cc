// Streamable HTTP for mcp::Server: Bind, Run, Stop and ServeHttp. See http_server.h for the
// protocol summary, http_server_impl.h for where the handlers live and http_listener.h for
// the network side.
#include <thread>

#include "mcp/http_listener.h"
#include "mcp/http_server_impl.h"

namespace mcp {

HttpServer::Impl::Impl(Server& s, HttpOptions o)
    : server(s),
      opts(std::move(o)),
      handlers(std::min<size_t>(2, std::max<size_t>(opts.handler_threads, 1)),
               std::max<size_t>(opts.handler_threads, 1), std::chrono::seconds(30)) {}

HttpServer::Impl::~Impl() {
  handlers.shutdown();  // handlers post their answers to the listener's connections
  listener.reset();     // its connections release their streams (LeaveSse) on the way
}

HttpServer::HttpServer(Server& server, HttpOptions options)
    : impl_(std::make_unique<Impl>(server, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Bind() {
  Impl& m = *impl_;
  m.max_body = m.opts.default_tenant.max_body_bytes;
  // The largest any tenant may send is checked per tenant in HandlePost; this only stops
  // absurd bodies before they are read.
  m.max_body_hard_limit = std::max<size_t>(m.max_body, 64u << 20);
  auto listener = std::make_unique<HttpListener>(m);
  if (Status st = listener->Bind(m.opts); !st) return st;
  m.bound_port = listener->port();
  m.listener = std::move(listener);
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
  if (!m.listener || m.stopping) return;
  m.housekeeper = std::thread([&m] { m.Housekeep(); });
  size_t io = m.opts.threads != 0 ? m.opts.threads
                                  : std::max<size_t>(1, std::thread::hardware_concurrency());
  m.listener->Run(io);
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
  if (m.listener) m.listener->Stop();
  if (m.housekeeper.joinable()) m.housekeeper.join();
}

size_t HttpServer::live_sessions() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

// ---- ServeHttp ----

int ServeHttp(Server& server, HttpOptions options, int stop_fd,
              const std::function<void(HttpServer&)>& on_ready,
              const std::function<void()>& on_stopping) {
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
  if (on_stopping) on_stopping();
  http.Stop();
  ::close(release[0]);
  ::close(release[1]);
  return 0;
}

}  // namespace mcp
