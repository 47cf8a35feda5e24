// Socket activation: the HTTP port's listening socket taken from systemd (mcpcell.socket)
// instead of bound by the server, by the sd_listen_fds(3) protocol without libsystemd.
// systemd (or systemd-socket-activate) passes the sockets from fd 3 on and says so in three
// environment variables: LISTEN_PID (the process they are for), LISTEN_FDS (how many),
// LISTEN_FDNAMES (their names; not used: mcpcell takes exactly one). The caller checks
// that the socket is a listening TCP socket on the --http address (mcp/http_listener.h).
//
// Threading: TakeActivatedSocket reads and unsets environment variables, so it runs before
// the process starts any thread (cli/cmd_serve.cc, first thing of `serve`).
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace mcpcell::serve {

// The first descriptor systemd passes (SD_LISTEN_FDS_START).
inline constexpr int kFirstActivatedFd = 3;

struct ActivatedSocket {
  int fd = -1;          // -1: none was passed to this process
  std::string ignored;  // why variables present were not for this process ("" if none)
};

// What LISTEN_PID and LISTEN_FDS (nullptr when unset) say for process `self`: fd 3 when
// one socket was passed to it, -1 when none (both unset, or LISTEN_PID names another
// process: a parent's variables, as sd_listen_fds ignores them). An error names the
// variable, its value and what it should be: LISTEN_FDS without LISTEN_PID, values that
// are not decimal numbers, no socket, or more than the one HTTP port.
Result<ActivatedSocket> ParseListenEnvironment(const char* listen_pid, const char* listen_fds,
                                               pid_t self);

// ParseListenEnvironment of this process's environment; then unsets LISTEN_PID,
// LISTEN_FDS and LISTEN_FDNAMES (whoever they were for, so nothing the server starts sees
// them) and marks the passed socket close-on-exec (cells and helpers never inherit it).
// An error also when the passed descriptor is not open.
Result<ActivatedSocket> TakeActivatedSocket();

}  // namespace mcpcell::serve
