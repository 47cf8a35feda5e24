// mcpcell's own log messages to the MCP client: notifications/message with logger
// "mcpcell" and data {"event": <name>, "message": <one sentence>} (docs/tools.md "Log
// messages"), each filtered by the client's logging/setLevel. They say what happened to the
// session's sandbox (a cell replaced, a refusal, the lifetime running out); never a secret,
// a program's output or a file's contents. As a second line of defence the session's secret
// values are redacted from every message (a refusal may quote what a cell sent).
//
// During a tool call a message goes through the call's mcp::Context (LogCallWarning), so it
// is related to that request (Streamable HTTP sends it on the request's stream). What
// happens outside any request (the egress proxy or the package service refusing the
// session's cell) goes through the SessionLogRouter, which finds the mcp::Session by its
// id: the session key of the cell.
//
// Threading: LogCallWarning on the call's handler thread. SessionLogRouter is thread-safe;
// Warn runs on any thread (the proxy's, the package service's) and calls into the session
// with no lock of its own held. Attach(nullptr) waits for lookups in progress: after it
// the Server may go (a session already found keeps what it uses alive and, closed, drops
// the message).
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "mcp/context.h"
#include "mcp/server.h"
#include "tools/redaction.h"

namespace mcpcell::tools {

inline constexpr char kClientLogger[] = "mcpcell";

// The "event" of each message (all at level warning).
inline constexpr char kEventCellReplaced[] = "cell_replaced";      // the previous cell is gone
inline constexpr char kEventSessionEnding[] = "session_ending";    // near the maximum lifetime
inline constexpr char kEventEgressRefused[] = "egress_refused";    // the cell's proxy refused
inline constexpr char kEventPackageRefused[] = "package_refused";  // the package rules refused

// {"event": event, "message": message}
mcp::Json ClientLogData(std::string_view event, std::string message);

// A warning related to the call `ctx` serves; `secret_values` (may be null or empty): the
// session's secret values are redacted from the message (tools/redaction.h).
void LogCallWarning(const mcp::Context& ctx, std::string_view event, std::string message,
                    const SecretValuesFn* secret_values = nullptr);

class SessionLogRouter {
 public:
  // The server whose sessions Warn reaches; nullptr detaches (waits for Warns in progress).
  void Attach(mcp::Server* server);
  // The sessions' secret values, redacted from every message Warn sends (set before the
  // proxy and the package service start; empty: nothing to redact).
  void SetSecretValues(SecretValuesFn values);
  // A warning to the session with id `session_id`; dropped when there is none (closed,
  // not attached).
  void Warn(const std::string& session_id, std::string_view event, std::string message);

  // Detaches on destruction: declare it after the server.
  struct DetachGuard {
    SessionLogRouter& router;
    ~DetachGuard() { router.Attach(nullptr); }
  };

 private:
  std::mutex mu_;  // held only while finding the session
  mcp::Server* server_ = nullptr;
  SecretValuesFn secret_values_;  // mu_
};

}  // namespace mcpcell::tools
