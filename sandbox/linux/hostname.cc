// The cell's host name (see hostname.h).
#include "sandbox/linux/hostname.h"

#include <unistd.h>

namespace mcpcell::sandbox {

std::string CellHostname(const CellSpec& spec) {
  if (!spec.hostname.empty()) return spec.hostname;
  std::string name = "cell-" + spec.id;
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  if (name.size() > 63) name.resize(63);
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return name;
}

Status ValidateHostname(const std::string& name) {
  if (name.empty() || name.size() > 63) {
    return Error::Msg("hostname \"" + name + "\": must be 1 to 63 characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.';
    if (!ok) return Error::Msg("hostname \"" + name + "\": only letters, digits, '-' and '.'");
  }
  if (name.front() == '-' || name.front() == '.' || name.back() == '-' || name.back() == '.') {
    return Error::Msg("hostname \"" + name + "\": must not start or end with '-' or '.'");
  }
  return Ok();
}

Status SetHostname(const std::string& name) {
  if (::sethostname(name.data(), name.size()) != 0) {
    return Error::Sys("sethostname(\"" + name + "\")");
  }
  if (::setdomainname("(none)", 6) != 0) return Error::Sys("setdomainname(\"(none)\")");
  return Ok();
}

}  // namespace mcpcell::sandbox
