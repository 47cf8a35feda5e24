#include "egress/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace mcpcell::egress {
namespace {

struct V4Rule {
  std::array<uint8_t, 4> net;
  int prefix;
  const char* reason;
};

// Order matters only for overlaps: 255.255.255.255 is "broadcast", the rest of 240/4
// "reserved".
constexpr V4Rule kV4Rules[] = {
    {{0, 0, 0, 0}, 32, "unspecified"},
    {{0, 0, 0, 0}, 8, "this network (0.0.0.0/8)"},
    {{127, 0, 0, 0}, 8, "loopback"},
    {{10, 0, 0, 0}, 8, "private (RFC 1918)"},
    {{172, 16, 0, 0}, 12, "private (RFC 1918)"},
    {{192, 168, 0, 0}, 16, "private (RFC 1918)"},
    {{100, 64, 0, 0}, 10, "carrier-grade NAT (100.64.0.0/10)"},
    {{169, 254, 0, 0}, 16, "link-local"},
    {{192, 0, 0, 0}, 24, "IETF protocol assignments (192.0.0.0/24)"},
    {{198, 18, 0, 0}, 15, "benchmarking (198.18.0.0/15)"},
    {{224, 0, 0, 0}, 4, "multicast"},
    {{255, 255, 255, 255}, 32, "broadcast"},
    {{240, 0, 0, 0}, 4, "reserved (240.0.0.0/4)"},
};

IpAddress V6Prefix(std::initializer_list<uint8_t> head) {
  IpAddress a;
  a.v6 = true;
  std::copy(head.begin(), head.end(), a.bytes.begin());
  return a;
}

IpAddress EmbeddedV4(const IpAddress& a, size_t offset) {
  return IpAddress::V4(a.bytes[offset], a.bytes[offset + 1], a.bytes[offset + 2],
                       a.bytes[offset + 3]);
}

std::optional<std::string> ClassifyV4(const IpAddress& a) {
  for (const V4Rule& r : kV4Rules) {
    if (InPrefix(a, IpAddress::V4(r.net[0], r.net[1], r.net[2], r.net[3]), r.prefix))
      return std::string(r.reason);
  }
  return std::nullopt;
}

// IPv6 forms that carry an IPv4 address: the embedded address decides. A NAT64 gateway or
// a 6to4 relay would deliver the packet to that IPv4 address, and a v4-mapped address
// is the IPv4 address itself on a dual-stack socket.
std::optional<std::string> ClassifyEmbedded(const IpAddress& a) {
  struct Form {
    IpAddress prefix;
    int bits;
    size_t offset;
    const char* name;
  };
  const Form forms[] = {
      {V6Prefix({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}), 96, 12, "IPv4-mapped"},
      {V6Prefix({0x00, 0x64, 0xff, 0x9b}), 96, 12, "NAT64"},
      {V6Prefix({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}), 48, 12, "local-use NAT64"},
      {V6Prefix({0x20, 0x02}), 16, 2, "6to4"},
      {V6Prefix({}), 96, 12, "IPv4-compatible"},  // ::a.b.c.d, deprecated but routable
  };
  for (const Form& f : forms) {
    if (!InPrefix(a, f.prefix, f.bits)) continue;
    IpAddress v4 = EmbeddedV4(a, f.offset);
    std::optional<std::string> inner = ClassifyV4(v4);
    if (!inner) return std::nullopt;  // a public IPv4 address in an IPv6 form
    return *inner + " (" + f.name + " " + v4.ToString() + ")";
  }
  return std::nullopt;
}

std::optional<std::string> ClassifyV6(const IpAddress& a) {
  if (a == V6Prefix({})) return "unspecified";
  if (a == V6Prefix({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})) return "loopback";
  // Embedded forms before the plain prefixes: ::ffff:127.0.0.1 reads "loopback (...)".
  bool embeds_v4 = InPrefix(a, V6Prefix({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}), 96) ||
                   InPrefix(a, V6Prefix({0x00, 0x64, 0xff, 0x9b}), 96) ||
                   InPrefix(a, V6Prefix({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}), 48) ||
                   InPrefix(a, V6Prefix({0x20, 0x02}), 16) || InPrefix(a, V6Prefix({}), 96);
  if (embeds_v4) return ClassifyEmbedded(a);
  if (InPrefix(a, V6Prefix({0xfc}), 7)) return "unique local (fc00::/7)";
  if (InPrefix(a, V6Prefix({0xfe, 0x80}), 10)) return "link-local";
  if (InPrefix(a, V6Prefix({0xfe, 0xc0}), 10)) return "site-local (fec0::/10)";
  if (InPrefix(a, V6Prefix({0xff}), 8)) return "multicast";
  if (InPrefix(a, V6Prefix({0x01, 0x00}), 64)) return "discard-only (100::/64)";
  return std::nullopt;
}

}  // namespace

IpAddress IpAddress::V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress ip;
  ip.bytes[0] = a;
  ip.bytes[1] = b;
  ip.bytes[2] = c;
  ip.bytes[3] = d;
  return ip;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  IpAddress ip;
  // inet_pton(AF_INET) accepts only the dotted quad of four decimal parts, unlike
  // inet_aton ("127.1", "0x7f.0.0.1"), and no leading zeros in glibc's strict form.
  if (s.find(':') == std::string::npos) {
    if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
    return std::nullopt;
  }
  ip.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) return ip;
  return std::nullopt;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

bool InPrefix(const IpAddress& address, const IpAddress& network, int prefix_len) {
  if (address.v6 != network.v6 || prefix_len < 0 || prefix_len > address.bits()) return false;
  int full = prefix_len / 8, rest = prefix_len % 8;
  if (std::memcmp(address.bytes.data(), network.bytes.data(), full) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (address.bytes[full] & mask) == (network.bytes[full] & mask);
}

std::optional<std::string> ClassifyAddress(const IpAddress& address,
                                           const std::vector<IpAddress>& host_addresses) {
  std::optional<std::string> reason = address.v6 ? ClassifyV6(address) : ClassifyV4(address);
  if (reason) return reason;
  for (const IpAddress& own : host_addresses) {
    if (own == address) return "the host's own address";
  }
  // A v4-mapped form of a public host address is still the host.
  if (address.v6 && InPrefix(address, V6Prefix({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}), 96)) {
    IpAddress v4 = EmbeddedV4(address, 12);
    for (const IpAddress& own : host_addresses) {
      if (own == v4) return "the host's own address (IPv4-mapped " + v4.ToString() + ")";
    }
  }
  return std::nullopt;
}

std::vector<IpAddress> HostAddresses() {
  std::vector<IpAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    IpAddress ip;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      std::memcpy(ip.bytes.data(), &sin->sin_addr, 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      ip.v6 = true;
      std::memcpy(ip.bytes.data(), &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    out.push_back(ip);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace mcpcell::egress
