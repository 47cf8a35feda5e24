// The policy's network allowlist (policies::NetworkPolicy::allow), parsed once per cell.
//
// Entries, each with an optional port (none: ports 80 and 443):
//   pypi.org, pypi.org:8080        a host name, exactly (case-insensitive, trailing dot ignored)
//   *.example.com, *.example.com:22 any subdomain of example.com, not example.com itself
//   10.0.0.5, [fd00::5]:8443       an IP literal (v6 in brackets when it has a port)
//   10.1.0.0/16, fd00::/8, [fd00::/8]:443   a CIDR
// Names match requests for names and addresses match requests for IP literals; a request
// for 10.0.0.5 is never matched by a name entry. Only IP and CIDR entries can let a
// connection reach an address that address.h refuses (NamesAddress).
// Threading: immutable after Parse; safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "egress/address.h"
#include "egress/host.h"

namespace mcpcell::egress {

struct AllowEntry {
  enum class Kind { kHost, kWildcard, kAddress, kCidr };
  Kind kind = Kind::kHost;
  std::string text;              // the entry as the policy wrote it
  std::string name;              // kHost: the name; kWildcard: the suffix ("example.com")
  IpAddress address;             // kAddress, kCidr (the network)
  int prefix_len = 0;            // kCidr
  std::optional<uint16_t> port;  // nullopt: 80 and 443

  bool MatchesPort(uint16_t p) const { return port ? *port == p : (p == 80 || p == 443); }
};

class Allowlist {
 public:
  Allowlist() = default;  // allows nothing: the default policy

  // Strict: the first bad entry fails the whole list, with a message naming it:
  //   network.allow entry "*.": empty host name
  static Result<Allowlist> Parse(const std::vector<std::string>& entries);

  // The entry that allows a request for host:port, or nullptr. Names are compared in
  // ParseHost's normal form; IP literals against address and CIDR entries.
  const AllowEntry* Match(const Host& host, uint16_t port) const;
  // Convenience for tests and callers holding text: nullptr when host does not parse.
  const AllowEntry* Match(std::string_view host, uint16_t port) const;

  // The IP or CIDR entry that names this resolved address for this port, or nullptr. An
  // address that ClassifyAddress refuses is reachable only if this finds an entry.
  const AllowEntry* NamesAddress(const IpAddress& address, uint16_t port) const;

  const std::vector<AllowEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<AllowEntry> entries_;
};

// One entry; errors do not repeat the entry (Parse adds it).
Result<AllowEntry> ParseAllowEntry(std::string_view text);

}  // namespace mcpcell::egress
