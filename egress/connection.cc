#include "egress/connection.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "egress/intercept.h"
#include "egress/tls_sni.h"

namespace mcpcell::egress {
namespace {

using Clock = std::chrono::steady_clock;
using boost::system::error_code;

// Upper bound on sockets a cell may hold open to the proxy (including ones not yet past
// the policy check), so a cell cannot exhaust the server's descriptors with idle sockets.
uint64_t SocketCap(uint32_t max_connections) { return 2ull * max_connections + 16; }

const char* StatusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 502:
      return "Bad Gateway";
    default:
      return "Error";
  }
}

// Reasons quote client input; keep the header and the audit line printable.
std::string Printable(std::string s) {
  for (char& c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  return s;
}

IpAddress FromAsio(const asio::ip::address& a) {
  IpAddress ip;
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
  } else {
    ip.v6 = true;
    auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
  }
  return ip;
}

asio::ip::address ToAsio(const IpAddress& ip) {
  if (!ip.v6) return asio::ip::address_v4({ip.bytes[0], ip.bytes[1], ip.bytes[2], ip.bytes[3]});
  asio::ip::address_v6::bytes_type b;
  std::copy(ip.bytes.begin(), ip.bytes.end(), b.begin());
  return asio::ip::address_v6(b);
}

}  // namespace

EgressStats CellCounters::Snapshot() const {
  return {bytes_up.load(), bytes_down.load(), total.load(), active.load(), refused.load()};
}

void AcceptNext(const std::shared_ptr<CellState>& cell) {
  cell->acceptor.async_accept([cell](error_code ec, tcp::socket socket) {
    if (cell->closed || ec == asio::error::operation_aborted) return;
    if (ec) {
      // EMFILE and the like: try again shortly instead of spinning on the error.
      cell->accept_retry.expires_after(std::chrono::milliseconds(100));
      cell->accept_retry.async_wait([cell](error_code tec) {
        if (!tec && !cell->closed) AcceptNext(cell);
      });
      return;
    }
    auto conn = std::make_shared<Connection>(cell, std::move(socket));
    cell->connections.insert(conn);
    conn->Start();
    AcceptNext(cell);
  });
}

Connection::Connection(std::shared_ptr<CellState> cell, tcp::socket client)
    : cell_(std::move(cell)),
      client_(std::move(client)),
      upstream_(cell_->strand),
      timer_(cell_->strand),
      resolver_(cell_->strand),
      started_(Clock::now()),
      last_activity_(started_) {}

std::string Connection::Target() const {
  if (!have_request_) return "?";
  return request_.target.host.Display() + ":" + std::to_string(request_.port());
}

void Connection::Note(const std::string& text) {
  reason_ = reason_.empty() ? text : reason_ + "; " + text;
}

void Connection::Start() {
  cell_->counters.total++;
  if (++cell_->counters.open_sockets > SocketCap(cell_->cfg.max_connections)) {
    reason_ = "more than " + std::to_string(SocketCap(cell_->cfg.max_connections)) +
              " sockets open to the proxy";
    cell_->counters.refused++;
    Finish();
    return;
  }
  error_code ec;
  client_.set_option(tcp::no_delay(true), ec);
  ArmTimer(cell_->shared.head_timeout);
  ReadHead();
}

void Connection::ReadHead() {
  size_t old = in_.size();
  in_.resize(std::min(kMaxRequestHead + 1, old + 4096));
  client_.async_read_some(asio::buffer(in_.data() + old, in_.size() - old),
                          [self = shared_from_this(), old](error_code ec, size_t n) {
                            if (self->finished_) return;
                            self->in_.resize(old + n);
                            if (ec) {
                              self->Note("client closed before a complete request head");
                              self->Finish();
                              return;
                            }
                            if (FindHeadEnd(self->in_) != 0) return self->OnHead();
                            if (self->in_.size() > kMaxRequestHead) {
                              self->Respond(
                                  400, "mcpcell: bad proxy request: request head larger than " +
                                           std::to_string(kMaxRequestHead) + " bytes");
                              return;
                            }
                            self->ReadHead();
                          });
}

void Connection::OnHead() {
  size_t end = FindHeadEnd(in_);
  Result<ProxyRequest> req = ParseProxyRequest(std::string_view(in_).substr(0, end));
  if (!req) {
    Respond(400, "mcpcell: bad proxy request: " + Printable(req.error().message));
    return;
  }
  request_ = std::move(req.value());
  have_request_ = true;
  // A placeholder never goes over plain HTTP: checked on the head and any body bytes read.
  if (!request_.is_connect && RefusePlaceholder(in_)) return;
  in_.erase(0, end);  // what follows belongs to the body or the tunnel
  Decide();
}

void Connection::Decide() {
  const Host& host = request_.target.host;
  if (!host.is_ip()) {
    for (const InternalRoute& route : cell_->shared.internal_routes) {
      if (!EqualsIgnoreCase(route.host, host.name)) continue;
      if (request_.is_connect || request_.port() != 80)
        return Deny("the server's service " + route.host +
                    " is reached with plain http:// (port 80)");
      if (!Admit("the server's own service " + route.host)) return;
      internal_ = &route;
      candidates_.push_back(route.address);
      return ConnectNext();
    }
  }
  const AllowEntry* entry = cell_->cfg.allowlist.Match(request_.target.host, request_.port());
  if (!entry) return Deny("not in the policy's allowlist");
  if (request_.is_connect)
    for (const SecretGrant& g : cell_->cfg.secrets)
      if (g.hosts.Match(request_.target.host, request_.port())) intercept_ = true;
  if (intercept_ && !cell_->shared.interception->error.empty())
    return Fail("cannot intercept TLS for the cell's secrets: " +
                cell_->shared.interception->error);
  if (Admit("allowed by " + entry->text + (intercept_ ? ", intercepted for secrets" : "")))
    Resolve();
}

bool Connection::Admit(const std::string& reason) {
  uint64_t active = cell_->counters.active.load();
  if (active >= cell_->cfg.max_connections) {
    Deny("the cell has " + std::to_string(active) + " connections open (limit " +
         std::to_string(cell_->cfg.max_connections) + ")");
    return false;
  }
  cell_->counters.active++;
  counted_active_ = true;
  decision_ = "allow";
  reason_ = reason;
  return true;
}

void Connection::Resolve() {
  phase_ = Phase::kResolve;
  ArmTimer(cell_->cfg.connect_timeout);
  const Host& host = request_.target.host;
  if (host.is_ip()) return OnResolved(std::vector<IpAddress>{*host.ip});
  if (auto pinned = cell_->shared.hosts.find(host.name); pinned != cell_->shared.hosts.end())
    return OnResolved(pinned->second);
  auto self = shared_from_this();
  if (cell_->shared.resolver) {
    cell_->shared.resolver(host.name, [self](Result<std::vector<IpAddress>> r) {
      asio::post(self->cell_->strand, [self, r = std::move(r)]() mutable {
        if (!self->finished_ && self->phase_ == Phase::kResolve) self->OnResolved(std::move(r));
      });
    });
    return;
  }
  resolver_.async_resolve(host.name, std::to_string(request_.port()),
                          [self](error_code ec, tcp::resolver::results_type results) {
                            if (self->finished_ || self->phase_ != Phase::kResolve) return;
                            if (ec) return self->OnResolved(Error::Msg(ec.message()));
                            std::vector<IpAddress> out;
                            for (const auto& r : results) {
                              IpAddress ip = FromAsio(r.endpoint().address());
                              if (std::find(out.begin(), out.end(), ip) == out.end())
                                out.push_back(ip);
                            }
                            self->OnResolved(std::move(out));
                          });
}

// Every address is checked; only the acceptable ones are tried. If none is acceptable the
// refusal names the first refused one, so the agent sees why.
void Connection::OnResolved(Result<std::vector<IpAddress>> addresses) {
  if (!addresses)
    return Fail("cannot resolve " + request_.target.host.name + ": " + addresses.error().message);
  if (addresses->empty())
    return Fail("cannot resolve " + request_.target.host.name + ": no addresses");
  std::string first_refusal;
  for (const IpAddress& ip : addresses.value()) {
    std::optional<std::string> why = ClassifyAddress(ip, cell_->shared.host_addresses);
    if (why && !cell_->cfg.allowlist.NamesAddress(ip, request_.port())) {
      if (first_refusal.empty()) {
        first_refusal = "resolves to " + ip.ToString() + " (" + *why + ")";
        address_ = ip;
      }
      continue;
    }
    candidates_.push_back(ip);
  }
  if (candidates_.empty()) {
    // Counted as allowed until here; the address rules refuse it.
    cell_->counters.active--;
    counted_active_ = false;
    decision_ = "deny";
    reason_.clear();
    return Deny(first_refusal);
  }
  ConnectNext();
}

void Connection::ConnectNext() {
  if (next_candidate_ >= candidates_.size()) return Fail(last_connect_error_, false);
  phase_ = Phase::kConnect;
  address_ = candidates_[next_candidate_++];
  ArmTimer(cell_->cfg.connect_timeout);
  error_code ignored;
  upstream_.close(ignored);
  upstream_.async_connect(
      tcp::endpoint(ToAsio(*address_), internal_ ? internal_->port : request_.port()),
      [self = shared_from_this()](error_code ec) {
        if (self->finished_ || self->phase_ != Phase::kConnect) return;
        if (!ec) return self->OnConnected();
        std::string what =
            ec == asio::error::operation_aborted ? std::string("timed out") : ec.message();
        self->last_connect_error_ = "connect to " + self->address_->ToString() + ": " + what;
        self->Note(self->last_connect_error_);
        self->ConnectNext();
      });
}

void Connection::OnConnected() {
  error_code ignored;
  upstream_.set_option(tcp::no_delay(true), ignored);
  if (!request_.is_connect) {
    // Plain HTTP: the forwarded head, then the body bytes already read (never more than
    // Content-Length: anything after the body is not sent upstream).
    std::vector<HttpHeader> set;
    if (internal_)
      set = {{"X-Mcpcell-Session", Printable(cell_->cfg.session_id)},
             {"X-Mcpcell-Tenant", Printable(cell_->cfg.tenant)}};
    std::string first = ForwardedHead(request_, set);
    size_t body = static_cast<size_t>(std::min<uint64_t>(request_.content_length, in_.size()));
    first.append(in_, 0, body);
    up_remaining_ = request_.content_length - body;
    bounded_up_ = true;
    in_.clear();
    return StartPipes(std::move(first));
  }
  phase_ = Phase::kClientHello;
  ArmTimer(cell_->shared.head_timeout);
  auto ok = std::make_shared<std::string>("HTTP/1.1 200 Connection Established\r\n\r\n");
  asio::async_write(
      client_, asio::buffer(*ok), [self = shared_from_this(), ok](error_code ec, size_t) {
        if (self->finished_) return;
        if (ec) {
          self->Note("client went away before the tunnel started");
          return self->Finish();
        }
        if (self->intercept_) return self->StartInterception();
        self->OnClientHelloBytes();  // the client may have sent the ClientHello with CONNECT
      });
}

void Connection::ReadClientHello() {
  size_t old = in_.size();
  in_.resize(std::min(kMaxClientHello, old + 4096));
  client_.async_read_some(asio::buffer(in_.data() + old, in_.size() - old),
                          [self = shared_from_this(), old](error_code ec, size_t n) {
                            if (self->finished_) return;
                            self->in_.resize(old + n);
                            if (ec) {
                              self->Note("client closed before its TLS ClientHello");
                              return self->Finish();
                            }
                            self->OnClientHelloBytes();
                          });
}

// The SNI decides whether the tunnel opens: an allowed name must not carry a TLS session
// for another name served from the same address (shared hosting, CDNs).
void Connection::OnClientHelloBytes() {
  if (in_.empty()) return ReadClientHello();
  SniResult sni = ExtractSni(in_);
  const Host& host = request_.target.host;
  std::string refusal;
  switch (sni.kind) {
    case SniResult::Kind::kNeedMore:
      return ReadClientHello();
    case SniResult::Kind::kInvalid:
      refusal = "TLS ClientHello expected after CONNECT: " + sni.value;
      break;
    case SniResult::Kind::kNoSni:
      if (!host.is_ip()) refusal = "no SNI in the TLS ClientHello for CONNECT host " + host.name;
      break;
    case SniResult::Kind::kName: {
      std::string name = sni.value;
      if (!name.empty() && name.back() == '.') name.pop_back();
      // An IP-literal CONNECT was allowed for the address itself; any name is fine there.
      if (!host.is_ip() && !EqualsIgnoreCase(name, host.name))
        refusal = "SNI " + Printable(sni.value) + " does not match CONNECT host " + host.name;
      break;
    }
  }
  if (!refusal.empty()) {
    cell_->counters.active--;
    counted_active_ = false;
    cell_->counters.refused++;
    decision_ = "deny";
    reason_ = refusal;
    TellRefusal(DenialLine(host.Display(), request_.port(), refusal));
    return Finish();  // TLS has begun: no HTTP answer is possible, the tunnel just closes
  }
  std::string first = std::move(in_);
  in_.clear();
  StartPipes(std::move(first));
}

void Connection::StartPipes(std::string first_up) {
  phase_ = Phase::kPipe;
  last_activity_ = Clock::now();
  ArmTimer(cell_->cfg.idle_timeout);
  up_buf_ = std::make_unique<char[]>(cell_->shared.buffer_size);
  down_buf_ = std::make_unique<char[]>(cell_->shared.buffer_size);
  pending_up_ = std::move(first_up);
  up_writing_ = true;
  asio::async_write(upstream_, asio::buffer(pending_up_),
                    [self = shared_from_this()](error_code ec, size_t n) {
                      if (!self->UpWritten(ec, n)) return;
                      self->pending_up_.clear();
                      // A body scanned for placeholders goes through the buffers; one
                      // that is not (or its absence) never reaches user space.
                      if (self->InspectsBody() || (self->bounded_up_ && self->up_remaining_ == 0) ||
                          !self->StartSplice(true)) {
                        self->PumpUp();
                      }
                    });
  if (!StartSplice(false)) PumpDown();
}

Connection::~Connection() {
  for (KernelPipe* p : {&up_pipe_, &down_pipe_}) {
    if (p->r >= 0) ::close(p->r);
    if (p->w >= 0) ::close(p->w);
  }
}

bool Connection::StartSplice(bool up) {
  KernelPipe& p = up ? up_pipe_ : down_pipe_;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  p.r = fds[0];
  p.w = fds[1];
  // Fewer splice rounds per MiB (1 MiB is the unprivileged pipe-max-size default); if the
  // kernel refuses, the default 64 KiB pipe works too, only with more rounds.
  (void)::fcntl(p.w, F_SETPIPE_SZ, 1024 * 1024);
  error_code ec;
  client_.native_non_blocking(true, ec);
  if (!ec) upstream_.native_non_blocking(true, ec);
  if (ec) return false;
  Splice(up);
  return true;
}

void Connection::Splice(bool up) {
  if (finished_) return;
  tcp::socket& from = up ? client_ : upstream_;
  tcp::socket& to = up ? upstream_ : client_;
  KernelPipe& p = up ? up_pipe_ : down_pipe_;
  auto again = [self = shared_from_this(), up](error_code ec) {
    if (self->finished_) return;
    if (ec) {
      self->Note(std::string(up ? "upstream" : "client") + " wait: " + ec.message());
      return self->Finish();
    }
    self->Splice(up);
  };
  // A bounded number of rounds, then yield, so one fast transfer cannot starve the
  // other connections of the cell's strand.
  for (int round = 0; round < 16; ++round) {
    while (p.pending > 0) {
      ssize_t n = ::splice(p.r, nullptr, to.native_handle(), nullptr, p.pending,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        p.pending -= static_cast<size_t>(n);
        (up ? bytes_up_ : bytes_down_) += static_cast<uint64_t>(n);
        (up ? cell_->counters.bytes_up : cell_->counters.bytes_down) += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        if (up) up_writing_ = true;  // bytes for upstream wait in the pipe
        return to.async_wait(tcp::socket::wait_write, again);
      }
      Note(std::string(up ? "upstream" : "client") + " write: " + std::strerror(errno));
      return Finish();
    }
    size_t want = 1 << 20;
    if (up && bounded_up_) {  // plain HTTP: the body's bytes only, as PumpUp does
      up_writing_ = false;
      if (down_done_) return Finish();  // the answer ended while the body was on its way
      if (up_remaining_ == 0) return OnDirectionDone(true);
      want = static_cast<size_t>(std::min<uint64_t>(want, up_remaining_));
    }
    ssize_t n = ::splice(from.native_handle(), nullptr, p.w, nullptr, want,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      p.pending = static_cast<size_t>(n);
      if (up && bounded_up_) up_remaining_ -= static_cast<uint64_t>(n);
      last_activity_ = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      return from.async_wait(tcp::socket::wait_read,
                             [self = shared_from_this(), up](error_code ec) {
                               if (self->finished_) return;
                               if (ec) return self->OnDirectionDone(up);
                               self->Splice(up);
                             });
    }
    return OnDirectionDone(up);  // 0: the sender half-closed; an error ends this direction too
  }
  asio::post(cell_->strand, [self = shared_from_this(), up] { self->Splice(up); });
}

void Connection::PumpUp() {
  if (bounded_up_ && up_remaining_ == 0) return OnDirectionDone(true);
  size_t want = cell_->shared.buffer_size;
  if (bounded_up_) want = static_cast<size_t>(std::min<uint64_t>(want, up_remaining_));
  client_.async_read_some(
      asio::buffer(up_buf_.get(), want), [self = shared_from_this()](error_code ec, size_t n) {
        if (self->finished_) return;
        if (ec) return self->OnDirectionDone(true);
        self->last_activity_ = Clock::now();
        if (self->bounded_up_ && !self->cell_->cfg.secrets.empty() && self->ScanBody(n)) return;
        if (self->bounded_up_) self->up_remaining_ -= n;
        self->up_writing_ = true;
        asio::async_write(self->upstream_, asio::buffer(self->up_buf_.get(), n),
                          [self](error_code wec, size_t written) {
                            if (self->UpWritten(wec, written)) self->PumpUp();
                          });
      });
}

void Connection::PumpDown() {
  upstream_.async_read_some(asio::buffer(down_buf_.get(), cell_->shared.buffer_size),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              if (self->finished_) return;
                              if (ec) return self->OnDirectionDone(false);
                              self->last_activity_ = Clock::now();
                              asio::async_write(self->client_,
                                                asio::buffer(self->down_buf_.get(), n),
                                                [self](error_code wec, size_t written) {
                                                  if (self->finished_) return;
                                                  self->bytes_down_ += written;
                                                  self->cell_->counters.bytes_down += written;
                                                  if (wec) {
                                                    self->Note("client write: " + wec.message());
                                                    return self->Finish();
                                                  }
                                                  self->PumpDown();
                                                });
                            });
}

// A side finished sending: pass the half-close on. Plain HTTP ends with the response (the
// upstream closes: Connection: close); a tunnel ends when both directions have.
bool Connection::UpWritten(const error_code& ec, size_t n) {
  up_writing_ = false;
  if (finished_) return false;
  bytes_up_ += n;
  cell_->counters.bytes_up += n;
  if (ec) {
    Note("upstream write: " + ec.message());
    Finish();
    return false;
  }
  if (bounded_up_ && down_done_) {  // the answer ended while this write was in flight
    Finish();
    return false;
  }
  return true;
}

void Connection::OnDirectionDone(bool up) {
  error_code ignored;
  if (up) {
    up_done_ = true;
    if (!bounded_up_) upstream_.shutdown(tcp::socket::shutdown_send, ignored);
  } else {
    down_done_ = true;
    client_.shutdown(tcp::socket::shutdown_send, ignored);
  }
  if (down_done_ && (up_done_ || (bounded_up_ && !up_writing_))) Finish();
}

void Connection::Deny(const std::string& reason) {
  cell_->counters.refused++;
  decision_ = "deny";
  reason_ = reason;
  Respond(403, DenialLine(have_request_ ? request_.target.host.Display() : "?",
                          have_request_ ? request_.port() : 0, reason));
}

void Connection::Fail(const std::string& reason, bool note) {
  if (note) Note(reason);
  Respond(502, "mcpcell: egress to " + Target() + " failed: " + reason);
}

void Connection::TellRefusal(const std::string& line) {
  if (!cell_->shared.on_refusal) return;
  try {
    cell_->shared.on_refusal(cell_->cfg.session_id, line);
  } catch (...) {
    // Like the audit sink: never takes the proxy thread down.
  }
}

void Connection::Respond(int status, const std::string& line) {
  if (status == 400) {
    cell_->counters.refused++;
    decision_ = "deny";
    reason_ = line.substr(line.find(": ") + 2);
  } else {
    TellRefusal(line);  // 403 and 502: the agent's request was understood and not served
  }
  if (counted_active_) {
    cell_->counters.active--;
    counted_active_ = false;
  }
  std::string body = line + "\n";
  response_ = "HTTP/1.1 " + std::to_string(status) + " " + StatusText(status) + " (" + line +
              ")\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nX-Mcpcell-Reason: " + line +
              "\r\nConnection: close\r\n\r\n" + body;
  phase_ = Phase::kDrain;
  ArmTimer(std::chrono::seconds(2));
  asio::async_write(client_, asio::buffer(response_),
                    [self = shared_from_this()](error_code ec, size_t) {
                      if (self->finished_) return;
                      if (ec) return self->Finish();
                      // Half-close and read what the client still sends (a body we will not use)
                      // until it closes or the timer fires, so that closing does not reset the
                      // connection and destroy the answer before the client has read it.
                      error_code ignored;
                      self->client_.shutdown(tcp::socket::shutdown_send, ignored);
                      self->DrainClient();
                    });
}

void Connection::DrainClient() {
  in_.resize(4096);
  client_.async_read_some(asio::buffer(in_), [self = shared_from_this()](error_code ec, size_t) {
    if (self->finished_) return;
    if (ec) return self->Finish();
    self->DrainClient();
  });
}

void Connection::ArmTimer(Clock::duration after) {
  uint64_t generation = ++timer_generation_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || self->finished_ || generation != self->timer_generation_) return;
    self->OnTimer();
  });
}

void Connection::OnTimer() {
  switch (phase_) {
    case Phase::kHead:
      Note("timed out waiting for the request head");
      return Finish();
    case Phase::kResolve:
      return Fail("cannot resolve " + request_.target.host.name + ": timed out");
    case Phase::kConnect: {
      error_code ignored;
      upstream_.close(ignored);  // the connect handler sees operation_aborted, tries the next
      return;
    }
    case Phase::kClientHello:
      Note("timed out waiting for the TLS ClientHello");
      return Finish();
    case Phase::kPipe: {
      auto idle_until = last_activity_ + cell_->cfg.idle_timeout;
      // A paused cell's connection is idle from the pause on, whatever its upstream sends.
      if (int64_t paused = cell_->paused_since.load(); paused != 0) {
        idle_until = std::min(idle_until,
                              Clock::time_point(Clock::duration(paused)) + cell_->cfg.idle_timeout);
      }
      if (Clock::now() < idle_until) return ArmTimer(idle_until - Clock::now());
      Note("idle timeout");
      return Finish();
    }
    case Phase::kDrain:
    case Phase::kDone:
      return Finish();
  }
}

void Connection::Abort(const std::string& why) {
  if (finished_) return;
  Note(why);
  Finish();
}

void Connection::Finish() {
  if (finished_) return;
  finished_ = true;
  interception_.reset();  // its pending handlers hold it until the closes below end them
  phase_ = Phase::kDone;
  error_code ignored;
  timer_.cancel();
  resolver_.cancel();
  client_.close(ignored);
  upstream_.close(ignored);
  if (counted_active_) cell_->counters.active--;
  counted_active_ = false;
  cell_->counters.open_sockets--;
  if (cell_->shared.audit) {
    using Ms = std::chrono::duration<double, std::milli>;
    nlohmann::json event = {
        {"time", Rfc3339UtcNow()},
        {"session", cell_->cfg.session_id},
        {"tenant", cell_->cfg.tenant},
        {"method", have_request_ ? nlohmann::json(request_.method) : nlohmann::json(nullptr)},
        {"host",
         have_request_ ? nlohmann::json(request_.target.host.name) : nlohmann::json(nullptr)},
        {"port", have_request_ ? nlohmann::json(request_.port()) : nlohmann::json(nullptr)},
        {"address", address_ ? nlohmann::json(address_->ToString()) : nlohmann::json(nullptr)},
        {"decision", decision_},
        {"reason", Printable(reason_)},
        {"bytes_up", bytes_up_},
        {"bytes_down", bytes_down_},
        {"duration_ms", std::round(Ms(Clock::now() - started_).count() * 1000) / 1000},
    };
    try {
      cell_->shared.audit(event);
    } catch (...) {
      // A failing sink must not take the proxy thread down; the event is lost.
    }
  }
  // Last: this may drop the final reference held by the cell.
  auto self = shared_from_this();
  cell_->connections.erase(self);
}

}  // namespace mcpcell::egress
