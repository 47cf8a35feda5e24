// Helpers of the cgroup unit tests (cgroup_test.cc: formats against fake trees;
// cgroup_real_test.cc: this host's cgroupfs; cgroup_v2_test.cc: a real cgroup2 mount).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace mcpcell::sandbox::cgroup_test {

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void Spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A cgroup name no other test (or run) uses.
inline std::string UniqueId(const char* what) {
  static int n = 0;
  return std::string("unit-") + what + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

// A forked child that waits until released, so the parent can move it into a cgroup first.
template <typename Fn>
class HeldChild {
 public:
  explicit HeldChild(Fn fn) {
    if (pipe(gate_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(gate_[1]);
      char c;
      if (read(gate_[0], &c, 1) != 1) _exit(99);
      _exit(fn());
    }
    close(gate_[0]);
  }
  ~HeldChild() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  pid_t pid() const { return pid_; }
  void Release() {
    if (write(gate_[1], "g", 1) != 1) ADD_FAILURE() << "release";
    close(gate_[1]);
  }
  int Wait() {
    waitpid(pid_, &status_, 0);
    waited_ = true;
    return status_;
  }

 private:
  int gate_[2] = {-1, -1};
  pid_t pid_ = -1;
  int status_ = 0;
  bool waited_ = false;
};

// Spins for `wall_seconds` of wall time (a CPU hog for quota tests); returns 0.
inline double CpuSecondsOfSpin(double wall_seconds) {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  volatile uint64_t x = 0;
  do {
    for (int i = 0; i < 100000; ++i) x = x + i;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < wall_seconds);
  return 0;
}

}  // namespace mcpcell::sandbox::cgroup_test
