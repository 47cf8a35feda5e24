#include "egress/intercept.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstring>
#include <limits>

namespace mcpcell::egress {
namespace {

using boost::system::error_code;

constexpr size_t kBodyPiece = 128 * 1024;

// Headers the proxy does not pass on: hop-by-hop ones, framing it redoes, and the encoding
// it replaces with identity (masking must see the bytes as sent).
bool HopByHop(std::string_view name) {
  for (std::string_view h :
       {"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate",
        "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"})
    if (EqualsIgnoreCase(name, h)) return true;
  return false;
}

std::string Printable(std::string s) {
  for (char& c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  return s;
}

std::string StatusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 413:
      return "Content Too Large";
    default:
      return "Bad Gateway";
  }
}

// Room left before a piece's masked bytes for its chunk header ("%zx\r\n" of a size_t).
constexpr size_t kChunkRoom = 2 * sizeof(size_t) + 2;

// Frames s[room..] as one chunk without moving it: the header goes into the room before it
// (right-aligned), the chunk's end after it; the last piece gets the terminating chunk.
// Returns where the bytes to send begin.
size_t FrameChunk(std::string& s, size_t room, bool last) {
  size_t at = room;
  if (s.size() > room) {
    char size[kChunkRoom + 1];
    int len = std::snprintf(size, sizeof size, "%zx\r\n", s.size() - room);
    at = room - static_cast<size_t>(len);
    std::memcpy(s.data() + at, size, static_cast<size_t>(len));
    s += "\r\n";
  }
  if (last) s += "0\r\n\r\n";
  return at;
}

}  // namespace

std::shared_ptr<InterceptionShared> MakeInterceptionShared(std::shared_ptr<CertificateAuthority> ca,
                                                           const std::string& upstream_ca_file,
                                                           SecretSink on_secret) {
  auto shared = std::make_shared<InterceptionShared>();
  shared->on_secret = std::move(on_secret);
  if (!ca) {
    Result<std::shared_ptr<CertificateAuthority>> made = CertificateAuthority::Create();
    if (!made) {
      shared->error = made.error().message;
      return shared;
    }
    ca = made.value();
  }
  shared->ca = std::move(ca);
  shared->toward_cell = std::make_unique<ssl::context>(ssl::context::tls_server);
  shared->toward_cell->set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  shared->toward_upstream = std::make_unique<ssl::context>(ssl::context::tls_client);
  error_code ec;
  shared->toward_upstream->set_default_verify_paths(ec);
  if (!ec && !upstream_ca_file.empty())
    shared->toward_upstream->load_verify_file(upstream_ca_file, ec);
  if (ec) {
    shared->error = "upstream CA file " +
                    (upstream_ca_file.empty() ? "(system)" : upstream_ca_file) + ": " +
                    ec.message();
    return shared;
  }
  shared->toward_upstream->set_verify_mode(ssl::verify_peer);
  return shared;
}

Interception::Interception(const InterceptionShared& shared, const CellEgress& cell, Host host,
                           uint16_t port, tcp::socket& client, std::string already_read,
                           tcp::socket& upstream, InterceptHooks hooks)
    : shared_(shared),
      cell_(cell),
      host_(std::move(host)),
      port_(port),
      hooks_(std::move(hooks)),
      cell_tls_(PrefixedSocket(client, std::move(already_read)), *shared.toward_cell),
      upstream_socket_(upstream) {
  error_code ec;
  tcp::endpoint remote = upstream.remote_endpoint(ec);
  if (!ec) upstream_endpoint_ = remote;
  upstream_tls_.emplace(upstream, *shared.toward_upstream);
}

std::string Interception::Target() const { return host_.Display() + ":" + std::to_string(port_); }

void Interception::Start() {
  Result<std::shared_ptr<const LeafCertificate>> leaf = shared_.ca->LeafFor(host_.name);
  if (!leaf) return Close(leaf.error().message);
  SSL* ssl = cell_tls_.native_handle();
  if (SSL_use_certificate(ssl, (*leaf)->cert.get()) != 1 ||
      SSL_use_PrivateKey(ssl, (*leaf)->key.get()) != 1) {
    ERR_clear_error();
    return Close("cannot use the leaf certificate for " + host_.name);
  }
  cell_tls_.async_handshake(
      ssl::stream_base::server,
      [self = shared_from_this()](const error_code& ec) { self->OnCellHandshake(ec); });
}

void Interception::OnCellHandshake(const error_code& ec) {
  if (closed_) return;
  if (ec) return Close("TLS handshake with the cell: " + ec.message());
  hooks_.activity();
  const char* sni = SSL_get_servername(cell_tls_.native_handle(), TLSEXT_NAMETYPE_host_name);
  std::string name = sni ? sni : "";
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (!host_.is_ip() && !EqualsIgnoreCase(name, host_.name)) {
    std::string why = "SNI " + Printable(name.empty() ? "(none)" : name) +
                      " does not match CONNECT host " + host_.name;
    hooks_.refusal(DenialLine(host_.Display(), port_, why));
    return Close(why);
  }
  StartUpstreamTls(
      [self = shared_from_this()](const error_code& uec) { self->OnUpstreamHandshake(uec); });
}

void Interception::StartUpstreamTls(std::function<void(const error_code&)> done) {
  SSL* ssl = upstream_tls_->native_handle();
  bool named = host_.is_ip()
                   ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host_.name.c_str()) == 1
                   : SSL_set_tlsext_host_name(ssl, host_.name.c_str()) == 1 &&
                         SSL_set1_host(ssl, host_.name.c_str()) == 1;
  if (!named) {
    ERR_clear_error();
    return Close("cannot set the upstream TLS name " + host_.name);
  }
  upstream_tls_->async_handshake(ssl::stream_base::client, std::move(done));
}

void Interception::OnUpstreamHandshake(const error_code& ec) {
  if (closed_) return;
  if (ec) {
    long verify = SSL_get_verify_result(upstream_tls_->native_handle());
    upstream_error_ = "TLS with the upstream: " + ec.message();
    if (verify != X509_V_OK)
      upstream_error_ +=
          std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
    hooks_.note(upstream_error_);
  }
  ReadRequest();
}

void Interception::ReadRequest() {
  request_.emplace();
  request_->header_limit(static_cast<uint32_t>(kMaxRequestHead));
  request_->body_limit(kMaxInterceptedBody);
  http::async_read_header(
      cell_tls_, cell_buf_, *request_,
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnRequestHeader(ec); });
}

void Interception::OnRequestHeader(const error_code& ec) {
  if (closed_) return;
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == ssl::error::stream_truncated)
    return Close("");
  if (ec) return Respond(400, "mcpcell: bad request to " + Target() + ": " + ec.message());
  hooks_.activity();
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->cell_tls_, self->cell_buf_, *self->request_,
                     [self](const error_code& rec, size_t) { self->OnRequest(rec); });
  };
  auto expect = request_->get().find(http::field::expect);
  if (expect == request_->get().end() ||
      !EqualsIgnoreCase(std::string(expect->value()), "100-continue"))
    return read_body();
  out_ = "HTTP/1.1 100 Continue\r\n\r\n";
  asio::async_write(cell_tls_, asio::buffer(out_),
                    [self = shared_from_this(), read_body](const error_code& wec, size_t) {
                      if (self->closed_) return;
                      if (wec) return self->Close("cell write: " + wec.message());
                      read_body();
                    });
}

void Interception::OnRequest(const error_code& ec) {
  if (closed_) return;
  if (ec == http::error::body_limit)
    return Respond(413, "mcpcell: request body to " + Target() + " larger than " +
                            std::to_string(kMaxInterceptedBody) +
                            " bytes (bodies to hosts with secrets are checked whole)");
  if (ec) return Respond(400, "mcpcell: bad request to " + Target() + ": " + ec.message());
  hooks_.activity();
  http::request<http::string_body> in = request_->release();
  cell_keep_alive_ = in.keep_alive();
  cell_chunked_ = in.version() >= 11;  // HTTP/1.0 clients get the body framed by the close
  head_request_ = in.method() == http::verb::head;
  SecretRequest request{
      std::string(in.method_string()), std::string(in.target()), {}, std::move(in.body())};
  for (const auto& field : in)
    request.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  if (!upstream_error_.empty())
    return Respond(502, "mcpcell: egress to " + Target() + " failed: " + upstream_error_);
  SecretRequestContext context{host_, port_, true, std::chrono::steady_clock::now()};
  SecretSubstitution result = SubstituteSecrets(request, cell_.secrets, context);
  if (result.refusal) {
    const SecretRefusal& r = *result.refusal;
    Report(r.secret, r.surface, "refused", r.Line(), r.end_session);
    hooks_.refusal(r.Line());
    return Respond(403, r.Line());
  }
  for (const auto& [secret, surface] : result.substituted)
    Report(secret, surface, "substituted", "", false);
  std::vector<SecretMask> masks = MasksForHost(cell_.secrets, host_, port_);
  for (SecretMask& m : result.masks) masks.push_back(std::move(m));
  Forward(std::move(request), std::move(masks));
}

void Interception::Forward(SecretRequest request, std::vector<SecretMask> masks) {
  masker_.emplace(masks);
  forwarded_.emplace();
  http::request<http::string_body>& out = *forwarded_;
  out.version(11);
  out.method_string(request.method);
  out.target(request.target);
  for (const HttpHeader& h : request.headers)
    if (!HopByHop(h.name) && !EqualsIgnoreCase(h.name, "Accept-Encoding") &&
        !EqualsIgnoreCase(h.name, "Content-Length"))
      out.insert(h.name, h.value);
  out.set(http::field::accept_encoding, "identity");
  out.body() = std::move(request.body);
  out.prepare_payload();
  out.keep_alive(true);
  retried_ = false;
  WriteForwarded();
}

void Interception::WriteForwarded() {
  ++upstream_requests_;
  http::async_write(*upstream_tls_, *forwarded_,
                    [self = shared_from_this()](const error_code& ec, size_t n) {
                      if (self->closed_) return;
                      self->hooks_.bytes(true, n);
                      if (ec) return self->RetryOrFail("upstream write: " + ec.message());
                      self->ReadResponseHeader();
                    });
}

void Interception::RetryOrFail(const std::string& what) {
  if (upstream_requests_ > 1 && !retried_ && upstream_endpoint_) {
    retried_ = true;
    hooks_.note("upstream closed a kept-alive connection (" + what + "); reconnected");
    return Reconnect();
  }
  Respond(502, "mcpcell: egress to " + Target() + " failed: " + what);
}

void Interception::Reconnect() {
  error_code ignored;
  upstream_tls_.reset();
  upstream_socket_.close(ignored);
  upstream_buf_.clear();
  upstream_requests_ = 0;
  upstream_socket_.async_connect(
      *upstream_endpoint_, [self = shared_from_this()](const error_code& ec) {
        if (self->closed_) return;
        if (ec) return self->RetryOrFail("reconnect to " + self->Target() + ": " + ec.message());
        self->upstream_tls_.emplace(self->upstream_socket_, *self->shared_.toward_upstream);
        self->StartUpstreamTls([self](const error_code& hec) {
          if (self->closed_) return;
          if (hec) return self->RetryOrFail("TLS with the upstream again: " + hec.message());
          self->WriteForwarded();
        });
      });
}

void Interception::ReadResponseHeader() {
  response_.emplace();
  // Unbounded (the body is streamed). Not boost::none: Boost 1.74 compares a Content-Length
  // against an empty optional and fails every response that has one.
  response_->body_limit(std::numeric_limits<std::uint64_t>::max());
  if (head_request_) response_->skip(true);
  http::async_read_header(
      *upstream_tls_, upstream_buf_, *response_,
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnResponseHeader(ec); });
}

void Interception::OnResponseHeader(const error_code& ec) {
  if (closed_) return;
  // Closed before a byte of the answer: what a server's idle timeout looks like.
  bool closed_before_answer = ec == http::error::end_of_stream || ec == asio::error::eof ||
                              ec == ssl::error::stream_truncated ||
                              ec == asio::error::connection_reset;
  if (ec && closed_before_answer) return RetryOrFail("upstream answer: " + ec.message());
  if (ec)
    return Respond(502,
                   "mcpcell: egress to " + Target() + " failed: upstream answer: " + ec.message());
  hooks_.activity();
  const auto& head = response_->get();
  int status = head.result_int();
  if (status >= 100 && status < 200) return ReadResponseHeader();  // interim: not passed on
  bool body = !response_->is_done();
  cell_keep_alive_ = cell_keep_alive_ && response_->keep_alive();
  std::string text = "HTTP/1.1 " + std::to_string(status) + " " +
                     masker_->MaskAll(std::string(head.reason())) + "\r\n";
  for (const auto& field : head) {
    std::string_view name(field.name_string().data(), field.name_string().size());
    if (HopByHop(name) || (body && EqualsIgnoreCase(name, "Content-Length"))) continue;
    text += std::string(name) + ": " + masker_->MaskAll(std::string(field.value())) + "\r\n";
  }
  if (body && !cell_chunked_) cell_keep_alive_ = false;
  if (body && cell_chunked_) text += "Transfer-Encoding: chunked\r\n";
  if (!cell_keep_alive_) text += "Connection: close\r\n";
  text += "\r\n";
  if (!body) return WriteToCell(std::move(text));
  if (!body_buf_) body_buf_ = std::make_unique<char[]>(kBodyPiece);
  // Beast reads at most the buffer's free capacity per call: from the header's small buffer
  // that is a fraction of a TLS record, one trip through the event loop each.
  upstream_buf_.reserve(kBodyPiece);
  ready_ = std::move(text);
  ready_at_ = 0;
  has_ready_ = streaming_ = true;
  reading_ = writing_ = body_read_ = false;
  body_error_.clear();
  Pump();
}

void Interception::ReadResponseBody() {
  reading_ = true;
  auto& body = response_->get().body();
  body.data = body_buf_.get();
  body.size = kBodyPiece;
  http::async_read(
      *upstream_tls_, upstream_buf_, *response_,
      [self = shared_from_this()](error_code ec, size_t) { self->OnResponseBody(ec); });
}

void Interception::OnResponseBody(error_code ec) {
  reading_ = false;
  if (closed_) return;
  if (ec == http::error::need_buffer) ec = {};
  // A body that ends with the connection may end without TLS close_notify.
  if (ec == ssl::error::stream_truncated && response_->need_eof()) {
    ec = {};
    response_->put_eof(ec);
  }
  if (ec) {
    body_error_ = "upstream answer body: " + ec.message();
    return Pump();
  }
  hooks_.activity();
  size_t got = kBodyPiece - response_->get().body().size;
  bool last = response_->is_done();
  size_t room = cell_chunked_ ? kChunkRoom : 0;
  ready_.assign(room, ' ');
  masker_->Feed(std::string_view(body_buf_.get(), got), &ready_);
  if (last) masker_->Finish(&ready_);
  ready_at_ = cell_chunked_ ? FrameChunk(ready_, room, last) : 0;
  has_ready_ = true;
  body_read_ = last;
  Pump();
}

void Interception::Pump() {
  if (closed_ || !streaming_) return;
  if (!writing_ && has_ready_) {
    has_ready_ = false;
    if (ready_.size() > ready_at_) {  // a piece may mask to nothing yet (all held back)
      out_.swap(ready_);
      out_at_ = ready_at_;
      writing_ = true;
      asio::async_write(cell_tls_, asio::buffer(out_.data() + out_at_, out_.size() - out_at_),
                        [self = shared_from_this()](const error_code& ec, size_t n) {
                          self->OnPieceWritten(ec, n);
                        });
    }
  }
  if (!reading_ && !has_ready_ && !body_read_ && body_error_.empty()) ReadResponseBody();
  if (writing_ || reading_ || has_ready_) return;
  streaming_ = false;
  if (!body_error_.empty()) return Close(body_error_);
  AfterResponse();
}

void Interception::OnPieceWritten(const error_code& ec, size_t n) {
  writing_ = false;
  if (closed_) return;
  hooks_.bytes(false, n);
  if (ec) return Close("cell write: " + ec.message());
  Pump();
}

void Interception::WriteToCell(std::string data) {
  out_ = std::move(data);
  asio::async_write(cell_tls_, asio::buffer(out_),
                    [self = shared_from_this()](const error_code& ec, size_t n) {
                      if (self->closed_) return;
                      self->hooks_.bytes(false, n);
                      if (ec) return self->Close("cell write: " + ec.message());
                      self->AfterResponse();
                    });
}

void Interception::AfterResponse() {
  if (cell_keep_alive_) return ReadRequest();
  cell_tls_.async_shutdown([self = shared_from_this()](const error_code&) { self->Close(""); });
}

void Interception::Respond(int status, const std::string& line) {
  std::string body = line + "\n";
  out_ = "HTTP/1.1 " + std::to_string(status) + " " + StatusText(status) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nX-Mcpcell-Reason: " + Printable(line) +
         "\r\nConnection: close\r\n\r\n" + body;
  if (status == 502) hooks_.refusal(line);
  hooks_.note(line);
  asio::async_write(
      cell_tls_, asio::buffer(out_), [self = shared_from_this()](const error_code& ec, size_t n) {
        if (self->closed_) return;
        self->hooks_.bytes(false, n);
        if (ec) return self->Close("");
        self->cell_tls_.async_shutdown([self](const error_code&) { self->Close(""); });
      });
}

void Interception::Report(const std::string& secret, const std::string& surface,
                          const std::string& decision, const std::string& reason,
                          bool end_session) {
  // Only refusals go into the connection's audit reason (Respond notes them): a kept-alive
  // connection may carry any number of substitutions; the SecretSink records each one.
  if (!shared_.on_secret) return;
  try {
    shared_.on_secret(
        SecretEvent{cell_.session_id, secret, Target(), surface, decision, reason, end_session});
  } catch (...) {
    // Like the audit sink: never takes the proxy thread down.
  }
}

void Interception::Close(const std::string& why) {
  if (closed_) return;
  closed_ = true;
  hooks_.done(why);
}

}  // namespace mcpcell::egress
