// The cell's network: a new network namespace whose only interface is `lo`, brought up by
// cell init. Nothing routes out; the server reaches the cell through fds (control socket,
// the egress proxy's listening socket), never through an interface.
//
// Called by cell init inside the new network namespace; no exceptions.
#pragma once

#include "sandbox/status.h"

namespace mcpcell::sandbox {

// ioctl(SIOCSIFFLAGS) IFF_UP on "lo" (it starts down in a new namespace).
Status BringUpLoopback();

}  // namespace mcpcell::sandbox
