// A secret the operator granted to one cell in placeholder mode (issue 26): the cell holds
// only `placeholder`; the egress proxy puts the real value in its place, in the surfaces
// allowed, for requests to the secret's hosts over TLS that the proxy terminates
// (intercept.h). The cell's CellEgress (proxy.h) carries its grants.
//
// The value is read through `value` each time a request needs it, so a rotated source
// (file, vault command) takes effect from the next request on; the proxy never stores it
// beyond the request and the response it masks.
// Threading: a grant is immutable once in CellEgress; `value` may be called from any of the
// proxy's threads (it must be thread-safe, and should not block for long).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "egress/allowlist.h"

namespace mcpcell::egress {

// Where in a request a placeholder may be replaced.
struct SecretSurfaces {
  bool header = true;      // any request header value, except Authorization: Basic
  bool basic_auth = true;  // inside the decoded "user:password" of Authorization: Basic
  bool query = true;       // the query string of the request target
  bool body = false;       // JSON and form (application/x-www-form-urlencoded) bodies
};

struct SecretGrant {
  std::string name;                            // the variable name in the cell ("GITHUB_TOKEN")
  std::string placeholder;                     // what the cell holds ("mcpcell-secret-...")
  std::function<Result<std::string>()> value;  // the real value, read when needed
  Allowlist hosts;  // where the value may go (a subset of the cell's allowlist)
  SecretSurfaces surfaces;
  // After this instant nothing is substituted any more; a placeholder seen then is refused.
  std::chrono::steady_clock::time_point expires = std::chrono::steady_clock::time_point::max();
  // A refusal for this secret asks the server to end the session (SecretSink's flag).
  bool end_session_on_violation = false;
};

// One substitution or refusal, for the audit log and the tool result; never the value.
struct SecretEvent {
  std::string session_id;
  std::string secret;        // SecretGrant::name
  std::string host;          // the request's host ("api.github.com:443")
  std::string surface;       // "header", "basic_auth", "query", "body", "url_path", ...
  std::string decision;      // "substituted" or "refused"
  std::string reason;        // refused: the one line the cell got; substituted: empty
  bool end_session = false;  // refused and the secret says block_and_end_session
};

// Told every SecretEvent, on the proxy's threads (same rules as AuditSink); a refusal is
// reported before the cell can read the 403.
using SecretSink = std::function<void(const SecretEvent& event)>;

}  // namespace mcpcell::egress
