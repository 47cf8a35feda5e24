// SessionSecrets: the secrets each MCP session holds (policy [[secrets]], docs/secrets.md),
// owned by `mcpcell serve` beside the egress registry.
//
// When a session's cell is bound (EgressRegistry::Bind), Grant makes the session's grants
// once: per secret a placeholder "mcpcell-secret-<128 random bits, hex>" and an expiry (the
// session's start + ttl). Placeholder secrets become egress::SecretGrants for the proxy,
// whose value function reads the source on each request; file secrets are written to
// /run/secrets/NAME in the cell (tmpfs, mode 0400, the sandbox user's) and removed at expiry
// (checked on each exec and session_info) and when the session's cell goes (Release); a
// cell that replaces it in the same session gets the same placeholders and expiry.
// Values are never kept: each need reads the source again, so rotation takes effect at
// once, and the bytes of every value read here are wiped after use.
//
// A refusal of a `block_and_end_session` secret (OnSecretEvent, on the proxy's threads) ends
// the session through the `end_session` callback on this object's own thread, never on the
// proxy's (closing the session removes its cell from the proxy).
// Threading: every method is thread-safe; callbacks are called without the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "egress/secret_grant.h"
#include "policies/policy.h"
#include "policies/secret_source.h"
#include "sandbox/cell.h"
#include "tools/secrets_view.h"

namespace mcpcell::serve {

inline constexpr const char* kCellSecretsDir = "/run/secrets";

// Ends a session (CellSessionManager::Close) with a reason naming the secret.
using EndSession = std::function<void(const std::string& session_key, const std::string& reason)>;

class SessionSecrets final : public tools::SecretsView {
 public:
  explicit SessionSecrets(policies::SecretReadOptions read_options = {});
  ~SessionSecrets();  // stops the session-ending thread
  SessionSecrets(const SessionSecrets&) = delete;
  SessionSecrets& operator=(const SessionSecrets&) = delete;

  // Start-up: the secrets of the cells of `profile` ("" = the server's own policy).
  void SetProfile(const std::string& profile, std::vector<policies::SecretPolicy> secrets);
  // Start-up: how a violation of a block_and_end_session secret ends its session; set it
  // back to nullptr before what it calls goes (it waits for a call in progress).
  void SetEndSession(EndSession end_session);

  // At bind: the session's grants (made on its first cell), the placeholder ones for the
  // proxy; file secrets are written into `cell`, which must stay valid until Release.
  Result<std::vector<egress::SecretGrant>> Grant(sandbox::CellInstance& cell,
                                                 const std::string& session_key,
                                                 const std::string& profile);
  // The session's cell is going: its files are removed. The grants (placeholders, expiry;
  // never a value) are kept for a cell that replaces it in the same session, up to the last
  // kKeptReleased released sessions.
  void Release(const std::string& session_key);
  static constexpr size_t kKeptReleased = 4096;

  // The proxy's SecretSink.
  void OnSecretEvent(const egress::SecretEvent& event);

  // tools::SecretsView
  Result<std::vector<std::string>> ExecEnv(const std::string& session_key) const override;
  std::vector<std::string> Names(const std::string& session_key) const override;
  std::vector<tools::SecretStatus> Describe(const std::string& session_key) const override;
  std::vector<tools::SecretValue> Values(const std::string& session_key) const override;

 private:
  struct Held {
    policies::SecretPolicy policy;
    policies::SecretSource source;
    std::string placeholder;
    std::chrono::steady_clock::time_point expires;
    bool file_written = false;
  };
  struct Session {
    std::vector<Held> secrets;
    sandbox::CellInstance* cell = nullptr;  // valid from Grant to Release
  };

  Result<std::string> Read(const Held& held) const;
  // Removes the files of expired file secrets (under mu_).
  void ExpireFiles(Session& session) const;
  void EndSessions();  // the thread that ends sessions

  policies::SecretReadOptions read_options_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<policies::SecretPolicy>> profiles_;
  mutable std::map<std::string, Session> sessions_;  // by session key
  std::deque<std::string> released_;                 // oldest first
  EndSession end_session_;
  std::mutex end_mu_;  // held while end_session_ runs, so SetEndSession waits for it
  std::condition_variable wake_;
  std::deque<std::pair<std::string, std::string>> to_end_;  // (session key, reason)
  bool stopping_ = false;
  std::thread ender_;
};

// Writes what cells of policies with placeholder secrets trust (policies::CaBundleHostPath,
// mounted at policies::kCellCaBundlePath): the system's CA bundle, when the host has one,
// followed by the egress proxy's interception CA certificate. Mode 0644, replaced
// atomically; certificates only, never a key.
Status WriteCaBundle(const std::string& state_dir, const std::string& proxy_ca_pem);

// What initialize tells the model of a policy's secrets (names and how to use them; no
// value, no source): "" when it has none.
std::string SecretsInstructions(const std::vector<policies::SecretPolicy>& secrets);

// "mcpcell-secret-" + 32 hex digits from the system's random source.
std::string NewPlaceholder();

}  // namespace mcpcell::serve
