// SandboxHandles: the sandbox handles of the 2026-07-28 era, which has no protocol session:
// sandbox_create mints a handle, every cell tool names its cell by it (`sandbox`), and
// sandbox_close, idle time and the maximum lifetime end it. A handle is the key that a
// session id is in today's era (cells, usage, processes, secrets, audit key by it).
//
// Text form: `sbx_<32 hex>` (128 bits from OpenSSL's CSPRNG), or `sbx_<server id>_<32 hex>`
// when the server has an id (`serve --server-id`), so a router can send it to the server that
// minted it. Each handle maps to a session key of its own (`sandbox-<16 hex>`): the key is
// what the audit trail and logs show, never the handle, which is a bearer credential.
//
// Every lookup is authorized against the caller's tenant: another tenant's handle, an
// unknown one and a malformed one are all "not found" (nothing reveals that it exists). A
// closed or expired handle is remembered (bounded) so that its owner is told how to get a
// new one. Idle time and the maximum lifetime are checked on every lookup and mint; the cell
// manager's reaper ends them too (Ended). Ends are reported to the end listener, once per
// handle, outside the lock.
//
// Threading: every method is thread-safe; the end listener runs on the thread that noticed
// the end.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::serve {

// What a tenant's handles may do (from its policy's [time] and its max_sessions).
struct SandboxLimits {
  std::chrono::milliseconds idle{std::chrono::minutes(15)};
  std::chrono::milliseconds max_lifetime{std::chrono::hours(4)};
  size_t max_live = 64;  // live handles of the tenant at once (0 = no limit)
};

struct SandboxHandlesOptions {
  // This server's id (--server-id), carried in every handle it mints; "" = none. Letters,
  // digits, '-' and '.', at most 63 (a Kubernetes pod name).
  std::string server_id;
  // By tenant ("" = callers without a tenant). A tenant not listed may mint no handle.
  std::map<std::string, SandboxLimits> tenants;
  // The clock (tests); default steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// A handle just minted.
struct MintedSandbox {
  std::string handle;                                // the text the client passes as `sandbox`
  std::string key;                                   // the session key it maps to
  std::chrono::system_clock::time_point expires_at;  // the maximum lifetime's end
  SandboxLimits limits;
};

class SandboxHandles {
 public:
  using EndListener = std::function<void(const std::string& key, const std::string& tenant,
                                         const std::string& why)>;
  explicit SandboxHandles(SandboxHandlesOptions options);

  // Called once per handle that ends (closed, idle, lifetime): its session key, its tenant
  // and why; the server ends the cell and writes session.end there. Set it once the cells
  // exist (they need the handles first); nullptr clears it.
  void SetEndListener(EndListener fn);

  // Checks a --server-id value; an error names what is wrong with it.
  static Status CheckServerId(const std::string& id);

  // A new handle for `tenant`; an error when the tenant may mint none or is at its cap.
  Result<MintedSandbox> Mint(const std::string& tenant);
  // The session key of `handle` for a call by `tenant`, which is running until CallDone (a
  // handle with a call running is never idle); errors are whole tool-error texts naming the
  // argument (`arguments.sandbox: ...`).
  Result<std::string> Resolve(const std::string& handle, const std::string& tenant);
  // The end of a call that Resolve let in: its idle time starts from now.
  void CallDone(const std::string& key);
  // Ends `handle` (sandbox_close); the same errors as Resolve. Returns its key.
  Result<std::string> Close(const std::string& handle, const std::string& tenant);
  // The cell manager ended session `key` (idle, lifetime): when it is a handle's, the handle
  // ends with `why` (on_ended runs). False when `key` is no live handle's.
  bool Ended(const std::string& key, const std::string& why);
  // Whether `key` is a handle's session key (live or ended); e.g. handles do not hibernate.
  bool OwnsKey(const std::string& key) const;
  // Live handles of `tenant` (after ending the expired ones).
  size_t Live(const std::string& tenant);
  const std::string& server_id() const { return options_.server_id; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string key;
    std::string tenant;
    Clock::time_point created;
    Clock::time_point last_used;
    SandboxLimits limits;
    int calls_running = 0;
  };
  struct EndedEntry {
    std::string tenant;
    std::string why;
  };
  struct Ending {
    std::string key, tenant, why;
  };
  Clock::time_point Now() const;
  // Moves the expired entries to ended_ (under mu_); their ends are to be reported.
  void ExpireLocked(Clock::time_point now, std::vector<Ending>& ending);
  void EndLocked(std::map<std::string, Entry>::iterator it, const std::string& why,
                 std::vector<Ending>& ending);
  void Report(const std::vector<Ending>& ending) const;
  // The live entry of `handle` for `tenant`, or the error to give (under mu_).
  Result<std::map<std::string, Entry>::iterator> FindLocked(const std::string& handle,
                                                            const std::string& tenant);

  const SandboxHandlesOptions options_;
  mutable std::mutex mu_;
  EndListener on_ended_;
  std::map<std::string, Entry> live_;        // by handle text
  std::map<std::string, std::string> keys_;  // session key -> handle text, live ones
  std::map<std::string, EndedEntry> ended_;  // by handle text, bounded
  std::deque<std::string> ended_order_;      // ended_'s handles, oldest first
  std::set<std::string> ended_keys_;         // session keys of ended handles (bounded alike)
  std::deque<std::string> ended_keys_order_;
};

}  // namespace mcpcell::serve
