// The cell of `mcpcell run` and `mcpcell pool`: a policy (--policy, resolved as `mcpcell
// serve --policy` does; default "default") with the cell flags (--disk, --memory, --pids,
// --cpu, --no-seccomp, and run's --workspace) as policies::PolicyOverrides, compiled by
// the one compiler (policies/compiler.h). So a run cell is what `mcpcell policy check`
// prints, and what a served cell of that policy is.
//
// run and pool start no egress proxy and no package service: a policy that needs one
// (network egress other than "deny", packages mode other than "disabled") is refused.
// Their cells still get the proxy's variables and port like every compiled spec; nothing
// listens there, so a request through it is refused at once.
//
// The pool key: two runs get the same pooled cell iff their compiled specs are equal
// apart from the cell id and per-cell paths. PoolKey is DescribeCellSpec (every field a
// policy can change, one a line) of the spec compiled with the fixed id kPoolKeyCellId and
// no template dir (it follows from the state dir).
// Threading: stateless functions.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "policies/compiler.h"
#include "policies/policy.h"
#include "sandbox/cell_spec.h"

namespace CLI {
class App;
}

namespace mcpcell::run_pool {

inline constexpr const char* kPoolKeyCellId = "pool-key";

// The flags that shape a cell, shared by `run` and `pool` (same flags, same meaning).
// Empty/unset: the policy's value.
struct CellFlags {
  std::string state_dir;
  std::string policy = "default";  // a shipped profile's name or a .toml file
  std::string disk;                // e.g. 1G, 512MiB
  std::string memory;
  std::string pids;  // a count; 0: no limit
  std::string cpu;   // millicores; 0: no limit
  bool no_seccomp = false;
  std::string workspace;  // run only: a host dir bound at /workspace
};
// Adds --state-dir, --policy, --disk, --memory, --pids, --cpu, --no-seccomp (not
// --workspace, which only run has).
void AddCellFlags(CLI::App& command, CellFlags& flags);

// The flags as overrides; an error names the flag and what it expects.
Result<policies::PolicyOverrides> ParseCellFlags(const CellFlags& flags);

// The policy a run or pool cell gets: --policy resolved, the flags applied and checked,
// refused when it needs the egress proxy or the package service. Errors name the policy
// and the key, and say what to do; `command` ("mcpcell run") is not in them.
Result<policies::Policy> ResolveCellPolicy(const CellFlags& flags);

// Ok when `policy` needs nothing but a cell: no egress, no package service.
Status CheckNeedsNoServe(const policies::Policy& policy);

// The pool key of `policy`'s cells in `state_dir` (see above).
Result<std::string> PoolKey(const policies::Policy& policy, const std::string& state_dir);

}  // namespace mcpcell::run_pool
