#include "base/fd_passing.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mcpcell {
namespace {

std::string CallName(const char* call, const char* what) {
  return std::string(call) + "(" + what + ")";
}

}  // namespace

Result<size_t> SendWithFds(int sock, std::span<const uint8_t> bytes, std::span<const int> fds,
                           const char* what) {
  if (fds.size() > kMaxPassedFds) return Error::Msg(CallName("sendmsg", what) + ": too many fds");
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::Sys(CallName("sendmsg", what));
  return static_cast<size_t>(n);
}

Result<ReceivedWithFds> ReceiveWithFds(int sock, std::span<uint8_t> buffer, size_t max_fds,
                                       int flags, const char* what) {
  if (max_fds > kMaxPassedFds) return Error::Msg(CallName("recvmsg", what) + ": too many fds");
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  if (max_fds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * max_fds);
  }
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::Sys(CallName("recvmsg", what));
  // Own every fd that arrived before the caller looks at anything else, so none leaks.
  ReceivedWithFds received;
  received.size = static_cast<size_t>(n);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      received.foreign_control = true;
      continue;
    }
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      received.fds.emplace_back(fd);
    }
  }
  received.truncated = (msg.msg_flags & MSG_TRUNC) != 0;
  received.fds_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  // The control buffer is rounded up to the cmsg alignment, so it may hold one fd more
  // than asked for: that one is closed and counted as truncation, as the kernel would.
  if (received.fds.size() > max_fds) {
    received.fds.resize(max_fds);
    received.fds_truncated = true;
  }
  return received;
}

}  // namespace mcpcell
