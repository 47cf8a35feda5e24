// setrlimit for cell processes; see rlimits.h for where it sits in the exec path.
#include "sandbox/linux/rlimits.h"

#include <sys/resource.h>

namespace mcpcell::sandbox {
namespace {

// The kernel's ceiling for RLIMIT_NOFILE is fs.nr_open (1<<20 by default); more is a typo.
constexpr uint64_t kMaxNofile = 1u << 20;

Status SetLimit(int resource, const char* name, uint64_t value) {
  rlimit current{};
  if (getrlimit(resource, &current) != 0) return Error::Sys(std::string("getrlimit(") + name + ")");
  rlim_t target = static_cast<rlim_t>(value);
  // Raising the hard limit needs CAP_SYS_RESOURCE in the initial namespace; the cell never
  // has it. Lowering to the current hard limit keeps the result at least as tight as asked.
  if (current.rlim_max != RLIM_INFINITY && target > current.rlim_max) target = current.rlim_max;
  rlimit next{target, target};
  if (setrlimit(resource, &next) != 0) {
    return Error::Sys(std::string("setrlimit(") + name + ", " + std::to_string(target) + ")");
  }
  return Ok();
}

}  // namespace

Status ValidateRlimitSpec(const RlimitSpec& spec) {
  // Below 16 descriptors even a shell with redirections fails in confusing ways.
  if (spec.nofile < 16 || spec.nofile > kMaxNofile) {
    return Error::Msg("rlimits.nofile: " + std::to_string(spec.nofile) +
                      " is outside [16, 1048576]");
  }
  if (spec.fsize_bytes == 0) {
    return Error::Msg("rlimits.fsize_bytes: 0 would make every write fail with SIGXFSZ");
  }
  if (spec.nproc != 0 && spec.nproc < 4) {
    return Error::Msg("rlimits.nproc: " + std::to_string(spec.nproc) +
                      " is too small to run a shell pipeline (0 = leave unset)");
  }
  if (spec.as_bytes != 0 && spec.as_bytes < (64ull << 20)) {
    return Error::Msg("rlimits.as_bytes: " + std::to_string(spec.as_bytes) +
                      " is below 64 MiB, too small to start common programs (0 = leave)");
  }
  return Ok();
}

Status ApplyRlimits(const RlimitSpec& spec) {
  if (Status s = ValidateRlimitSpec(spec); !s.ok()) return s;
  if (Status s = SetLimit(RLIMIT_NOFILE, "RLIMIT_NOFILE", spec.nofile); !s.ok()) return s;
  if (Status s = SetLimit(RLIMIT_FSIZE, "RLIMIT_FSIZE", spec.fsize_bytes); !s.ok()) return s;
  if (Status s = SetLimit(RLIMIT_CORE, "RLIMIT_CORE", spec.core); !s.ok()) return s;
  if (spec.nproc != 0) {
    if (Status s = SetLimit(RLIMIT_NPROC, "RLIMIT_NPROC", spec.nproc); !s.ok()) return s;
  }
  if (spec.as_bytes != 0) {
    if (Status s = SetLimit(RLIMIT_AS, "RLIMIT_AS", spec.as_bytes); !s.ok()) return s;
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
