// CellEgressView: what the tools read of a cell's egress proxy, and nothing else: its
// counters and allowlist for session_info, and the refusals of one call for run_command,
// run_code and the package tools. `mcpcell serve` implements it with the registry that
// wires cells to the proxy (serve/egress_registry.h); the tools never see that wiring.
// Threading: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mcpcell::tools {

struct CellEgressReport {
  uint64_t bytes_up = 0;               // cell -> upstream
  uint64_t bytes_down = 0;             // upstream -> cell
  uint64_t connections_total = 0;      // accepted by the proxy
  uint64_t connections_active = 0;     // allowed and still open
  uint64_t connections_refused = 0;    // denied: policy, address, limit, SNI, bad request
  std::vector<std::string> allowlist;  // the entries as the policy wrote them
};

class CellEgressView {
 public:
  virtual ~CellEgressView() = default;
  // The proxy's counters for a bound cell, by cell id; nullopt for an unknown cell.
  virtual std::optional<CellEgressReport> Report(const std::string& cell_id) const = 0;
  // A position in the refusals of the session that `cell_id` is bound to: take it before
  // a call, then RefusalsSince with the same cell.
  virtual uint64_t RefusalCursor(const std::string& cell_id) const = 0;
  // That session's refusal lines after `cursor` (the most recent ones, bounded).
  virtual std::vector<std::string> RefusalsSince(const std::string& cell_id,
                                                 uint64_t cursor) const = 0;
};

}  // namespace mcpcell::tools
