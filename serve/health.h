// Health and readiness of `mcpcell serve`, for load balancers and orchestrators:
//
//   GET /healthz  200 "ok\n": the process serves HTTP.
//   GET /readyz   200 "ready\n" when it can make a cell now; else 503 with
//                 {"status": "not ready", "failing": ["state_dir", ...]}.
//
// Readiness runs named checks (state dir writable, audit trail writable when [audit]
// required, cell init present, no warm pool failing to make cells) and keeps the result for
// `max_age`, so a probe every second costs one round of checks per max_age at most. Both routes are
// unauthenticated and say nothing beyond ok/not-ok and the failing checks' names; the
// reasons go to the log when the readiness changes.
// Threading: Readiness::Check may be called from any thread; checks run one round at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/http_server.h"

namespace mcpcell::serve {

struct ReadinessCheck {
  std::string name;             // e.g. "state_dir"; shown in the 503 body
  std::function<Status()> run;  // Ok when the check passes; the error is logged, not shown
};

struct ReadinessReport {
  bool ready = false;
  std::vector<std::string> failing;  // names of the failing checks, in check order
};

class Readiness {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `clock` unset: steady_clock::now.
  Readiness(std::vector<ReadinessCheck> checks, std::chrono::milliseconds max_age,
            Clock clock = {});

  // The last round's result while it is younger than max_age; else a new round.
  ReadinessReport Check();

 private:
  const std::vector<ReadinessCheck> checks_;
  const std::chrono::milliseconds max_age_;
  const Clock clock_;
  std::mutex mu_;
  bool have_ = false;
  std::chrono::steady_clock::time_point checked_at_;
  ReadinessReport last_;
};

// Ok when a file can be made in `dir` (an unnamed O_TMPFILE where the filesystem has it,
// else a named probe file removed at once); the error names the directory and errno.
Status DirWritable(const std::string& dir);

// GET /healthz and GET /readyz as routes for the HTTP listeners.
std::vector<mcp::HttpRoute> HealthRoutes(std::shared_ptr<Readiness> readiness);

}  // namespace mcpcell::serve
