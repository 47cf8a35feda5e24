#include "egress/host.h"

#include <algorithm>

namespace mcpcell::egress {
namespace {

constexpr size_t kMaxHostName = 253;
constexpr size_t kMaxLabel = 63;

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || IsDigit(c) || c == '-' || c == '_'; }

Result<std::string> CheckName(std::string name) {
  if (name.empty()) return Error::Msg("empty host name");
  if (name.size() > kMaxHostName) return Error::Msg("host name longer than 253 characters");
  size_t start = 0;
  std::string_view last;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    std::string_view label(name.data() + start, dot - start);
    if (label.empty()) return Error::Msg("empty label in host name");
    if (label.size() > kMaxLabel) return Error::Msg("label longer than 63 characters");
    if (label.front() == '-' || label.back() == '-')
      return Error::Msg("label starts or ends with '-'");
    for (char c : label) {
      if (!IsLabelChar(c))
        return Error::Msg(std::string("character '") + c + "' is not allowed in a host name");
    }
    last = label;
    start = dot + 1;
  }
  // WHATWG's "ends in a number": such a name is an IPv4 address in some notation.
  if (std::all_of(last.begin(), last.end(), IsDigit) ||
      (last.size() > 1 && last[0] == '0' && last[1] == 'x'))
    return Error::Msg("numeric host that is not a dotted-quad IPv4 address");
  return name;
}

}  // namespace

std::string Host::Display() const {
  if (ip && ip->v6) return "[" + name + "]";
  return name;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

std::optional<uint16_t> ParsePort(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (char c : text) {
    if (!IsDigit(c)) return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

Result<Host> ParseHost(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80)
      return Error::Msg("non-ASCII host names are not supported (write the xn-- form)");
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f)
      return Error::Msg("control character or space in host");
  }
  if (auto ip = IpAddress::Parse(text)) return Host{ip->ToString(), ip};
  if (text.find(':') != std::string_view::npos) return Error::Msg("not a valid IPv6 address");
  std::string name;
  name.reserve(text.size());
  for (char c : text) name.push_back(Lower(c));
  if (!name.empty() && name.back() == '.') name.pop_back();
  Result<std::string> checked = CheckName(std::move(name));
  if (!checked) return checked.error();
  return Host{std::move(checked.value()), std::nullopt};
}

Result<Authority> ParseAuthority(std::string_view text) {
  std::string_view host_text = text, port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Error::Msg("'[' without ']'");
    host_text = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Error::Msg("unexpected text after ']'");
      port_text = rest.substr(1);
      has_port = true;
    }
    auto ip = IpAddress::Parse(host_text);
    if (!ip || !ip->v6) return Error::Msg("not a valid IPv6 address in brackets");
  } else {
    size_t colon = text.find(':');
    if (colon != std::string_view::npos) {
      if (text.find(':', colon + 1) != std::string_view::npos)
        return Error::Msg("IPv6 addresses with a port need brackets: [addr]:port");
      host_text = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      has_port = true;
    }
  }
  Result<Host> host = ParseHost(host_text);
  if (!host) return host.error();
  Authority a{std::move(host.value()), std::nullopt};
  if (has_port) {
    a.port = ParsePort(port_text);
    if (!a.port) return Error::Msg("port \"" + std::string(port_text) + "\" is not 1..65535");
  }
  return a;
}

}  // namespace mcpcell::egress
