// mcpcell-probe: a tiny, statically linked program that integration tests run inside real
// cells to look at a boundary from the inside. Each subcommand prints what it found on
// stdout (one fact per line, "key value") and exits 0 when the probe itself worked; the
// tests decide what is expected. Static so it runs whatever the cell's template holds.
//
// Ownership: the subcommands in this file belong to cell creation (helper A). Other suites
// add theirs in clearly separated functions registered in kCommands, or their own probes.
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

const char* ErrName(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : "E?";
}

// exists PATH...: "PATH yes|no" for each (lstat; ENOENT is "no", other errors printed).
int Exists(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    struct stat st;
    if (::lstat(argv[i], &st) == 0) {
      std::printf("%s yes\n", argv[i]);
    } else {
      std::printf("%s %s\n", argv[i], errno == ENOENT ? "no" : ErrName(errno));
    }
  }
  return 0;
}

// write PATH: tries to create/append PATH; prints "ok" or the errno name.
int Write(int argc, char** argv) {
  if (argc != 1) return 2;
  int fd = ::open(argv[0], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::printf("%s\n", ErrName(errno));
    return 0;
  }
  ssize_t n = ::write(fd, "probe\n", 6);
  std::printf("%s\n", n == 6 ? "ok" : ErrName(errno));
  ::close(fd);
  return 0;
}

// cat PATH: the file's content (or the errno name on stderr and exit 1).
int Cat(int argc, char** argv) {
  if (argc != 1) return 2;
  int fd = ::open(argv[0], O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "%s\n", ErrName(errno));
    return 1;
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) std::fwrite(buf, 1, static_cast<size_t>(n), stdout);
  ::close(fd);
  return 0;
}

// ps: "pid COMM" for every process visible in /proc.
int Ps(int, char**) {
  DIR* d = ::opendir("/proc");
  if (!d) return 1;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string path = std::string("/proc/") + e->d_name + "/comm";
    char comm[64] = {};
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = ::read(fd, comm, sizeof comm - 1);
      if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = '\0';
      ::close(fd);
    }
    std::printf("%s %s\n", e->d_name, comm);
  }
  ::closedir(d);
  return 0;
}

// net: "if NAME up|down" per interface, then "connect ADDR ok|ERRNO" for an outside address
// and "loopback ok|ERRNO" for a TCP round trip on 127.0.0.1.
int Net(int, char**) {
  // /proc/net/dev lists every interface of the namespace, up or down (netlink, which
  // if_nameindex uses, is refused by the cell's seccomp filter).
  FILE* dev = std::fopen("/proc/net/dev", "r");
  char line[512];
  int row = 0;
  while (dev && std::fgets(line, sizeof line, dev)) {
    if (++row <= 2) continue;  // two header lines
    char* colon = std::strchr(line, ':');
    if (!colon) continue;
    *colon = '\0';
    char* name = line;
    while (*name == ' ') ++name;
    unsigned int flags = 0;
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq req = {};
    std::memcpy(req.ifr_name, name, std::min<size_t>(std::strlen(name), IFNAMSIZ - 1));
    if (s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &req) == 0) flags = static_cast<unsigned>(req.ifr_flags);
    if (s >= 0) ::close(s);
    std::printf("if %s %s\n", name, (flags & IFF_UP) ? "up" : "down");
  }
  if (dev) std::fclose(dev);
  for (const char* addr : {"1.1.1.1", "10.0.0.1"}) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(80);
    ::inet_pton(AF_INET, addr, &sa.sin_addr);
    int r = ::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    std::printf("connect %s %s\n", addr, r == 0 ? "ok" : ErrName(errno));
    ::close(s);
  }
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  bool ok = ::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(l, 1) == 0 &&
            ::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ok = ok && ::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  std::printf("loopback %s\n", ok ? "ok" : ErrName(errno));
  return 0;
}

// abstract-listen NAME SECONDS: binds "\0NAME", prints "listening", holds it SECONDS.
int AbstractListen(int argc, char** argv) {
  if (argc != 2) return 2;
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path + 1, argv[0], sizeof sa.sun_path - 2);
  socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(argv[0]));
  if (::bind(s, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(s, 4) != 0) {
    std::printf("%s\n", ErrName(errno));
    return 1;
  }
  std::printf("listening\n");
  std::fflush(stdout);
  ::sleep(static_cast<unsigned>(std::atoi(argv[1])));
  return 0;
}

// abstract-connect NAME: "ok" or the errno name.
int AbstractConnect(int argc, char** argv) {
  if (argc != 1) return 2;
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path + 1, argv[0], sizeof sa.sun_path - 2);
  socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(argv[0]));
  int r = ::connect(s, reinterpret_cast<sockaddr*>(&sa), len);
  std::printf("%s\n", r == 0 ? "ok" : ErrName(errno));
  return 0;
}

// sysv-create KEY / sysv-get KEY: a SysV message queue; "ok" or the errno name.
int SysvCreate(int argc, char** argv) {
  if (argc != 1) return 2;
  int id = ::msgget(static_cast<key_t>(std::atoi(argv[0])), IPC_CREAT | IPC_EXCL | 0666);
  std::printf("%s\n", id >= 0 ? "ok" : ErrName(errno));
  return 0;
}
int SysvGet(int argc, char** argv) {
  if (argc != 1) return 2;
  int id = ::msgget(static_cast<key_t>(std::atoi(argv[0])), 0);
  std::printf("%s\n", id >= 0 ? "ok" : ErrName(errno));
  return 0;
}

// ids: "uid N", "gid N", "groups N..." as the process sees them.
int Ids(int, char**) {
  std::printf("uid %u\ngid %u\n", ::getuid(), ::getgid());
  gid_t groups[64];
  int n = ::getgroups(64, groups);
  std::printf("groups");
  for (int i = 0; i < n; ++i) std::printf(" %u", groups[i]);
  std::printf("\n");
  return 0;
}

// hostname: the uts name.
int Hostname(int, char**) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::printf("%s\n", name);
  return 0;
}

// sleep SECONDS
int Sleep(int argc, char** argv) {
  if (argc != 1) return 2;
  std::printf("sleeping\n");
  std::fflush(stdout);
  ::sleep(static_cast<unsigned>(std::atoi(argv[0])));
  return 0;
}

struct Command {
  std::string_view name;
  int (*run)(int argc, char** argv);
};
constexpr Command kCommands[] = {
    {"exists", Exists},
    {"write", Write},
    {"cat", Cat},
    {"ps", Ps},
    {"net", Net},
    {"abstract-listen", AbstractListen},
    {"abstract-connect", AbstractConnect},
    {"sysv-create", SysvCreate},
    {"sysv-get", SysvGet},
    {"ids", Ids},
    {"hostname", Hostname},
    {"sleep", Sleep},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mcpcell-probe COMMAND [ARGS...]\n");
    return 2;
  }
  for (const Command& c : kCommands) {
    if (c.name == argv[1]) return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "mcpcell-probe: unknown command %s\n", argv[1]);
  return 2;
}
