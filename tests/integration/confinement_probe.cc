// mcpcell-confinement-probe: run inside real cells by confinement_test.cc to look at the
// kernel confinement layers from the inside (seccomp, capabilities, rlimits, cgroup
// limits). Like mcpcell-probe it is static and prints "key value" facts; the test decides
// what is expected. Owned by the confinement suite (helper B).
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/unit/sandbox/seccomp_denied_calls.h"

namespace {

const char* ErrName(long neg_errno) {
  if (neg_errno >= 0) return "OK";
  const char* n = strerrorname_np(static_cast<int>(-neg_errno));
  return n ? n : "E?";
}

// denied: "syscall/variant ERRNAME" for every call the default filter refuses.
int Denied() {
  for (const auto& c : mcpcell::testing::DeniedCalls()) {
    const long r = c.invoke();
    std::printf("%s/%s %s\n", c.syscall, c.variant, ErrName(r));
  }
  return 0;
}

// allowed: "what ERRNAME|OK" for calls that must keep working.
int Allowed() {
  for (const auto& c : mcpcell::testing::AllowedCalls()) {
    const long r = c.invoke();
    std::printf("%s %s\n", c.what, ErrName(r));
  }
  return 0;
}

// i386: a 32-bit syscall through int 0x80; the filter kills the process before it returns.
int I386() {
#if defined(__x86_64__)
  long ret = 20;  // getpid
  asm volatile("int $0x80" : "+a"(ret) : : "memory");
  std::printf("i386 returned %ld\n", ret);
#endif
  return 0;
}

// x32: a syscall with __X32_SYSCALL_BIT; killed likewise.
int X32() {
  long r = syscall(0x40000000 | SYS_getpid);
  std::printf("x32 returned %ld\n", r);
  return 0;
}

// status: the lines of /proc/self/status that describe confinement.
int Status() {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return 1;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    for (const char* key : {"Uid:", "Gid:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:",
                            "NoNewPrivs:", "Seccomp:"}) {
      if (std::strncmp(line, key, std::strlen(key)) == 0) {
        // "CapEff:\t0000..." -> "CapEff 0000..." (first field only for Uid/Gid).
        std::string v(line + std::strlen(key));
        v.erase(0, v.find_first_not_of(" \t"));
        v = v.substr(0, v.find_first_of(" \t\n"));
        std::printf("%.*s %s\n", static_cast<int>(std::strlen(key) - 1), key, v.c_str());
      }
    }
  }
  std::fclose(f);
  std::printf("pgid_is_pid %s\n", getpgrp() == getpid() ? "yes" : "no");
  return 0;
}

// rlimits: soft and hard values.
int Rlimits() {
  struct {
    const char* name;
    int resource;
  } limits[] = {{"nofile", RLIMIT_NOFILE}, {"fsize", RLIMIT_FSIZE}, {"core", RLIMIT_CORE}};
  for (const auto& l : limits) {
    rlimit r{};
    getrlimit(l.resource, &r);
    std::printf("%s_soft %llu\n%s_hard %llu\n", l.name, static_cast<unsigned long long>(r.rlim_cur),
                l.name, static_cast<unsigned long long>(r.rlim_max));
  }
  return 0;
}

// hog MIB: allocates and touches MIB MiB; "survived" means the memory limit did not hold.
int Hog(int argc, char** argv) {
  if (argc != 1) return 2;
  const size_t size = std::strtoull(argv[0], nullptr, 10) << 20;
  char* p = static_cast<char*>(
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) {
    std::printf("mmap %s\n", strerrorname_np(errno));
    return 0;
  }
  for (size_t i = 0; i < size; i += 4096) p[i] = 1;
  std::printf("survived %zu\n", size);
  return 0;
}

// forkbomb MAX: forks (children pause) until fork fails or MAX is reached; prints the count
// and the errno, then kills its children.
int ForkBomb(int argc, char** argv) {
  if (argc != 1) return 2;
  const int max = std::atoi(argv[0]);
  int forked = 0;
  int err = 0;
  for (; forked < max; ++forked) {
    pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    if (p < 0) {
      err = errno;
      break;
    }
  }
  std::printf("forked %d\nerrno %s\n", forked, err ? strerrorname_np(err) : "none");
  std::fflush(stdout);
  // The children are in our process group; spare ourselves and reap them.
  signal(SIGTERM, SIG_IGN);
  kill(0, SIGTERM);
  while (wait(nullptr) > 0) {
  }
  return 0;
}

// spin SECONDS: busy-loops for SECONDS of wall time; prints the CPU time it got, in ms.
int Spin(int argc, char** argv) {
  if (argc != 1) return 2;
  const double seconds = std::atof(argv[0]);
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  volatile unsigned long x = 0;
  do {
    for (int i = 0; i < 100000; ++i) x = x + i;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  std::printf("cpu_ms %lld\n", static_cast<long long>(cpu.tv_sec) * 1000 + cpu.tv_nsec / 1000000);
  return 0;
}

// cgroup: "<hierarchy> <path>" for each line of /proc/self/cgroup, then how many cgroup
// filesystems are mounted in the cell ("cgroup_mounts N").
int Cgroup() {
  FILE* f = std::fopen("/proc/self/cgroup", "re");
  if (!f) return 1;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    std::string l(line);
    if (!l.empty() && l.back() == '\n') l.pop_back();
    const size_t colon = l.rfind(':');
    if (colon == std::string::npos) continue;
    std::printf("%s %s\n", l.substr(0, colon).c_str(), l.substr(colon + 1).c_str());
  }
  std::fclose(f);
  int mounts = 0;
  if (FILE* m = std::fopen("/proc/self/mountinfo", "re")) {
    while (std::fgets(line, sizeof line, m)) {
      if (std::strstr(line, " - cgroup ") || std::strstr(line, " - cgroup2 ")) ++mounts;
    }
    std::fclose(m);
  }
  std::printf("cgroup_mounts %d\n", mounts);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s denied|allowed|i386|x32|status|rlimits|hog|forkbomb|spin|cgroup\n",
                 argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  int rest_argc = argc - 2;
  char** rest = argv + 2;
  if (cmd == "denied") return Denied();
  if (cmd == "allowed") return Allowed();
  if (cmd == "i386") return I386();
  if (cmd == "x32") return X32();
  if (cmd == "status") return Status();
  if (cmd == "rlimits") return Rlimits();
  if (cmd == "hog") return Hog(rest_argc, rest);
  if (cmd == "forkbomb") return ForkBomb(rest_argc, rest);
  if (cmd == "spin") return Spin(rest_argc, rest);
  if (cmd == "cgroup") return Cgroup();
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}
