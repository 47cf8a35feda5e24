// IP addresses and which of them the egress proxy refuses (DESIGN.md §5, docs/security.md
// "Network egress").
//
// IpAddress is a plain value (v4 or v6, network byte order) so that the allowlist, the
// request parser and the proxy share one type without Boost in their headers.
// ClassifyAddress() says why an address must not be reached from a cell: loopback, private,
// CGNAT, link-local (the metadata service), multicast, reserved, the IPv6 forms that embed
// an IPv4 address (mapped, NAT64, 6to4), and the host's own addresses. The proxy lets such
// an address through only when the policy names it explicitly (an IP literal or CIDR).
// Threading: pure functions, except HostAddresses() which calls getifaddrs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcpcell::egress {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4 uses bytes[0..3]

  // Strict forms only: dotted quad with four decimal parts ("10.0.0.1", not "10.1" or
  // "0x0a.0.0.1"), or RFC 4291 text for v6 without brackets or a zone ("fe80::1").
  static std::optional<IpAddress> Parse(std::string_view text);
  static IpAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
  std::string ToString() const;  // "10.0.0.1", "fd00::1"
  int bits() const { return v6 ? 128 : 32; }
  bool operator==(const IpAddress&) const = default;
};

// True when the first prefix_len bits of address equal those of network (same family).
bool InPrefix(const IpAddress& address, const IpAddress& network, int prefix_len);

// Why a cell must not reach this address, or nullopt when it is an ordinary public one.
// Reasons are short phrases used in refusals: "link-local", "loopback",
// "private (RFC 1918)", "link-local (IPv4-mapped 169.254.169.254)", "the host's own address".
// host_addresses: the host's interface addresses (HostAddresses(), or fixed ones in tests).
std::optional<std::string> ClassifyAddress(const IpAddress& address,
                                           const std::vector<IpAddress>& host_addresses);

// Every address on the host's interfaces (getifaddrs); empty if that fails.
std::vector<IpAddress> HostAddresses();

}  // namespace mcpcell::egress
