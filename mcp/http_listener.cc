// HttpListener (http_listener.h): binding, the accept loop, the I/O threads and Stop.
#include "mcp/http_listener.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

const char* FileKind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISCHR(mode)) return "a character device";
  return "not a socket";
}

int SocketOption(int fd, int option) {
  int value = -1;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, option, &value, &len) != 0) return -1;
  return value;
}

// Why `fd` cannot serve as the HTTP port, "" when it can: it must be a listening TCP
// socket (what systemd passes for ListenStream=ADDR:PORT with Accept=no).
std::string NotAListeningTcpSocket(int fd) {
  const std::string what = "the listening socket given (fd " + std::to_string(fd) + ")";
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    const char* name = strerrorname_np(e);
    return what + " is not an open descriptor: " + (name ? name : "E?") + " (" + std::strerror(e) +
           ")";
  }
  if (!S_ISSOCK(st.st_mode)) return what + " is " + FileKind(st.st_mode) + ", not a socket";
  const int domain = SocketOption(fd, SO_DOMAIN);
  if (domain != AF_INET && domain != AF_INET6) {
    return what + " is " +
           (domain == AF_UNIX ? std::string("a unix-domain socket")
                              : "a socket of address family " + std::to_string(domain)) +
           ", not TCP over IPv4 or IPv6 (systemd: ListenStream=ADDR:PORT, not a path)";
  }
  if (SocketOption(fd, SO_TYPE) != SOCK_STREAM) {
    return what + " is not a stream socket (systemd: ListenStream=, not ListenDatagram=)";
  }
  if (int protocol = SocketOption(fd, SO_PROTOCOL); protocol != IPPROTO_TCP) {
    return what + " is a stream socket of IP protocol " + std::to_string(protocol) +
           ", not TCP (systemd: ListenStream=, not ListenSequentialPacket= or SCTP)";
  }
  if (SocketOption(fd, SO_ACCEPTCONN) != 1) {
    return what +
           " is a TCP socket that is not listening (a connection: systemd's Accept=yes passes "
           "one per connection; mcpcell.socket needs Accept=no)";
  }
  return "";
}

}  // namespace

HttpListener::HttpListener(HttpServer::Impl& impl)
    : impl_(impl), acceptor_(net::make_strand(ioc_)) {}

HttpListener::~HttpListener() = default;

Status HttpListener::Bind(const HttpOptions& opts) {
  if (!opts.tls_cert_file.empty() || !opts.tls_key_file.empty()) {
    if (opts.tls_cert_file.empty() || opts.tls_key_file.empty()) {
      if (opts.listen_fd >= 0) ::close(opts.listen_fd);  // ours from Bind on, served or not
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
      if (opts.listen_fd >= 0) ::close(opts.listen_fd);
      return Status::Error("cannot load the TLS certificate " + opts.tls_cert_file + " or key " +
                           opts.tls_key_file + ": " + ec.message());
    }
  }
  if (opts.listen_fd >= 0) return Adopt(opts);
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

// The socket is taken as it is (its options are its maker's: systemd sets SO_REUSEADDR
// and never SO_REUSEPORT unless ReusePort= says so). Its address must be the one the
// options name: the Host header and token checks (http_checks.cc) trust opts.host to be
// where the server listens, so a socket on 0.0.0.0 under --http 127.0.0.1 would accept
// remote clients without tokens.
Status HttpListener::Adopt(const HttpOptions& opts) {
  const int fd = opts.listen_fd;
  if (std::string why = NotAListeningTcpSocket(fd); !why.empty()) {
    ::close(fd);
    return Status::Error(why);
  }
  boost::system::error_code ec;
  const bool v6 = SocketOption(fd, SO_DOMAIN) == AF_INET6;
  if (acceptor_.assign(v6 ? tcp::v6() : tcp::v4(), fd, ec)) {
    ::close(fd);
    return Status::Error("cannot serve on the listening socket given (fd " + std::to_string(fd) +
                         "): " + ec.message());
  }
  const tcp::endpoint local = acceptor_.local_endpoint(ec);
  tcp::resolver resolver(ioc_);
  auto results =
      resolver.resolve(opts.host, "0", tcp::resolver::numeric_service | tcp::resolver::passive, ec);
  bool same_host = false;
  for (const auto& entry : results) same_host |= entry.endpoint().address() == local.address();
  const bool same_port = opts.port == 0 || opts.port == local.port();
  if (!same_host || !same_port) {
    std::string host = opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host;
    std::string got = local.address().to_string();
    if (local.address().is_v6()) got = "[" + got + "]";
    acceptor_.close(ec);
    return Status::Error("the listening socket given (fd " + std::to_string(fd) + ") is bound to " +
                         got + ":" + std::to_string(local.port()) +
                         ", but the server is configured for " + host + ":" +
                         (opts.port == 0 ? std::string("<any port>") : std::to_string(opts.port)) +
                         "; make them name the same address and port (the address decides "
                         "which Host headers are accepted and whether tokens are required)");
  }
  port_ = local.port();
  return Status::Ok();
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
