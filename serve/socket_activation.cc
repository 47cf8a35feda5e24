// Socket activation by the sd_listen_fds(3) protocol (socket_activation.h).
#include "serve/socket_activation.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace mcpcell::serve {
namespace {

// A decimal number without sign, spaces or leading garbage; nullopt otherwise.
std::optional<long long> Decimal(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::string Quoted(const char* value) { return "\"" + std::string(value) + "\""; }

}  // namespace

Result<ActivatedSocket> ParseListenEnvironment(const char* listen_pid, const char* listen_fds,
                                               pid_t self) {
  ActivatedSocket out;
  if (listen_pid == nullptr && listen_fds == nullptr) return out;
  if (listen_pid == nullptr) {
    return Error::Msg("LISTEN_FDS=" + Quoted(listen_fds) +
                      " without LISTEN_PID: socket activation names the process its sockets "
                      "are for; start mcpcell from a systemd .socket unit (or "
                      "systemd-socket-activate), or unset LISTEN_FDS");
  }
  const auto pid = Decimal(listen_pid);
  if (!pid || *pid == 0) {
    return Error::Msg("LISTEN_PID=" + Quoted(listen_pid) +
                      ": not a process id (a positive decimal number)");
  }
  if (*pid != self) {
    // Meant for a process that exec'd us, as sd_listen_fds(3) treats it: not ours to take.
    out.ignored = "LISTEN_PID=" + std::string(listen_pid) + " is not this process (" +
                  std::to_string(self) + "): its LISTEN_FDS are not for mcpcell";
    return out;
  }
  if (listen_fds == nullptr) {
    return Error::Msg("LISTEN_PID=" + std::string(listen_pid) +
                      " without LISTEN_FDS: socket activation says how many sockets it passes");
  }
  const auto count = Decimal(listen_fds);
  if (!count) {
    return Error::Msg("LISTEN_FDS=" + Quoted(listen_fds) +
                      ": not a number of sockets (a decimal number; mcpcell takes 1)");
  }
  if (*count == 0) {
    return Error::Msg(
        "LISTEN_FDS=0: systemd passed no socket; mcpcell.socket needs one "
        "ListenStream=ADDR:PORT");
  }
  if (*count > 1) {
    return Error::Msg("LISTEN_FDS=" + std::string(listen_fds) +
                      ": mcpcell takes exactly one listening socket, the HTTP port; give its "
                      ".socket unit a single ListenStream= (the --admin listener binds its own)");
  }
  out.fd = kFirstActivatedFd;
  return out;
}

Result<ActivatedSocket> TakeActivatedSocket() {
  auto parsed =
      ParseListenEnvironment(std::getenv("LISTEN_PID"), std::getenv("LISTEN_FDS"), ::getpid());
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!parsed || parsed->fd < 0) return parsed;
  const int flags = ::fcntl(parsed->fd, F_GETFD);
  if (flags < 0 || ::fcntl(parsed->fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    const int e = errno;
    return Error::Sys("LISTEN_FDS=1, but fd " + std::to_string(parsed->fd) +
                          " is not an open descriptor of this process: fcntl(F_SETFD, "
                          "FD_CLOEXEC)",
                      e);
  }
  return parsed;
}

}  // namespace mcpcell::serve
