// Resource limits (setrlimit) of every process a cell runs.
//
// Applied by the exec path in the forked child (sandbox/init/exec.cc) before the uid
// change, so the limits are set while the process may still lower them freely; soft and
// hard limits are set to the same value so the program cannot raise them again. rlimits are
// per process (nofile, fsize, core, as) or per real uid (nproc); the per-cell totals are the
// cgroup's job (sandbox/linux/cgroup.h). Threading: calling thread/process only.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace mcpcell::sandbox {

struct RlimitSpec {
  uint64_t nofile = 1024;             // RLIMIT_NOFILE, must be >= 16
  uint64_t fsize_bytes = 1ull << 30;  // RLIMIT_FSIZE: largest file a program may write
  uint64_t core = 0;                  // RLIMIT_CORE: no core dumps by default
  uint64_t nproc = 0;                 // RLIMIT_NPROC, 0 = leave (the cgroup's pids.max counts)
  uint64_t as_bytes = 0;              // RLIMIT_AS, 0 = leave (memory is the cgroup's job)
};

// Checks the spec's values; the message names the field ("rlimits.nofile: ...").
Status ValidateRlimitSpec(const RlimitSpec& spec);

// Sets soft = hard = the spec's value for each limit. A value above the current hard
// limit cannot be granted without privilege and is lowered to it (the effective limit is
// then tighter than asked, never looser). Fails, naming the limit, if setrlimit fails.
Status ApplyRlimits(const RlimitSpec& spec);

}  // namespace mcpcell::sandbox
