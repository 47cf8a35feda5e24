// The server name (SNI) in a TLS ClientHello: what the egress proxy reads from the first
// bytes a client sends through a CONNECT tunnel, before any byte goes upstream.
//
// The parser reassembles the handshake message from as many TLS records as it needs (a
// ClientHello may be split across records and reads), up to kMaxClientHello bytes, and
// reports one of: need more bytes, a name, no SNI extension, or not TLS / malformed (with
// the reason). It does not decrypt anything: an Encrypted ClientHello's inner name is not
// visible here (docs/security.md, "Network egress").
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mcpcell::egress {

// Bytes of client data the proxy buffers at most while looking for the ClientHello.
inline constexpr size_t kMaxClientHello = 32 * 1024;

struct SniResult {
  enum class Kind { kNeedMore, kName, kNoSni, kInvalid };
  Kind kind = Kind::kNeedMore;
  std::string value;  // kName: the server name as sent; kInvalid: the reason
};

// data: everything the client sent so far after CONNECT's 200.
SniResult ExtractSni(std::string_view data);

}  // namespace mcpcell::egress
