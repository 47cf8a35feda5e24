#include "egress/hosts_file.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "egress/host.h"

namespace mcpcell::egress {

Result<HostsTable> ParseHostsFile(std::string_view text, const std::string& source) {
  HostsTable table;
  std::istringstream lines{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto fail = [&](const std::string& what) {
      return Error::Msg(source + ":" + std::to_string(number) + ": " + what);
    };
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string address_text;
    if (!(words >> address_text)) continue;
    std::optional<IpAddress> address = IpAddress::Parse(address_text);
    if (!address) return fail("\"" + address_text + "\" is not an IP address");
    int names = 0;
    for (std::string name; words >> name; ++names) {
      Result<Host> host = ParseHost(name);
      if (!host) return fail("\"" + name + "\": " + host.error().message);
      if (host->is_ip()) return fail("\"" + name + "\" is an address, not a name");
      std::vector<IpAddress>& addresses = table[host->name];
      if (std::find(addresses.begin(), addresses.end(), *address) == addresses.end())
        addresses.push_back(*address);
    }
    if (names == 0) return fail("\"" + address_text + "\" has no names after it");
  }
  return table;
}

Result<HostsTable> LoadHostsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::Sys("open(\"" + path + "\")");
  std::stringstream text;
  text << in.rdbuf();
  return ParseHostsFile(text.str(), path);
}

}  // namespace mcpcell::egress
