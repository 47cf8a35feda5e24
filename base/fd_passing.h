// Passing file descriptors over unix sockets (SCM_RIGHTS): one sendmsg with fds attached to
// its bytes, one recvmsg that takes ownership of every fd that came.
//
// Used by the control protocol (sandbox/control), the run pool's frames
// (run_pool/protocol.cc), the server's hand-over to cell init (sandbox/cell.cc) and cell
// init's receiving end (sandbox/init/setup.cc). No exceptions: cell init links it.
// Stateless; thread-safe as the socket calls are. Both retry EINTR; errors carry the call
// and the caller's name for the socket ("sendmsg(sync socket): EPIPE (...)") with its errno.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell {

// The most fds one call may pass (the control buffer is on the stack).
inline constexpr size_t kMaxPassedFds = 16;

// Sends `bytes` with `fds` (at most kMaxPassedFds; none: a plain sendmsg) attached, with
// MSG_NOSIGNAL. Returns how many bytes went: a datagram goes whole or not at all, a stream
// socket may take fewer (the fds ride with the first byte). The fds stay the caller's.
Result<size_t> SendWithFds(int sock, std::span<const uint8_t> bytes, std::span<const int> fds,
                           const char* what);

struct ReceivedWithFds {
  size_t size = 0;               // bytes received; 0: the peer closed (stream) or sent none
  std::vector<UniqueFd> fds;     // every fd that arrived, in order, now owned here
  bool truncated = false;        // MSG_TRUNC: the datagram was longer than the buffer
  bool fds_truncated = false;    // more than max_fds fds were sent (the rest closed)
  bool foreign_control = false;  // ancillary data other than SCM_RIGHTS came (and was dropped)
};

// One recvmsg into `buffer`, with MSG_CMSG_CLOEXEC | `flags`, accepting up to `max_fds`
// (at most kMaxPassedFds) fds, never more. The caller decides what truncation or foreign data means.
Result<ReceivedWithFds> ReceiveWithFds(int sock, std::span<uint8_t> buffer, size_t max_fds,
                                       int flags, const char* what);

}  // namespace mcpcell
