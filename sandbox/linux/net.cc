// `lo` up in the cell's network namespace (see net.h).
#include "sandbox/linux/net.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace mcpcell::sandbox {

Status BringUpLoopback() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error::Sys("socket(AF_INET, SOCK_DGRAM)");
  struct ifreq req;
  std::memset(&req, 0, sizeof req);
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &req) != 0) {
    Error e = Error::Sys("ioctl(\"lo\", SIOCGIFFLAGS)");
    ::close(fd);
    return e;
  }
  req.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(fd, SIOCSIFFLAGS, &req) != 0) {
    Error e = Error::Sys("ioctl(\"lo\", SIOCSIFFLAGS, IFF_UP)");
    ::close(fd);
    return e;
  }
  ::close(fd);
  return Ok();
}

Result<int> ListenOnLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error::Sys("socket(AF_INET, SOCK_STREAM)");
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    Error e = Error::Sys("bind(" + where + ")");
    ::close(fd);
    return e;
  }
  if (::listen(fd, 128) != 0) {
    Error e = Error::Sys("listen(" + where + ")");
    ::close(fd);
    return e;
  }
  return fd;
}

}  // namespace mcpcell::sandbox
