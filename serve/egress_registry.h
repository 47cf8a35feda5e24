// EgressRegistry: the server's side of the egress proxy (DESIGN.md §5). It connects each
// sandbox cell to the proxy and lets the tools read what the proxy saw.
//
// `mcpcell serve` owns one registry, which owns the one EgressProxy (options from
// ServeEgressOptions: the audit sink, the --egress-hosts table). Through the CellSessionManager's
// hooks, Bind runs when a cell is bound to a session (fresh or from the warm pool): it takes
// the cell's listening socket (Cell::TakeEgressListener) and adds it to the proxy with the
// session key, the tenant and the allowlist and limits of that session's policy (one
// CellEgress per cell profile, set at start), plus the session's placeholder secrets
// (SessionSecrets::Grant, which also writes its file secrets into the cell). Unbind runs
// before the cell is destroyed, removes it from the proxy (closing its connections) and
// releases the session's secrets when it was the session's last cell. session_info reads
// the counters (Stats); run_command and run_code show the refusals of their call
// (RefusalsSince), which the proxy reports through OnRefusal before the program can see the
// answer. The package service's refusals come in the same way (serve/serve_packages.h
// RefusalRelay). Each refusal of a bound session is also passed to the refusal listener
// (`mcpcell serve`: a warning to that MCP session, tools/client_log.h).
//
// Threading: every method is thread-safe. OnRefusal is called on the proxy's threads (and
// the package service's) and takes only the registry's own lock, which it releases before
// calling the listener; Unbind calls the proxy without holding it (the proxy emits audit
// events and refusals while a cell is removed).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "egress/proxy.h"
#include "sandbox/cell.h"
#include "serve/session_secrets.h"
#include "tools/egress_view.h"

namespace mcpcell::serve {

// The proxy's options as `mcpcell serve` runs it: audit events to `audit` (the audit
// trail, serve_audit.h), names in `hosts_file` (hosts(5); "" = none) pinned.
Result<egress::EgressProxyOptions> ServeEgressOptions(egress::AuditSink audit,
                                                      const std::string& hosts_file);

// Who refused: the cell's egress proxy, or the package service (a package index request).
enum class RefusalSource { kEgressProxy, kPackageService };
// Told every refusal of a session whose cell is bound, with its one-line reason.
using RefusalListener = std::function<void(const std::string& session_key, const std::string& line,
                                           RefusalSource source)>;

class EgressRegistry final : public tools::CellEgressView {
 public:
  // Starts the proxy (its on_refusal is this registry's OnRefusal).
  explicit EgressRegistry(egress::EgressProxyOptions options);
  ~EgressRegistry();  // stops the proxy first (it reports its last connections here)
  EgressRegistry(const EgressRegistry&) = delete;
  EgressRegistry& operator=(const EgressRegistry&) = delete;

  // What the proxy enforces for cells of `profile` ("" = the server's own policy); the
  // session and tenant are filled in by Bind. Start-up only.
  void SetProfile(const std::string& profile, egress::CellEgress config);

  // Start-up: the sessions' secrets, granted to each cell at Bind and released when the
  // session's last cell is unbound. Must outlive the registry's cells (nullptr: none).
  void SetSecrets(SessionSecrets* secrets);
  // The proxy's TLS interception (placeholder secrets): ready, and the CA cells must trust.
  Status InterceptionReady() const { return proxy_->InterceptionReady(); }
  std::string InterceptionCaPem() const { return proxy_->InterceptionCaPem(); }

  // CellHooks::on_bound. An error (no listener, unknown profile, the proxy refused the
  // socket) fails the Acquire: a cell is never used without its proxy.
  Status Bind(sandbox::CellInstance& cell, const std::string& session_key,
              const std::string& profile);
  // CellHooks::on_destroying. Unknown cells are ignored.
  void Unbind(sandbox::CellInstance& cell);

  // CellHooks::on_paused / on_unpaused: a frozen cell's connections stop counting what
  // their upstreams send as activity (egress::EgressProxy::SetCellPaused). Unknown cells
  // are ignored.
  void SetPaused(const sandbox::CellInstance& cell, bool paused);

  // tools::CellEgressView: the proxy's counters for a bound cell, by cell id.
  std::optional<tools::CellEgressReport> Report(const std::string& cell_id) const override;

  // Start-up: the listener every later refusal goes to (replaces any earlier one). It must
  // outlive the registry and the package service.
  void SetRefusalListener(RefusalListener listener);
  // The proxy's RefusalSink: Record, then the listener.
  void OnRefusal(const std::string& session_key, const std::string& line);
  // Keeps a refusal for RefusalsSince when `session_key`'s cell is bound, and returns the
  // listener to tell it to (empty: not bound, or none); the caller calls it holding no
  // lock (the package service's relay records under its own).
  RefusalListener Record(const std::string& session_key, const std::string& line);
  // A position in the refusals of the session that `cell_id` is bound to: take it before
  // a call, then RefusalsSince with the same cell.
  uint64_t RefusalCursor(const std::string& cell_id) const override;
  // That session's refusal lines after `cursor` (at most the last kKeptRefusals).
  std::vector<std::string> RefusalsSince(const std::string& cell_id,
                                         uint64_t cursor) const override;
  static constexpr size_t kKeptRefusals = 20;

 private:
  struct Bound {
    egress::EgressCellId id;
    std::string session_key;
    std::vector<std::string> allowlist;
  };
  // (sequence, line), the last kKeptRefusals of a session.
  using Refusals = std::deque<std::pair<uint64_t, std::string>>;

  mutable std::mutex mu_;
  std::map<std::string, egress::CellEgress> profiles_;  // by profile
  std::map<std::string, Bound> cells_;                  // by sandbox cell id
  std::map<std::string, Refusals> refusals_;            // by session key; dropped with its cell
  uint64_t next_refusal_ = 0;                   // one sequence for all, so cursors never repeat
  RefusalListener listener_;                    // called outside mu_
  SessionSecrets* secrets_ = nullptr;           // not owned (SetSecrets)
  std::unique_ptr<egress::EgressProxy> proxy_;  // last: destroyed first
};

}  // namespace mcpcell::serve
