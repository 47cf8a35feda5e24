// The default seccomp filter of a cell: what it refuses, compiled once, installed once on init.
//
// The filter is compiled once per cell with libseccomp (CompileDefaultSeccompFilter) and
// kept as a BPF program. Cell init installs it on itself with InstallSeccompFilter after
// setup (no_new_privs first), and every process it forks inherits it: programs run under
// it from their first instruction, and the per-exec load (conversion, JIT and action
// cache build in the kernel) is paid once per cell instead of once per exec.
//
// The filter is a deny-list on top of the other layers (no capabilities, user namespace,
// no_new_privs): denied calls fail with EPERM so programs get an explainable error; calls
// of other ABIs (i386 int 0x80, x32) kill the process. Every rule and its reason is listed
// in DefaultSeccompRules() and in docs/security.md.
//
// Threading: CompileDefaultSeccompFilter allocates and may be called from any thread.
// InstallSeccompFilter makes no allocation on its success path and only calls prctl and
// seccomp.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::sandbox {

// A classic-BPF seccomp program, ready for seccomp(SECCOMP_SET_MODE_FILTER).
struct SeccompProgram {
  std::vector<sock_filter> filter;
};

// One rule of the default filter, for docs, doctor and tests that walk every rule.
struct SeccompRule {
  std::string syscall;    // name as libseccomp resolves it, e.g. "perf_event_open"
  std::string condition;  // "" = always; otherwise e.g. "flags & CLONE_NEWUSER"
  int errno_value;        // EPERM, or ENOSYS for clone3 (so libc falls back to clone)
  std::string reason;     // why it is refused
};

// The rules of the default filter, in the order they are added.
const std::vector<SeccompRule>& DefaultSeccompRules();

// Builds the default filter for the native ABI (x86_64 or aarch64) with libseccomp and
// exports it to BPF. Syscalls that do not exist on the native ABI are skipped.
Result<SeccompProgram> CompileDefaultSeccompFilter();

// Installs `program` on the calling thread. Requires no_new_privs to be set already (it is
// checked: installing without it would need CAP_SYS_ADMIN and is an ordering bug).
Status InstallSeccompFilter(const SeccompProgram& program);

}  // namespace mcpcell::sandbox
