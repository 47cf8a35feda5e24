// Fixed name -> address mappings for the egress proxy's resolver, in hosts(5) format
// (`mcpcell serve --egress-hosts FILE`): operators pin package registries to known
// addresses, tests name their upstreams. The proxy consults the table before DNS, and
// the addresses it gives are checked by the same address rules as DNS answers.
//
// Format: one "<address> <name> [<name>...]" a line; '#' starts a comment; blank lines
// are ignored. Names are read by ParseHost (lower-cased, trailing dot dropped); a name
// listed on several lines gets every address, in file order. Strict: a line that does not
// parse fails the whole file with "<file>:<line>: ...".
// Threading: pure functions; the table is immutable once built.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "egress/address.h"

namespace mcpcell::egress {

// Normal-form name -> addresses.
using HostsTable = std::map<std::string, std::vector<IpAddress>>;

Result<HostsTable> ParseHostsFile(std::string_view text, const std::string& source);
Result<HostsTable> LoadHostsFile(const std::string& path);

}  // namespace mcpcell::egress
