// Where the egress proxy's audit events go: a sink function the proxy's owner supplies
// (`mcpcell serve` writes each event to the audit trail as an egress.connection record,
// serve/serve_audit.h). egress/ itself knows nothing of the trail.
//
// One event per connection attempt, emitted when the connection ends (proxy.h lists the
// fields). Threading: see AuditSink.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace mcpcell::egress {

// Called on the proxy's threads, possibly from several at once (one per cell strand): it
// must be thread-safe, must not block for long and must not call back into the proxy.
using AuditSink = std::function<void(const nlohmann::json& event)>;

// "2025-01-31T12:34:56.789Z"
std::string Rfc3339UtcNow();

}  // namespace mcpcell::egress
