// Helpers of the cgroup unit tests (cgroup_test.cc: formats against fake trees;
// cgroup_real_test.cc: this host's cgroupfs; cgroup_v2_test.cc: a real cgroup2 mount).
#pragma once

#include <unistd.h>

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

}  // namespace mcpcell::sandbox::cgroup_test
