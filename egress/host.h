// Host names and authorities ("host", "host:port", "[v6]:port") as the egress proxy reads
// them in policy entries, request targets, Host headers and TLS SNI.
//
// One strict reading everywhere, so that the allowlist and the request are compared in the
// same normal form: ASCII only (IDNA is not supported: write the xn-- form), lower case,
// one trailing dot dropped, labels of letters, digits, '-' and '_', and no name whose last
// label is numeric unless it is a real dotted-quad address (so "127.1" or "0x7f.1" can never
// be taken as a name and later resolved to loopback by a permissive resolver).
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "egress/address.h"

namespace mcpcell::egress {

// A parsed host: either a name (lower case, no trailing dot) or an IP literal.
struct Host {
  std::string name;             // the name, or the address's text for literals
  std::optional<IpAddress> ip;  // set for IP literals
  bool is_ip() const { return ip.has_value(); }
  // "pypi.org", "10.0.0.1", "[fd00::1]": the form used in messages and authorities.
  std::string Display() const;
};

struct Authority {
  Host host;
  std::optional<uint16_t> port;  // nullopt when the text had none
};

// A host name or IP literal (v6 without brackets). Errors say what is wrong with it.
Result<Host> ParseHost(std::string_view text);

// "host", "host:port", "[v6]", "[v6]:port". A port is 1..65535, decimal digits only.
Result<Authority> ParseAuthority(std::string_view text);

// Decimal port 1..65535 with no sign, spaces or leading '+'.
std::optional<uint16_t> ParsePort(std::string_view text);

// Case-insensitive ASCII comparison.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace mcpcell::egress
