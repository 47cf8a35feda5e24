// TLS interception for hosts that carry placeholder secrets (issue 26; docs/secrets.md).
// Internal to egress/ (includes Boost and OpenSSL); connection.cc hands a CONNECT over to an
// Interception after it has answered 200, when the CONNECT host:port is one of the cell's
// grants' hosts. Other CONNECTs keep the blind tunnel.
//
// One Interception serves one CONNECT:
//   1. TLS-accept from the cell with a leaf minted for the CONNECT host (tls_ca.h); the SNI
//      must be that host
//   2. TLS-connect to the upstream address the proxy resolved and connected, SNI = host,
//      the chain verified against the system CAs (plus the proxy's extra CA file) and the
//      name checked; a failure is answered 502 to the cell's first request
//   3. per HTTP/1.1 request (Boost.Beast parsers): read it whole, substitute placeholders
//      (secret_substitution.h) or answer 403 and forward nothing; ask upstream for an
//      identity-encoded answer; send the answer back with every granted value for this
//      host masked (secret_masker.h), re-framed as chunked
//   4. keep both connections while both sides keep them alive; when the upstream has closed
//      a kept-alive connection (its idle timeout) before answering, connect again to the
//      same address once and resend
// Threading: everything runs on the cell's strand (the sockets' executor); the hooks are
// called there too.
#pragma once

#include <boost/asio/ssl.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "egress/connection.h"
#include "egress/secret_masker.h"
#include "egress/tls_ca.h"

namespace mcpcell::egress {

namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;

// Request bodies to intercepted hosts are read whole before anything goes upstream (a
// placeholder in the body must be found first); larger ones get a 413.
inline constexpr uint64_t kMaxInterceptedBody = 16 * 1024 * 1024;

// What every interception of one proxy shares; set at proxy start, read-only afterwards.
struct InterceptionShared {
  std::shared_ptr<CertificateAuthority> ca;
  std::unique_ptr<ssl::context> toward_cell;      // TLS server; the leaf is set per connection
  std::unique_ptr<ssl::context> toward_upstream;  // TLS client, verifying
  std::string error;  // non-empty: interception is impossible, for this reason
  SecretSink on_secret;
};

// Never fails: a problem is kept in `error` (and reported by EgressProxy::InterceptionReady).
std::shared_ptr<InterceptionShared> MakeInterceptionShared(std::shared_ptr<CertificateAuthority> ca,
                                                           const std::string& upstream_ca_file,
                                                           SecretSink on_secret);

// The cell's socket with the bytes the proxy already read from it put back in front (the
// start of a ClientHello sent together with CONNECT), as the next layer of an ssl::stream.
class PrefixedSocket {
 public:
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;

  PrefixedSocket(tcp::socket& socket, std::string prefix)
      : socket_(socket), prefix_(std::move(prefix)) {}
  executor_type get_executor() { return socket_.get_executor(); }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return socket_.lowest_layer(); }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (prefix_.empty()) return socket_.async_read_some(buffers, std::forward<Handler>(handler));
    size_t n = asio::buffer_copy(buffers, asio::buffer(prefix_));
    prefix_.erase(0, n);
    asio::post(socket_.get_executor(), beast::bind_front_handler(std::forward<Handler>(handler),
                                                                 boost::system::error_code{}, n));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    socket_.async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  tcp::socket& socket_;
  std::string prefix_;
};

// How an Interception reports to its Connection.
struct InterceptHooks {
  std::function<void(bool up, uint64_t bytes)> bytes;
  std::function<void()> activity;
  std::function<void(const std::string& text)> note;     // for the audit event's reason
  std::function<void(const std::string& line)> refusal;  // RefusalSink
  std::function<void(const std::string& why)> done;      // over: close the connection
};

class Interception : public std::enable_shared_from_this<Interception> {
 public:
  // client and upstream belong to the Connection, which outlives this object's work (it
  // closes them in Finish, which ends every pending operation). already_read: bytes the
  // cell sent after CONNECT that the proxy has read (the start of its ClientHello).
  Interception(const InterceptionShared& shared, const CellEgress& cell, Host host, uint16_t port,
               tcp::socket& client, std::string already_read, tcp::socket& upstream,
               InterceptHooks hooks);
  void Start();

 private:
  using ClientStream = ssl::stream<PrefixedSocket>;
  using UpstreamStream = ssl::stream<tcp::socket&>;

  void OnCellHandshake(const boost::system::error_code& ec);
  void OnUpstreamHandshake(const boost::system::error_code& ec);
  void ReadRequest();
  void OnRequestHeader(const boost::system::error_code& ec);
  void OnRequest(const boost::system::error_code& ec);
  void StartUpstreamTls(std::function<void(const boost::system::error_code&)> done);
  void Forward(SecretRequest request, std::vector<SecretMask> masks);
  void WriteForwarded();
  // An upstream failure before any answer byte: reconnect and resend when the connection
  // had served a request before (the server may have closed it as idle), else 502.
  void RetryOrFail(const std::string& what);
  void Reconnect();
  void ReadResponseHeader();
  void OnResponseHeader(const boost::system::error_code& ec);
  // The body streams with one upstream read beside one cell write: a piece read is masked
  // and framed into ready_ at once, written when the previous write is done (Pump).
  void ReadResponseBody();
  void OnResponseBody(boost::system::error_code ec);
  void Pump();
  void OnPieceWritten(const boost::system::error_code& ec, size_t n);
  void WriteToCell(std::string data);  // a whole answer without a body
  void AfterResponse();
  void Respond(int status, const std::string& line);  // over TLS, then close
  void Report(const std::string& secret, const std::string& surface, const std::string& decision,
              const std::string& reason, bool end_session);
  void Close(const std::string& why);
  std::string Target() const;

  const InterceptionShared& shared_;
  const CellEgress& cell_;
  const Host host_;
  const uint16_t port_;
  InterceptHooks hooks_;
  ClientStream cell_tls_;
  tcp::socket& upstream_socket_;
  std::optional<tcp::endpoint> upstream_endpoint_;
  std::optional<UpstreamStream> upstream_tls_;  // re-made on reconnect
  int upstream_requests_ = 0;                   // requests sent on the current upstream connection
  bool retried_ = false;                        // the current request was resent once already
  beast::flat_buffer cell_buf_, upstream_buf_;
  std::optional<http::request_parser<http::string_body>> request_;
  std::optional<http::request<http::string_body>> forwarded_;
  std::optional<http::response_parser<http::buffer_body>> response_;
  std::optional<SecretMasker> masker_;
  std::unique_ptr<char[]> body_buf_;
  std::string out_;             // bytes being written to the cell (from out_at_)
  size_t out_at_ = 0;
  std::string ready_;           // the next piece for the cell, masked and framed (from ready_at_)
  size_t ready_at_ = 0;
  bool has_ready_ = false;
  bool streaming_ = false;      // a response body is on its way
  bool reading_ = false, writing_ = false;
  bool body_read_ = false;      // the upstream body has been read to its end
  std::string body_error_;      // non-empty: reading the body failed; close once the rest is out
  std::string upstream_error_;  // non-empty: upstream TLS failed; requests get 502
  bool cell_keep_alive_ = true;
  bool cell_chunked_ = true;  // the answer's body goes to the cell chunked (HTTP/1.1)
  bool head_request_ = false;
  bool closed_ = false;
};

}  // namespace mcpcell::egress
