// SecretsView: what the tools read of the secrets the operator granted to a session
// (policy [[secrets]], docs/secrets.md), by MCP session id (the cells' session key). The
// exec tools add ExecEnv's entries to every program's environment and refuse a call `env`
// that would set one of Names(); session_info lists Describe (never a value); output
// redaction asks Values. `mcpcell serve` implements it (serve/session_secrets.h); the tools
// never see where values come from.
// Threading: implementations are thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::tools {

struct SecretStatus {
  std::string name;
  std::string mode;                // "placeholder", "env", "file"
  std::vector<std::string> hosts;  // placeholder mode: where the proxy puts the value
  std::string file;                // file mode: its path in the cell ("/run/secrets/NAME")
  // Time left before the grant expires; nullopt: it lasts as long as the session.
  std::optional<std::chrono::seconds> time_left;
  bool expired = false;
};

struct SecretValue {
  std::string name;
  std::string value;
};

class SecretsView {
 public:
  virtual ~SecretsView() = default;
  // "NAME=placeholder" for each placeholder secret and "NAME=value" for each env secret
  // that has not expired. An error names the secret whose source could not be read.
  virtual Result<std::vector<std::string>> ExecEnv(const std::string& session_key) const = 0;
  // The variable names a call's own `env` must not set (every granted name, expired or not).
  virtual std::vector<std::string> Names(const std::string& session_key) const = 0;
  // For session_info: names, modes, hosts, time left; never values.
  virtual std::vector<SecretStatus> Describe(const std::string& session_key) const = 0;
  // The current values of the session's secrets (for redaction); unreadable ones left out.
  virtual std::vector<SecretValue> Values(const std::string& session_key) const = 0;
};

}  // namespace mcpcell::tools
