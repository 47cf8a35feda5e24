#include "audit/syslog.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "audit/record.h"

namespace mcpcell::audit {

using nlohmann::json;

namespace {

// RFC 5424 header fields are printable US-ASCII without spaces, with a maximum length.
std::string HeaderField(const std::string& value, size_t max) {
  std::string out;
  for (char c : value) {
    if (out.size() == max) break;
    out += (c > 32 && c < 127) ? c : '_';
  }
  return out.empty() ? "-" : out;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "-";
  return buf;
}

Status SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("send");
    sent += static_cast<size_t>(n);
  }
  return Ok();
}

Result<UniqueFd> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error::Msg("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error::Sys("socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Error::Sys("connect(\"" + path + "\")");
  return fd;
}

Result<UniqueFd> ConnectTcp(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    return Error::Msg("want HOST:PORT, got \"" + host_port + "\"");
  std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Error::Msg("resolve \"" + host_port + "\": " + gai_strerror(rc));
  Error last = Error::Msg("no address for " + host_port);
  for (addrinfo* a = res; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    timeval tv{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    last = Error::Sys("connect(\"" + host_port + "\")");
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace

std::string FormatSyslog(const json& record, const std::string& hostname, int facility) {
  const std::string type = StringField(record, "type");
  bool notice = type == "auth.refused" || type == "policy.refused" || type == "recovered";
  int pri = facility * 8 + (notice ? 5 : 6);
  std::string out = "<" + std::to_string(pri) + ">1 ";
  out += HeaderField(StringField(record, "time"), 64) + " ";
  out += HeaderField(hostname, 255) + " mcpcell - ";
  out += HeaderField(type, 32) + " - ";
  out += CanonicalJson(record);
  return out;
}

SyslogSink::SyslogSink(bool tcp, std::string address, int facility)
    : tcp_(tcp), address_(std::move(address)), facility_(facility), hostname_(HostName()) {}

Result<std::unique_ptr<SyslogSink>> SyslogSink::Connect(const std::string& target, int facility) {
  bool tcp;
  std::string address;
  if (target.rfind("unix:", 0) == 0) {
    tcp = false;
    address = target.substr(5);
  } else if (target.rfind("tcp:", 0) == 0) {
    tcp = true;
    address = target.substr(4);
  } else {
    return Error::Msg("syslog target \"" + target + "\": want unix:PATH or tcp:HOST:PORT");
  }
  std::unique_ptr<SyslogSink> sink(new SyslogSink(tcp, address, facility));
  std::lock_guard lock(sink->mu_);
  if (Status s = sink->ConnectLocked(); !s) return s.error().Wrap("syslog " + target);
  return sink;
}

Status SyslogSink::ConnectLocked() {
  auto fd = tcp_ ? ConnectTcp(address_) : ConnectUnix(address_);
  if (!fd) return fd.error();
  fd_ = std::move(*fd);
  return Ok();
}

Status SyslogSink::Send(const json& record) {
  std::string message = FormatSyslog(record, hostname_, facility_);
  if (tcp_) message = std::to_string(message.size()) + " " + message;
  std::lock_guard lock(mu_);
  if (!fd_.valid()) {
    if (Status s = ConnectLocked(); !s) {
      ++failed_;
      return s;
    }
  }
  Status s = SendAll(fd_.get(), message);
  if (!s) {
    ++failed_;
    if (tcp_) fd_.Reset();  // a stream with half a message in it is no use; start again
  }
  return s;
}

RecordSink SyslogSink::AsRecordSink() {
  return [this](const json& record, std::string_view) { (void)Send(record); };
}

uint64_t SyslogSink::failed_sends() const {
  std::lock_guard lock(mu_);
  return failed_;
}

}  // namespace mcpcell::audit
