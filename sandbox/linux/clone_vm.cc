// clone3 with a child function on its own stack (see clone_vm.h).
#include "sandbox/linux/clone_vm.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace mcpcell::sandbox {

#if defined(__x86_64__) || defined(__aarch64__)

// long mcpcell_clone3_run(struct clone_args* args, size_t size, fn, arg): the syscall in
// line, because the child wakes with the new stack pointer and must not return through a
// libc wrapper's frame (it has none on that stack). The child gets a copy of the
// registers, so `fn` and `arg` travel in registers the syscall preserves; it calls
// fn(arg) with a zeroed frame pointer and exits with its result. -errno in the parent on
// failure, as the raw syscall returns it.
extern "C" long mcpcell_clone3_run(struct clone_args* args, size_t size, CloneVmChildFn fn,
                                   void* arg);

#if defined(__x86_64__)
asm(R"(
  .text
  .globl mcpcell_clone3_run
  .type mcpcell_clone3_run, @function
mcpcell_clone3_run:
  .cfi_startproc
  mov %rdx, %r8
  mov %rcx, %r9
  mov $435, %eax
  syscall
  test %rax, %rax
  jz 1f
  ret
1:
  .cfi_undefined rip
  xor %ebp, %ebp
  mov %r9, %rdi
  call *%r8
  mov %eax, %edi
  mov $60, %eax
  syscall
  hlt
  .cfi_endproc
  .size mcpcell_clone3_run, .-mcpcell_clone3_run
)");
#else
asm(R"(
  .text
  .globl mcpcell_clone3_run
  .type mcpcell_clone3_run, %function
mcpcell_clone3_run:
  .cfi_startproc
  mov x9, x2
  mov x10, x3
  mov x8, #435
  svc #0
  cbz x0, 1f
  ret
1:
  .cfi_undefined x30
  mov x29, xzr
  mov x30, xzr
  mov x0, x10
  blr x9
  mov x8, #93
  svc #0
  brk #0
  .cfi_endproc
  .size mcpcell_clone3_run, .-mcpcell_clone3_run
)");
#endif

long CloneVm(struct clone_args& args, void* stack, size_t size, CloneVmChildFn fn, void* arg) {
  // The ABIs want a 16-byte aligned stack pointer at the call.
  const uintptr_t base = reinterpret_cast<uintptr_t>(stack);
  const uintptr_t top = (base + size) & ~static_cast<uintptr_t>(15);
  args.stack = base;
  args.stack_size = top - base;
  return mcpcell_clone3_run(&args, sizeof args, fn, arg);
}

bool CloneVmSharesMemory() { return true; }

#else

long CloneVm(struct clone_args& args, void*, size_t, CloneVmChildFn fn, void* arg) {
  args.flags &= ~static_cast<uint64_t>(CLONE_VM | CLONE_VFORK);
  args.stack = 0;
  args.stack_size = 0;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) _exit(fn(arg));
  return pid < 0 ? -errno : pid;
}

bool CloneVmSharesMemory() { return false; }

#endif

}  // namespace mcpcell::sandbox
