// `lo` up in the cell's network namespace (see net.h).
#include "sandbox/linux/net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace mcpcell::sandbox
