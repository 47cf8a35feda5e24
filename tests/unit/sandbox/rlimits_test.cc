// rlimits applied in forked children and checked both with getrlimit and by their effect
// (a write past fsize fails with EFBIG; the fd table stops at nofile).
#include "sandbox/linux/rlimits.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace mcpcell::sandbox {
namespace {

template <typename Fn>
int InChild(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Is(int resource, rlim_t value) {
  rlimit r{};
  return getrlimit(resource, &r) == 0 && r.rlim_cur == value && r.rlim_max == value;
}

TEST(Rlimits, DefaultsAreSetSoftAndHard) {
  EXPECT_EQ(InChild([] {
              if (!ApplyRlimits(RlimitSpec{}).ok()) return 1;
              if (!Is(RLIMIT_NOFILE, 1024)) return 2;
              if (!Is(RLIMIT_FSIZE, 1ull << 30)) return 3;
              if (!Is(RLIMIT_CORE, 0)) return 4;
              return 0;
            }),
            0);
}

TEST(Rlimits, FsizeStopsALargeWrite) {
  char dir[] = "/tmp/mcpcell-rlimits-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/big";
  EXPECT_EQ(InChild([&] {
              signal(SIGXFSZ, SIG_IGN);  // so the write reports EFBIG instead of dying
              RlimitSpec spec;
              spec.fsize_bytes = 4096;
              if (!ApplyRlimits(spec).ok()) return 1;
              int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
              if (fd < 0) return 2;
              std::vector<char> data(8192, 'x');
              ssize_t first = write(fd, data.data(), data.size());
              ssize_t second = write(fd, data.data(), data.size());
              const int err = errno;
              close(fd);
              return first == 4096 && second < 0 && err == EFBIG ? 0 : 3;
            }),
            0);
  unlink(file.c_str());
  rmdir(dir);
}

TEST(Rlimits, NofileStopsOpening) {
  EXPECT_EQ(InChild([] {
              RlimitSpec spec;
              spec.nofile = 32;
              if (!ApplyRlimits(spec).ok()) return 1;
              int opened = 0;
              while (open("/dev/null", O_RDONLY) >= 0) ++opened;
              return errno == EMFILE && opened < 32 ? 0 : 2;
            }),
            0);
}

TEST(Rlimits, OptionalLimitsOnlyWhenSet) {
  EXPECT_EQ(InChild([] {
              rlimit before{};
              getrlimit(RLIMIT_AS, &before);
              if (!ApplyRlimits(RlimitSpec{}).ok()) return 1;
              rlimit after{};
              getrlimit(RLIMIT_AS, &after);
              if (after.rlim_cur != before.rlim_cur) return 2;  // 0 = leave
              RlimitSpec spec;
              spec.as_bytes = 256ull << 20;
              spec.nproc = 64;
              if (!ApplyRlimits(spec).ok()) return 3;
              if (!Is(RLIMIT_AS, 256ull << 20) || !Is(RLIMIT_NPROC, 64)) return 4;
              // The address space limit bites. A raw mmap, not malloc: under ASan the
              // allocator would abort instead of failing, and its interceptors allocate.
              long p = syscall(SYS_mmap, nullptr, 512ul << 20, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
              return p == -1 && errno == ENOMEM ? 0 : 5;
            }),
            0);
}

TEST(Rlimits, AboveTheHardLimitIsClampedNotRaised) {
  EXPECT_EQ(InChild([] {
              rlimit low{100, 100};
              if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 1;
              RlimitSpec spec;  // asks for 1024
              if (!ApplyRlimits(spec).ok()) return 2;
              return Is(RLIMIT_NOFILE, 100) ? 0 : 3;
            }),
            0);
}

TEST(Rlimits, BadSpecsNameTheField) {
  struct Case {
    RlimitSpec spec;
    const char* field;
  };
  std::vector<Case> cases(4);
  cases[0].spec.nofile = 3;
  cases[0].field = "rlimits.nofile";
  cases[1].spec.fsize_bytes = 0;
  cases[1].field = "rlimits.fsize_bytes";
  cases[2].spec.nproc = 1;
  cases[2].field = "rlimits.nproc";
  cases[3].spec.as_bytes = 1024;
  cases[3].field = "rlimits.as_bytes";
  for (const Case& c : cases) {
    Status s = ValidateRlimitSpec(c.spec);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(s.error().message.find(c.field), std::string::npos) << s.error().message;
    EXPECT_FALSE(ApplyRlimits(c.spec).ok()) << c.field;
  }
  EXPECT_TRUE(ValidateRlimitSpec(RlimitSpec{}).ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
