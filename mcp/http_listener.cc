// HttpListener (http_listener.h): binding, the accept loop, the I/O threads and Stop.
#include "mcp/http_listener.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "mcp/http_server_impl.h"

namespace mcp {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// "cannot listen on ADDR:PORT: why"; `made_socket` false when it never got as far as a
// socket (the host did not resolve).
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

}  // namespace

HttpListener::HttpListener(HttpServer::Impl& impl)
    : impl_(impl), acceptor_(net::make_strand(ioc_)) {}

HttpListener::~HttpListener() = default;

Status HttpListener::Bind(const HttpOptions& opts) {
  if (!opts.tls_cert_file.empty() || !opts.tls_key_file.empty()) {
    if (opts.tls_cert_file.empty() || opts.tls_key_file.empty()) {
      return Status::Error("TLS needs both a certificate and a key file");
    }
    tls_.emplace(net::ssl::context::tls_server);
    tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                      net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                      net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    tls_->use_certificate_chain_file(opts.tls_cert_file, ec);
    if (!ec) tls_->use_private_key_file(opts.tls_key_file, net::ssl::context::pem, ec);
    if (ec) {
      return Status::Error("cannot load the TLS certificate " + opts.tls_cert_file + " or key " +
                           opts.tls_key_file + ": " + ec.message());
    }
  }
  boost::system::error_code ec;
  tcp::resolver resolver(ioc_);
  auto results = resolver.resolve(opts.host, std::to_string(opts.port),
                                  tcp::resolver::numeric_service | tcp::resolver::passive, ec);
  if (ec || results.empty()) return Status::Error(ListenFailure(opts.host, opts.port, 0, false));
  int err = 0;
  for (const auto& entry : results) {
    acceptor_.close(ec);
    // Binding is exclusive: SO_REUSEADDR only (a restart may bind while the previous
    // server's connections linger in TIME_WAIT). SO_REUSEPORT would let a second server of
    // the same user bind the same address and take part of the connections.
    if (acceptor_.open(entry.endpoint().protocol(), ec) ||
        acceptor_.set_option(net::socket_base::reuse_address(true), ec) ||
        acceptor_.bind(entry.endpoint(), ec) ||
        acceptor_.listen(net::socket_base::max_listen_connections, ec)) {
      err = ec.value();
      continue;
    }
    port_ = acceptor_.local_endpoint().port();
    return Status::Ok();
  }
  acceptor_.close(ec);
  return Status::Error(ListenFailure(opts.host, opts.port, err, true));
}

void HttpListener::Run(size_t io_threads) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    work_.emplace(ioc_.get_executor());
  }
  net::post(acceptor_.get_executor(), [this] { Accept(); });
  std::vector<std::thread> threads;
  for (size_t i = 1; i < io_threads; ++i) threads.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (auto& t : threads) t.join();
}

void HttpListener::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_),
                         [this](boost::system::error_code ec, tcp::socket socket) {
                           OnAccept(ec, std::move(socket));
                         });
}

void HttpListener::OnAccept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of fds (EMFILE) or the like: the pending connection stays in the backlog. Wait
    // a little for connections to close instead of spinning on the error.
    log::Warn("http: accept: " + ec.message());
    auto timer = std::make_shared<net::steady_timer>(acceptor_.get_executor());
    timer->expires_after(std::chrono::milliseconds(100));
    timer->async_wait([this, timer](boost::system::error_code) {
      if (acceptor_.is_open()) Accept();
    });
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);  // SSE frames are small: no Nagle delay
  auto conn = MakeHttpConnection(impl_, *this, std::move(socket), tls_ ? &*tls_ : nullptr);
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;  // the socket closes with `conn`
    connections_[conn.get()] = conn;
  }
  conn->Start();
  Accept();
}

void HttpListener::Forget(HttpConnectionBase* conn) {
  std::lock_guard lock(mu_);
  connections_.erase(conn);
}

size_t HttpListener::connections() const {
  std::lock_guard lock(mu_);
  return connections_.size();
}

void HttpListener::Stop() {
  std::vector<std::shared_ptr<HttpConnectionBase>> open;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& [ptr, weak] : connections_) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
    work_.reset();  // Run returns once nothing is left to do
  }
  net::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
  for (auto& c : open) c->Shutdown();
}

}  // namespace mcp
