// The cell's network: a new network namespace whose only interface is `lo`, brought up by
// cell init. Nothing routes out; the server reaches the cell through fds (control socket,
// the egress proxy's listening socket), never through an interface.
//
// Called by cell init inside the new network namespace; no exceptions.
#pragma once

#include <cstdint>

#include "sandbox/status.h"

namespace mcpcell::sandbox {

// ioctl(SIOCSIFFLAGS) IFF_UP on "lo" (it starts down in a new namespace).
Status BringUpLoopback();

// A listening TCP socket (CLOEXEC) on 127.0.0.1:<port> of the current network namespace:
// the egress proxy's door inside a cell. The caller owns the returned fd.
Result<int> ListenOnLoopback(uint16_t port);

}  // namespace mcpcell::sandbox
