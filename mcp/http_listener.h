// HttpListener: the network side of HttpServer (internal to mcp/): the listening socket,
// TLS, the event loop and its I/O threads, and the open connections (http_connection.cc).
//
// Event-driven (Boost.Asio / Beast): a fixed number of I/O threads run one io_context;
// every connection lives on its own strand and never blocks. A connection reads a request
// (header within keep_alive_timeout of going idle, body within request_timeout), hands it
// to HttpServer::Impl::Handle (at once, or on the handler pool when it may wait) and writes
// the answer when it comes back;
// SSE answers are written as their events come, each write bounded by request_timeout
// (a client that stops reading is dropped; the stream keeps only its newest events).
// Requests of one connection are answered one after another, in order (pipelining).
//
// Threading: Bind and Run from the owner's thread; Stop from any thread, once; the
// destructor after Run has returned (or was never called).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "mcp/http_server.h"
#include "mcp/types.h"

namespace mcp {

// One open connection, as the listener sees it.
class HttpConnectionBase {
 public:
  virtual ~HttpConnectionBase() = default;
  virtual void Start() = 0;
  // Closes the connection from any thread (posted to its strand).
  virtual void Shutdown() = 0;
};

class HttpListener {
 public:
  explicit HttpListener(HttpServer::Impl& impl);
  ~HttpListener();

  // Opens, binds (SO_REUSEADDR, never SO_REUSEPORT) and listens, or adopts
  // opts.listen_fd after checking it is a listening TCP socket bound to opts.host (and
  // opts.port unless 0); loads TLS files.
  Status Bind(const HttpOptions& opts);
  int port() const { return port_; }
  // Serves on `io_threads` threads (this one among them) until Stop.
  void Run(size_t io_threads);
  // Stops accepting and closes every connection; Run returns once they are gone.
  void Stop();
  // A connection that ended (called from its destructor).
  void Forget(HttpConnectionBase* conn);
  size_t connections() const;

 private:
  Status Adopt(const HttpOptions& opts);
  void Accept();
  void OnAccept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);

  // Declared before ioc_ so they outlive it: destroying ioc_ destroys the connections
  // still pending, which Forget themselves and use the TLS context until then.
  HttpServer::Impl& impl_;
  mutable std::mutex mu_;
  std::map<HttpConnectionBase*, std::weak_ptr<HttpConnectionBase>> connections_;  // mu_
  bool stopped_ = false;                                                          // mu_
  std::optional<boost::asio::ssl::context> tls_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  int port_ = 0;
};

// Makes the connection for an accepted socket (http_connection.cc); `tls` null = plain.
std::shared_ptr<HttpConnectionBase> MakeHttpConnection(HttpServer::Impl& impl,
                                                       HttpListener& listener,
                                                       boost::asio::ip::tcp::socket socket,
                                                       boost::asio::ssl::context* tls);

}  // namespace mcp
