#include "serve/syslog_feed.h"

namespace mcpcell::serve {
namespace {

// "host:port" with a non-empty host and a port from 1 to 65535 ("[v6]:port" allowed).
bool ValidHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string port = address.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return false;
  int n = std::stoi(port);
  return n >= 1 && n <= 65535;
}

}  // namespace

Result<std::unique_ptr<audit::SyslogSink>> MakeSyslogFeed(const std::string& spec) {
  const std::string what = "audit syslog \"" + spec + "\"";
  if (spec.rfind("unix:", 0) == 0) {
    if (spec.size() <= 5 || spec[5] != '/') {
      return Error::Msg(what + ": expected unix:/absolute/path (e.g. unix:/dev/log)");
    }
  } else if (spec.rfind("tcp:", 0) == 0) {
    if (!ValidHostPort(spec.substr(4))) {
      return Error::Msg(what + ": expected tcp:HOST:PORT with a port from 1 to 65535");
    }
  } else {
    return Error::Msg(what + ": expected unix:/path or tcp:HOST:PORT");
  }
  auto sink = audit::SyslogSink::Connect(spec);
  if (!sink) return sink.error().Wrap(what);
  return std::move(*sink);
}

}  // namespace mcpcell::serve
