// One HTTP connection of HttpServer (plain TCP or TLS), on its own strand of the I/O
// threads: read a request, hand it to the handler pool, write the answer (a whole body or
// an SSE stream written as its events come), then the next request. See http_listener.h.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <type_traits>

#include "mcp/http_listener.h"
#include "mcp/http_server_impl.h"

namespace mcp {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kMaxHeaderBytes = 64 * 1024;

// "%41b" -> "Ab"; `query`: "+" is a space too.
std::string UrlDecode(std::string_view s, bool query) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (query && s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

void SplitTarget(std::string_view target, HttpRequest& req) {
  size_t q = target.find('?');
  req.path = UrlDecode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      req.params.emplace_back(
          UrlDecode(pair.substr(0, eq), true),
          eq == std::string_view::npos ? "" : UrlDecode(pair.substr(eq + 1), true));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

template <class S>
class HttpConnection : public HttpConnectionBase,
                       public std::enable_shared_from_this<HttpConnection<S>> {
 public:
  static constexpr bool kTls = !std::is_same_v<S, beast::tcp_stream>;

  template <class... Args>
  HttpConnection(HttpServer::Impl& impl, HttpListener& listener, Args&&... args)
      : impl_(impl),
        listener_(listener),
        stream_(std::forward<Args>(args)...),
        probe_(stream_.get_executor()) {
    error_code ec;
    auto ep = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
    if (!ec) {
      peer_addr_ = ep.address().to_string();
      peer_port_ = ep.port();
    }
  }
  ~HttpConnection() override { listener_.Forget(this); }

  void Start() override {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Lowest().expires_after(self->impl_.opts.request_timeout);
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](error_code ec) {
          if (ec) return self->Close();
          self->ReadHeader();
        });
      } else {
        self->ReadHeader();
      }
    });
  }

  void Shutdown() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  std::shared_ptr<HttpConnection> Self() { return this->shared_from_this(); }

  // ---- reading ----

  void ReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(impl_.max_body_hard_limit);
    // An idle keep-alive connection, and a header trickled in, end at this bound.
    Lowest().expires_after(impl_.opts.keep_alive_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = Self()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec) return OnReadError(ec);
    auto& req = parser_->get();
    method_ = std::string(req.method_string());
    path_ = std::string(req.target().substr(0, req.target().find('?')));
    keep_alive_ = req.keep_alive();
    auto expect = req.find(http::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      Lowest().expires_after(impl_.opts.request_timeout);
      return net::async_write(stream_, net::buffer(kContinue),
                              [self = Self()](error_code wec, size_t) {
                                if (wec) return self->Close();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    // The body (and what is left of the header) must arrive within this bound: a body
    // trickled in byte by byte is cut off.
    Lowest().expires_after(impl_.opts.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnReadError(error_code ec) {
    keep_alive_ = false;
    if (ec == http::error::body_limit) {
      return RefuseRequest(413, "Payload Too Large: the request body exceeds the limit of " +
                                    std::to_string(impl_.max_body_hard_limit) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return RefuseRequest(431, "Request Header Fields Too Large: the header exceeds " +
                                    std::to_string(kMaxHeaderBytes) + " bytes");
    }
    const auto& http_errors = http::make_error_code(http::error::end_of_stream).category();
    if (ec.category() == http_errors && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      return RefuseRequest(400, "Bad Request: malformed HTTP request (" + ec.message() + ")");
    }
    Close();  // the peer closed, or the time limit passed
  }

  void RefuseRequest(int status, const std::string& message) {
    if (method_.empty()) method_ = "?";
    HttpResponse res;
    JsonError(res, status, message);
    Respond(std::move(res));
  }

  void OnBody(error_code ec) {
    if (ec) return OnReadError(ec);
    Lowest().expires_never();  // no limit while the handler runs
    auto msg = parser_->release();
    parser_.reset();
    HttpRequest req;
    req.method = method_;
    SplitTarget(std::string_view(msg.target().data(), msg.target().size()), req);
    for (const auto& field : msg) {
      req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    req.body = std::move(msg.body());
    req.remote_addr = peer_addr_;
    req.remote_port = peer_port_;
    impl_.Handle(std::move(req), [self = Self()](HttpResponse res) {
      net::post(self->stream_.get_executor(),
                [self, res = std::move(res)]() mutable { self->Respond(std::move(res)); });
    });
  }

  // ---- writing ----

  void Respond(HttpResponse res) {
    if (closed_) return;  // an SSE lease in `res` is released with it
    impl_.Answered(method_, path_, res);
    if (res.sse) return StartSse(std::move(res));
    auto out = std::make_shared<http::response<http::string_body>>();
    out->result(static_cast<unsigned>(res.status));
    out->version(11);
    for (const auto& [name, value] : res.headers) out->insert(name, value);
    if (!res.content_type.empty()) out->set(http::field::content_type, res.content_type);
    out->body() = std::move(res.body);
    out->keep_alive(keep_alive_);
    out->prepare_payload();
    Lowest().expires_after(impl_.opts.request_timeout);
    http::async_write(stream_, *out,
                      [self = Self(), out](error_code ec, size_t) { self->AfterAnswer(ec); });
  }

  // The answer is out: the next request on a kept-alive connection, else close.
  void AfterAnswer(error_code ec) {
    if (ec || !keep_alive_) return Close();
    method_.clear();
    ReadHeader();
  }

  // ---- SSE ----
  // The answer is written by hand in chunked encoding so that whatever is ready goes out
  // in one write: the head, the preamble and the first events, and the last chunk when
  // the stream is already finished (a quick call's whole answer is one write).

  void StartSse(HttpResponse res) {
    sse_ = std::move(*res.sse);
    sse_next_ = sse_->from;
    head_ = "HTTP/1.1 200 OK\r\n";
    for (const auto& [name, value] : res.headers) head_ += name + ": " + value + "\r\n";
    head_ += "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n";
    if (!keep_alive_) head_ += "Connection: close\r\n";
    head_ += "\r\n";
    chunk_ = sse_->preamble;
    PumpSse();
  }

  void PumpSse() {
    if (closed_ || !sse_) return;
    std::weak_ptr<HttpConnection> weak = Self();
    auto ex = stream_.get_executor();
    auto waker = [weak, ex] {
      net::post(ex, [weak] {
        if (auto self = weak.lock()) self->OnWake();
      });
    };
    SseStep step = impl_.NextSse(*sse_, sse_next_, waker);
    // Then: finished already, or wait. A stream flooded faster than it is written goes
    // out in pieces of at most a stream's worth of events.
    while (step.kind == SseStep::kWrite) {
      chunk_ += step.frames;
      if (chunk_.size() >= kMaxBytesPerStream) break;
      step = impl_.NextSse(*sse_, sse_next_, waker);
    }
    if (step.kind == SseStep::kDisplaced) return Close();
    const bool end = step.kind == SseStep::kEnd;
    out_ = std::move(head_);
    head_.clear();
    if (!chunk_.empty()) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", chunk_.size());
      out_ += size + chunk_ + "\r\n";
      chunk_.clear();
    }
    if (end) out_ += "0\r\n\r\n";
    if (out_.empty()) {
      waiting_ = true;
      Lowest().expires_never();
      probe_.expires_after(step.probe);
      probe_.async_wait([self = Self()](error_code ec) { self->OnProbe(ec); });
      return;
    }
    // A client that stops reading is dropped after this bound; meanwhile the stream
    // keeps only its newest events (kMaxEventsPerStream), so memory stays bounded.
    Lowest().expires_after(impl_.opts.request_timeout);
    net::async_write(stream_, net::buffer(out_), [self = Self(), end](error_code ec, size_t) {
      if (ec) return self->Close();
      if (!end) return self->PumpSse();
      self->sse_.reset();  // releases the lease: the stream is left
      self->AfterAnswer(ec);
    });
  }

  void OnWake() {
    if (!waiting_) return;
    waiting_ = false;
    probe_.cancel();
    PumpSse();
  }

  // Nothing came for a while: a comment keeps proxies from timing the stream out, and a
  // failing write tells that the client is gone.
  void OnProbe(error_code ec) {
    if (ec == net::error::operation_aborted || !waiting_ || closed_) return;
    waiting_ = false;
    chunk_ += ": keep-alive\n\n";
    PumpSse();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    waiting_ = false;
    probe_.cancel();
    sse_.reset();
    error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();
  }

  HttpServer::Impl& impl_;
  HttpListener& listener_;
  S stream_;
  net::steady_timer probe_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string peer_addr_;
  int peer_port_ = 0;
  std::string method_, path_;  // of the request being answered
  bool keep_alive_ = true;
  bool closed_ = false;
  // The SSE answer being written: its attachment, the next seq, the head not yet written,
  // the next chunk's data (preamble, frames, keep-alive comments) and what is being written.
  std::optional<SseAttachment> sse_;
  int sse_next_ = 1;
  std::string head_, chunk_, out_;
  bool waiting_ = false;  // for events or the probe timer
};

}  // namespace

std::shared_ptr<HttpConnectionBase> MakeHttpConnection(HttpServer::Impl& impl,
                                                       HttpListener& listener, tcp::socket socket,
                                                       net::ssl::context* tls) {
  if (tls != nullptr) {
    return std::make_shared<HttpConnection<beast::ssl_stream<beast::tcp_stream>>>(
        impl, listener, std::move(socket), *tls);
  }
  return std::make_shared<HttpConnection<beast::tcp_stream>>(impl, listener, std::move(socket));
}

}  // namespace mcp
