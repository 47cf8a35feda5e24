// Starting one program inside a cell: the clone in cell init and everything the child
// does between clone and execve.
//
// StartExec is called by the control loop (single-threaded pid 1). The child is made with
// clone(CLONE_VM | CLONE_VFORK) on a stack of its own, as posix_spawn does: it shares
// init's memory until execve (no copy of init's page tables, no copy-on-write faults, no
// address space to tear down at execve) and init is suspended until then. So everything
// is prepared before the clone (argv, the merged environment, the PATH candidates, the
// step names of error messages), and the child allocates nothing: it makes syscalls and
// fills fixed buffers. It runs, in order:
//   1. setpgid(0, 0): its own process group, so a timeout or signal reaches the group;
//   2. signal mask and the dispositions init changed reset (init blocks SIGCHLD for its
//      signalfd and ignores kInitIgnoredSignals; everything else it reset at start);
//   3. stdin/stdout/stderr from the fds the server passed; every other fd closed;
//   4. rlimits (B: ApplyRlimits), while still privileged so hard limits can be set;
//   5. (done once by init at start and inherited: bounding + ambient capabilities dropped,
//      securebits locked, verified; see main.cc and caps.h)
//   6. setgroups, setresgid, setresuid to the sandbox user;
//   7. ClearPermittedCaps (B): permitted/effective/inheritable empty, verified;
//   8. chdir(cwd) and PATH search as the sandbox user (permission checks are its own);
//   9. PR_SET_NO_NEW_PRIVS;
//  10. seccomp checked LAST (PR_GET_SECCOMP is filter mode), then execve.
// The filter itself is installed once on init (ApplySeccompToInit, before Ready) and comes
// with every clone: loading it per exec made the kernel convert it, JIT it and build its
// action cache each time (a large share of an exec). The child's steps 1-9 therefore
// run under it; the filter denies none of the calls they make (it is a deny-list of
// calls no setup step uses), and the program runs under it from its first instruction.
// A failing step writes "step: error" and errno into a report in init's memory and
// _exits 127; when the clone returns, the parent finds it (or none: execve succeeded),
// reaps the child and returns the error, so a bad argv[0] or cwd is an ErrorReply, not an
// exit status. The only allocations a child may make are libcap's balanced ones in step 7
// and an Error's message on a failure of step 4 or 7 (never expected; it is not freed).
//
// Built without exceptions. Init has no signal handlers (only SIG_DFL and SIG_IGN), so no
// handler can run on the child's stack and touch init's state.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/control/protocol.h"
#include "sandbox/init/control_loop.h"

namespace mcpcell::sandbox {

// Sets no_new_privs on cell init and installs ctx.seccomp on it (nothing when the spec
// disabled seccomp). Called once by init's main after setup and before Ready: from then
// on init's own calls and every process it forks are under the cell's filter. An error
// (the kernel refused the filter) must fail the cell's setup.
Status ApplySeccompToInit(const InitContext& ctx);

// Merges `overlay` ("KEY=VALUE") onto `defaults`: a key in overlay replaces the default.
std::vector<std::string> MergeEnvironment(const std::vector<std::string>& defaults,
                                          const std::vector<std::string>& overlay);

// Validates the request (non-empty argv, no NUL bytes, cwd absolute or empty), clones, and
// returns the child's pid once it has exec'd. `stdio` are the 3 fds the request carried.
Result<pid_t> StartExec(const control::ExecRequest& request, const int stdio[3],
                        const InitContext& ctx);

}  // namespace mcpcell::sandbox
