// RequestStateMac: seals the requestState of an input_required result (2026-07-28) so the
// client can hand it back but not forge or alter it. The state travels as
// base64(JSON).HMAC-SHA256 over what it is bound to (method and tool, prompt or resource
// name), its expiry and the JSON, under a random key each Server makes at start: a state
// from another request kind, another server process or past its lifetime does not open.
// Immutable after construction: any thread.
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <variant>

#include "mcp/types.h"

namespace mcp {

class RequestStateMac {
 public:
  // How long a sealed state opens: the client answers an input request within this.
  static constexpr std::chrono::seconds kLifetime{15 * 60};

  RequestStateMac();  // a fresh random key (OpenSSL RAND_bytes); throws if none is to be had

  // `binding` names the request the state belongs to, e.g. "tools/call test_x".
  std::string Seal(const std::string& binding, const Json& state) const;
  // The state Seal was given, or why `sealed` is refused (malformed, altered, made for
  // another request or server, expired).
  std::variant<Json, std::string> Open(const std::string& binding, const std::string& sealed) const;

 private:
  std::string Mac(const std::string& text) const;  // hex HMAC-SHA256
  std::array<unsigned char, 32> key_{};
};

}  // namespace mcp
