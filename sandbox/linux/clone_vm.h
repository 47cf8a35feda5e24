// clone3 into a child that shares the caller's memory (CLONE_VM) and runs a function on a
// stack of its own: the launch of a process that must not copy the caller's address space.
//
// Why: a fork-style clone of the multi-threaded server copies its page tables and memory
// map (dup_mmap), a cost that grows with the server's size and that every new cell paid.
// With CLONE_VM | CLONE_VFORK nothing is copied; the calling thread sleeps until the child
// has exec'd or exited, as in posix_spawn. glibc has no clone3 wrapper that runs a function
// on a new stack (and clone() cannot pass CLONE_INTO_CGROUP), so this file holds the small
// per-architecture trampoline (x86-64, AArch64). Other architectures get a fork-style
// clone3 that runs the same function on the copy: the same behaviour, the old cost.
//
// The child's function runs in the caller's memory, on `stack`, with the calling thread's
// TLS (errno included): it may make raw syscalls only (no allocation, no locks, no libc
// call that a sanitizer intercepts), must never return into the caller's frames, and ends
// with execve or _exit. With CLONE_VFORK the calling thread is stopped meanwhile, so the
// child's errno writes land in a thread that is not running. Callers block every signal
// around the call and the child resets handlers before it unblocks (a handler would run
// the caller's code in shared memory).
//
// No exceptions; usable by the server (any thread) and by tests.
#pragma once

#include <linux/sched.h>

#include <cstddef>

namespace mcpcell::sandbox {

// The child's entry: returns an exit status only if it does not exec.
using CloneVmChildFn = int (*)(void* arg);

// clone3(`args`) with `args.stack`/`args.stack_size` set to [stack, stack + size) (16-byte
// aligned top), then `fn(arg)` in the child on that stack. `args.flags` should hold
// CLONE_VM | CLONE_VFORK (the caller's choice, kept as given). Returns the child's pid in
// the caller, or -errno; never returns in the child.
long CloneVm(struct clone_args& args, void* stack, size_t size, CloneVmChildFn fn, void* arg);

// Whether CloneVm shares memory on this architecture (false: it forks, see above).
bool CloneVmSharesMemory();

}  // namespace mcpcell::sandbox
