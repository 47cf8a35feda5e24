// The restore and fork rows of lifecycle_bench (issue 28): a session's files captured into
// a snapshot store, then restored in that session and forked into new sessions, beside a
// warm-pool session's first call in the same run. What each row times is in
// bench/lifecycle/README.md.
#pragma once

#include <cstdint>
#include <string>

namespace lifecycle_bench {

struct ForkOptions {
  std::string init_path;  // mcpcell-init
  std::string state_dir;  // cells, the snapshot store
  int rounds = 20;
  uint64_t workspace_bytes = 1 << 20;  // the parent's workspace, in 64 MiB files at most
  bool breakdown = false;              // also print a cold layered cell's per-step times
};

// Runs the rows and prints them; false when a step failed (printed on stderr).
bool RunForkRows(const ForkOptions& options);

}  // namespace lifecycle_bench
