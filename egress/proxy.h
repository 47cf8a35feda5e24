// EgressProxy: the HTTP / HTTPS (CONNECT) proxy through which a cell reaches the network
// (DESIGN.md §5, docs/security.md "Network egress").
//
// The server owns one EgressProxy. For each cell it is handed the listening socket that cell
// init opened on 127.0.0.1 inside the cell's network namespace (AddCell) and serves every
// connection accepted there:
//   1. read one request head (http_request.h): CONNECT host:port, or GET http://host/...
//      (a request for an InternalRoute's host goes there, steps 2, 4 and 5 skipped)
//   2. match host:port against the cell's allowlist                   else 403
//   3. check the cell's concurrent-connection limit                    else 403
//   4. resolve the name (the hosts table, then the proxy's own resolver, never the cell's)
//                                                                      else 502
//   5. refuse every resolved address that ClassifyAddress() rejects unless the allowlist names
//      it; connect to the first remaining one that answers            else 403 / 502
//   6. CONNECT: answer 200, read the TLS ClientHello, require its SNI to equal the CONNECT
//      host (tls_sni.h), else close; plain HTTP: forward the head in origin-form with
//      "Connection: close" and the body by Content-Length
//   7. copy bytes both ways until either side closes or the idle timeout passes
// A CONNECT to a host:port that one of the cell's secret grants names is not tunnelled but
// intercepted after step 5 (intercept.h, docs/secrets.md): TLS terminated with a leaf of
// the proxy's CA, placeholders substituted or the request refused, responses masked. A
// plain-HTTP request that carries a placeholder is refused at step 1.
// Refusals are "HTTP/1.1 403 Forbidden (<line>)" with one line as the body, also in
// X-Mcpcell-Reason (the status line carries it too, for clients whose errors quote only
// that, such as Python's "Tunnel connection failed: 403 ..."):
//   mcpcell: egress to metadata.internal:80 denied: resolves to 169.254.169.254 (link-local)
// Every accepted connection ends in exactly one audit event (audit_log.h) with: time,
// session, tenant, method, host, port, address, decision ("allow"/"deny"), reason,
// bytes_up, bytes_down, duration_ms.
//
// Threading: the proxy runs an io_context on `threads` threads of its own. Each cell's
// acceptor and connections live on one strand, so a cell's state is touched by one thread
// at a time; different cells run in parallel. AddCell, RemoveCell and Stats may be called
// from any thread except from inside the audit sink or the resolver.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "egress/address.h"
#include "egress/allowlist.h"
#include "egress/audit_log.h"
#include "egress/hosts_file.h"
#include "egress/secret_grant.h"

namespace mcpcell::egress {

// What the proxy enforces for one cell.
struct CellEgress {
  std::string session_id;
  std::string tenant;
  Allowlist allowlist;                                // empty: every request is refused
  uint32_t max_connections = 32;                      // concurrent allowed (upstream) connections
  std::chrono::milliseconds connect_timeout{10'000};  // resolution, and each connect attempt
  std::chrono::milliseconds idle_timeout{300'000};    // no byte either way: closed
  // Placeholder secrets (secret_grant.h); their hosts should be inside `allowlist` (a
  // grant cannot open a host the allowlist refuses).
  std::vector<SecretGrant> secrets;
};

// Per-cell counters, read without stopping traffic.
struct EgressStats {
  uint64_t bytes_up = 0;             // client -> upstream (request heads, bodies, tunnel bytes)
  uint64_t bytes_down = 0;           // upstream -> client
  uint64_t connections_total = 0;    // accepted by the proxy
  uint64_t connections_active = 0;   // allowed and still open
  uint64_t connections_refused = 0;  // denied: policy, address, limit, SNI, bad request
};

using ResolveDone = std::function<void(Result<std::vector<IpAddress>> addresses)>;
// Resolves a host name; calls done exactly once, from any thread. Tests inject one.
using Resolver = std::function<void(const std::string& host, ResolveDone done)>;

// Told the one-line reason of every refusal (403), failure (502) and tunnel cut for a bad
// SNI, with the cell's session id, before the client can see the answer: the server shows
// them in the tool result of the call that caused them. Called on the proxy's threads, like
// AuditSink (same rules).
using RefusalSink = std::function<void(const std::string& session_id, const std::string& line)>;

// A service of the server itself that every cell may reach by name through its proxy,
// whatever its allowlist says (the package index: packages/service.h). Plain http:// on
// port 80 only (a CONNECT to it is refused); the request goes to address:port with the
// headers X-Mcpcell-Session and X-Mcpcell-Tenant set by the proxy from the cell's
// CellEgress (copies the cell sent are dropped), so the service knows whose request it is.
// The address rules do not apply: the route is the operator's, not the cell's choice.
struct InternalRoute {
  std::string host;  // a DNS name, matched case-insensitively
  IpAddress address;
  uint16_t port = 0;
};

class CertificateAuthority;  // tls_ca.h

struct EgressProxyOptions {
  int threads = 1;
  // Consulted first (hosts_file.h: `serve --egress-hosts`); its addresses go through the
  // same address rules as resolved ones.
  HostsTable hosts;
  Resolver resolver;       // empty: Boost.Asio's async resolver (getaddrinfo in the host netns)
  AuditSink audit;         // empty: events are dropped
  RefusalSink on_refusal;  // empty: not told
  // The host's own addresses, refused as destinations. nullopt: HostAddresses() once at
  // construction.
  std::optional<std::vector<IpAddress>> host_addresses;
  std::vector<InternalRoute> internal_routes;
  // TLS interception for secrets: the CA whose leaves the cells see (nullptr: the proxy
  // makes one at construction), and a PEM file of extra CAs trusted for upstreams besides
  // the system ones (`serve --egress-ca-file`; empty: none).
  std::shared_ptr<CertificateAuthority> interception_ca;
  std::string upstream_ca_file;
  SecretSink on_secret;            // every substitution and refusal; empty: not told
  size_t buffer_size = 64 * 1024;  // per direction per connection, allocated once
  std::chrono::milliseconds head_timeout{30'000};  // request head; ClientHello after 200
};

using EgressCellId = uint64_t;

class EgressProxy {
 public:
  explicit EgressProxy(EgressProxyOptions options = {});
  ~EgressProxy();  // removes every cell, then stops and joins the threads
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Serves connections accepted on listen_fd (a listening TCP socket) for this cell. Takes
  // ownership of listen_fd in every case: it is closed on error and by RemoveCell.
  Result<EgressCellId> AddCell(int listen_fd, CellEgress cell);

  // Closes the listener and every connection of the cell and emits their audit events
  // before it returns; the listening fd is closed by then. Returns the final counters, or
  // nullopt for an unknown id.
  std::optional<EgressStats> RemoveCell(EgressCellId id);

  std::optional<EgressStats> Stats(EgressCellId id) const;

  // The cell's processes were frozen (true) or thawed (false): while frozen, its
  // connections close `idle_timeout` after the pause whatever their upstreams send (a
  // frozen cell reads nothing of it). Any thread; false for an unknown id.
  bool SetCellPaused(EgressCellId id, bool paused);

  // Whether TLS interception can work (the CA was made, the upstream CA file loaded); the
  // error names the problem. A CONNECT that needs interception gets a 502 otherwise.
  Status InterceptionReady() const;
  // The CA certificate (PEM) cells must trust for intercepted hosts; empty if not ready.
  std::string InterceptionCaPem() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// "mcpcell: egress to <host>:<port> denied: <reason>" (host as written, v6 in brackets).
std::string DenialLine(const std::string& host, uint16_t port, const std::string& reason);

}  // namespace mcpcell::egress
