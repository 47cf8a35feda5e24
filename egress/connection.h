// Internal to egress/ (includes Boost): one cell's serving state and one proxied
// connection. proxy.h is the public face; this header is only for proxy.cc and
// connection.cc.
//
// Ownership: CellState is shared by the proxy's cell table and by pending handlers; it owns
// its connections (a set of shared_ptr) until each one finishes. Threading: everything
// marked "strand" is touched only on the cell's strand; counters are atomics that Stats()
// reads from any thread.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "egress/http_request.h"
#include "egress/proxy.h"

namespace mcpcell::egress {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

class Interception;
struct InterceptionShared;

// What every cell shares: set once by the proxy, read-only afterwards.
struct ProxyShared {
  HostsTable hosts;
  Resolver resolver;
  AuditSink audit;
  RefusalSink on_refusal;
  std::vector<IpAddress> host_addresses;
  size_t buffer_size = 0;
  std::chrono::milliseconds head_timeout{0};
  std::vector<InternalRoute> internal_routes;
  std::shared_ptr<InterceptionShared> interception;  // never null
};

struct CellCounters {
  std::atomic<uint64_t> bytes_up{0}, bytes_down{0};
  std::atomic<uint64_t> total{0}, active{0}, refused{0};
  std::atomic<uint64_t> open_sockets{0};  // accepted and not yet closed (allowed or not)
  EgressStats Snapshot() const;
};

class Connection;

struct CellState {
  CellState(asio::io_context& io, EgressCellId cell_id, CellEgress config,
            const ProxyShared& proxy_shared)
      : id(cell_id),
        cfg(std::move(config)),
        shared(proxy_shared),
        strand(io.get_executor()),
        acceptor(strand),
        accept_retry(strand) {}

  const EgressCellId id;
  const CellEgress cfg;
  const ProxyShared& shared;
  Strand strand;
  tcp::acceptor acceptor;                             // strand
  asio::steady_timer accept_retry;                    // strand: backoff after accept errors
  std::set<std::shared_ptr<Connection>> connections;  // strand
  bool closed = false;                                // strand
  CellCounters counters;
  // When the cell's processes were frozen (steady_clock ticks; 0: running), set by
  // EgressProxy::SetCellPaused from any thread. A frozen cell reads nothing, so bytes its
  // upstreams keep sending must not hold its connections open: idle time counts from here.
  std::atomic<int64_t> paused_since{0};
};

// Starts accepting on cell->acceptor (strand).
void AcceptNext(const std::shared_ptr<CellState>& cell);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<CellState> cell, tcp::socket client);
  ~Connection();
  void Start();                        // strand
  void Abort(const std::string& why);  // strand: close both sides, emit the audit event

 private:
  enum class Phase { kHead, kResolve, kConnect, kClientHello, kPipe, kDrain, kDone };

  void ReadHead();
  void OnHead();
  void Decide();
  // Counts the connection against the cell's limit and records the decision; false (and a
  // 403 on its way) when the cell is at its limit.
  bool Admit(const std::string& reason);
  void Resolve();
  void OnResolved(Result<std::vector<IpAddress>> addresses);
  void ConnectNext();
  void OnConnected();
  void ReadClientHello();
  void OnClientHelloBytes();
  // A placeholder in a plain-HTTP request: 403 (or, once body bytes went upstream, a cut),
  // told to the sinks. True when it refused.
  bool RefusePlaceholder(std::string_view raw);
  bool ScanBody(size_t n);
  void StartInterception();
  void StartPipes(std::string first_up);
  void PumpUp();
  void PumpDown();
  // The kernel-side pump: bytes move socket -> pipe -> socket with splice(2), never through
  // user space (half the CPU of read/write on a fast link). Used for both directions of a
  // tunnel, for responses, and for plain-HTTP request bodies that are not scanned (bounded
  // by Content-Length like PumpUp); false when its pipe cannot be made (the caller then
  // pumps through the buffers). TLS interception has its own path (intercept.cc).
  bool StartSplice(bool up);
  // A plain-HTTP request body is scanned for placeholders: the cell has secrets.
  bool InspectsBody() const { return bounded_up_ && !cell_->cfg.secrets.empty(); }
  void Splice(bool up);
  void OnDirectionDone(bool up);
  // Accounts a finished write to upstream; false when the connection is (now) over.
  bool UpWritten(const boost::system::error_code& ec, size_t n);
  void TellRefusal(const std::string& line);          // ProxyShared::on_refusal, if set
  void Respond(int status, const std::string& line);  // writes, drains, finishes
  void Deny(const std::string& reason);
  void Fail(const std::string& reason, bool note = true);
  void DrainClient();
  void Finish();
  void ArmTimer(std::chrono::steady_clock::duration after);
  void OnTimer();
  std::string Target() const;  // "host:port"
  void Note(const std::string& text);

  std::shared_ptr<CellState> cell_;
  tcp::socket client_, upstream_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  tcp::resolver resolver_;
  Phase phase_ = Phase::kHead;
  bool finished_ = false;
  bool counted_active_ = false;

  std::string in_;  // request head, then the ClientHello, as read from the client
  ProxyRequest request_;
  bool have_request_ = false;
  std::vector<IpAddress> candidates_;
  size_t next_candidate_ = 0;
  std::optional<IpAddress> address_;         // the address tried last or connected to
  const InternalRoute* internal_ = nullptr;  // the request goes to this service of the server
  bool intercept_ = false;                   // a CONNECT to a host of the cell's secrets
  std::shared_ptr<Interception> interception_;
  std::string up_tail_;  // plain HTTP with secrets: the body's last bytes, for a split placeholder
  std::string last_connect_error_;

  std::unique_ptr<char[]> up_buf_, down_buf_;
  struct KernelPipe {
    int r = -1, w = -1;
    size_t pending = 0;  // bytes in the pipe not yet written to the destination
  };
  KernelPipe up_pipe_, down_pipe_;
  uint64_t up_remaining_ = 0;  // plain HTTP: body bytes still to forward
  bool bounded_up_ = false;    // plain HTTP: up direction stops after the body
  bool up_done_ = false, down_done_ = false;
  // A write to upstream is in flight: a plain-HTTP connection whose answer has already
  // ended waits for it, so the audit event and the counters include those bytes.
  bool up_writing_ = false;
  std::string pending_up_;  // first bytes for upstream (head or ClientHello)
  std::string response_;    // refusal being written

  std::chrono::steady_clock::time_point started_, last_activity_;
  uint64_t bytes_up_ = 0, bytes_down_ = 0;
  std::string decision_ = "deny";
  std::string reason_;
};

}  // namespace mcpcell::egress
