#include "egress/allowlist.h"

#include <algorithm>

namespace mcpcell::egress {
namespace {

// "10.1.0.0/16" or "fd00::/8" (no brackets, no port) -> CIDR entry fields.
Result<AllowEntry> ParseCidr(std::string_view text) {
  size_t slash = text.find('/');
  std::string_view addr_text = text.substr(0, slash), len_text = text.substr(slash + 1);
  auto network = IpAddress::Parse(addr_text);
  if (!network) return Error::Msg("\"" + std::string(addr_text) + "\" is not an IP address");
  if (len_text.empty() || len_text.size() > 3 ||
      !std::all_of(len_text.begin(), len_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Error::Msg("prefix length \"" + std::string(len_text) + "\" is not a number");
  int len = std::stoi(std::string(len_text));
  if (len > network->bits())
    return Error::Msg("prefix length " + std::to_string(len) + " is longer than " +
                      std::to_string(network->bits()));
  // Host bits set ("10.1.2.3/16") usually mean a typo; refuse rather than guess.
  IpAddress masked = *network;
  for (int bit = len; bit < network->bits(); ++bit)
    masked.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  if (!(masked == *network))
    return Error::Msg("host bits set in " + std::string(text) + " (did you mean " +
                      masked.ToString() + "/" + std::to_string(len) + "?)");
  AllowEntry e;
  e.kind = AllowEntry::Kind::kCidr;
  e.address = *network;
  e.prefix_len = len;
  return e;
}

// Splits "<x>:port" / "[<x>]:port" / "<v6 without brackets>" into x and port.
Result<AllowEntry> ParseEntryBody(std::string_view text) {
  std::string_view body = text;
  std::optional<uint16_t> port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Error::Msg("'[' without ']'");
    body = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Error::Msg("unexpected text after ']'");
      port = ParsePort(rest.substr(1));
      if (!port) return Error::Msg("port \"" + std::string(rest.substr(1)) + "\" is not 1..65535");
    }
    if (body.find(':') == std::string_view::npos)
      return Error::Msg("brackets are only for IPv6 addresses");
  } else if (size_t colon = text.rfind(':');
             colon != std::string_view::npos && text.find(':') == colon) {
    body = text.substr(0, colon);  // exactly one ':' -> a port
    port = ParsePort(text.substr(colon + 1));
    if (!port)
      return Error::Msg("port \"" + std::string(text.substr(colon + 1)) + "\" is not 1..65535");
  }
  // More than one ':' without brackets: an IPv6 address or CIDR without a port.
  Result<AllowEntry> entry = Error::Msg("");
  if (body.find('/') != std::string_view::npos) {
    entry = ParseCidr(body);
  } else if (body.size() >= 2 && body.substr(0, 2) == "*.") {
    Result<Host> suffix = ParseHost(body.substr(2));
    if (!suffix) return suffix.error();
    if (suffix->is_ip()) return Error::Msg("a wildcard needs a domain, not an address");
    AllowEntry e;
    e.kind = AllowEntry::Kind::kWildcard;
    e.name = suffix->name;
    entry = std::move(e);
  } else if (body.find('*') != std::string_view::npos) {
    return Error::Msg("'*' is allowed only as a whole first label (\"*.example.com\")");
  } else {
    Result<Host> host = ParseHost(body);
    if (!host) return host.error();
    AllowEntry e;
    if (host->is_ip()) {
      e.kind = AllowEntry::Kind::kAddress;
      e.address = *host->ip;
    } else {
      e.kind = AllowEntry::Kind::kHost;
      e.name = host->name;
    }
    entry = std::move(e);
  }
  if (!entry) return entry;
  entry->port = port;
  return entry;
}

}  // namespace

Result<AllowEntry> ParseAllowEntry(std::string_view text) {
  if (text.empty()) return Error::Msg("empty entry");
  Result<AllowEntry> entry = ParseEntryBody(text);
  if (entry) entry->text = std::string(text);
  return entry;
}

Result<Allowlist> Allowlist::Parse(const std::vector<std::string>& entries) {
  Allowlist list;
  for (const std::string& text : entries) {
    Result<AllowEntry> entry = ParseAllowEntry(text);
    if (!entry) return entry.error().Wrap("network.allow entry \"" + text + "\"");
    list.entries_.push_back(std::move(entry.value()));
  }
  return list;
}

const AllowEntry* Allowlist::Match(const Host& host, uint16_t port) const {
  if (host.is_ip()) return NamesAddress(*host.ip, port);
  for (const AllowEntry& e : entries_) {
    if (!e.MatchesPort(port)) continue;
    if (e.kind == AllowEntry::Kind::kHost && e.name == host.name) return &e;
    if (e.kind == AllowEntry::Kind::kWildcard && host.name.size() > e.name.size() + 1 &&
        host.name.ends_with(e.name) && host.name[host.name.size() - e.name.size() - 1] == '.')
      return &e;
  }
  return nullptr;
}

const AllowEntry* Allowlist::Match(std::string_view host, uint16_t port) const {
  Result<Host> parsed = ParseHost(host);
  return parsed ? Match(parsed.value(), port) : nullptr;
}

const AllowEntry* Allowlist::NamesAddress(const IpAddress& address, uint16_t port) const {
  for (const AllowEntry& e : entries_) {
    if (!e.MatchesPort(port)) continue;
    if (e.kind == AllowEntry::Kind::kAddress && e.address == address) return &e;
    if (e.kind == AllowEntry::Kind::kCidr && InPrefix(address, e.address, e.prefix_len)) return &e;
  }
  return nullptr;
}

}  // namespace mcpcell::egress
