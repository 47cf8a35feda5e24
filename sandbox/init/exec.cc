// The clone in cell init and the child's path to execve. The order of the child's steps is
// the point of this file; exec.h lists it and says why.
#include "sandbox/init/exec.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sandbox/linux/caps.h"

// Under AddressSanitizer the child's stack needs its shadow cleared before each clone (below).
#if defined(__SANITIZE_ADDRESS__)
#define MCPCELL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MCPCELL_ASAN 1
#endif
#endif
#ifdef MCPCELL_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace mcpcell::sandbox {
namespace {

constexpr int kStdioBase = 100;  // stdio fds are parked here before dup2 onto 0..2
constexpr int kExecFailedStatus = 127;

// Everything the child needs, prepared before the clone: the child shares init's memory
// (CLONE_VM), so it must not allocate (a buffer alive at execve would leak in init) and
// only makes syscalls and fills fixed buffers.
struct ChildPlan {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::vector<char*> argv_ptrs;
  std::vector<char*> env_ptrs;
  std::string cwd;
  // argv[0] as is when it has a '/', else every PATH candidate "dir/argv[0]" in order.
  std::vector<std::string> candidates;
  bool is_path = false;
  std::string not_found;  // the message when no candidate is executable
  std::string setresgid_step, setresuid_step, chdir_step;
  bool may_setgroups = true;
};

// The child's failure, written into init's memory (shared until execve or _exit). Read by
// the parent once the clone returns; `failed` stays false when execve succeeded.
struct ChildReport {
  bool failed = false;
  bool sys = false;  // append errno's name and text, as Error::Sys does
  int err = 0;
  char what[1024] = {};
};

struct ChildArgs {
  const ChildPlan* plan;
  const int* stdio;
  const InitContext* ctx;
  ChildReport* report;
};

// Bounded concatenation into the report, without allocating.
void Append(ChildReport& r, const char* text) {
  size_t used = std::strlen(r.what);
  size_t room = sizeof(r.what) - 1 - used;
  size_t n = std::min(std::strlen(text), room);
  std::memcpy(r.what + used, text, n);
  r.what[used + n] = '\0';
}

[[noreturn]] void ChildFail(ChildReport& r, const char* what, const char* more, int err, bool sys) {
  r.what[0] = '\0';
  Append(r, what);
  Append(r, more);
  r.err = err;
  r.sys = sys;
  r.failed = true;
  _exit(kExecFailedStatus);
}
[[noreturn]] void ChildFailSys(ChildReport& r, const char* what, const char* more = "") {
  ChildFail(r, what, more, errno, true);
}
// An Error made by a shared helper (rlimits, caps). Only on a path that should never be
// taken: its message buffer is not freed (the child _exits without unwinding).
[[noreturn]] void ChildFailWith(ChildReport& r, const char* step, const Error& error) {
  ChildFail(r, step, error.message.c_str(), error.err, false);
}

// /proc/self/setgroups is "deny" in a user namespace whose gid map was written without
// privilege (desktop mode); setgroups() then fails with EPERM and must be skipped.
bool SetgroupsAllowed() {
  char buffer[16] = {};
  int fd = ::open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  return !(n > 0 && std::strncmp(buffer, "deny", 4) == 0);
}

// Steps 2 and 3: clean signal state and exactly three inherited fds.
void ResetSignalsAndFds(const int stdio[3], ChildReport& r) {
  sigset_t all;
  sigemptyset(&all);
  if (sigprocmask(SIG_SETMASK, &all, nullptr) != 0) ChildFailSys(r, "sigprocmask");
  // Init reset every disposition at start (main.cc) and changed only these since.
  for (int sig : kInitIgnoredSignals) ::signal(sig, SIG_DFL);
  // Park the three fds above 2 first: one of them may itself be 0, 1 or 2.
  int parked[3];
  for (int i = 0; i < 3; ++i) {
    parked[i] = ::fcntl(stdio[i], F_DUPFD_CLOEXEC, kStdioBase);
    if (parked[i] < 0) ChildFailSys(r, "fcntl(F_DUPFD stdio)");
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(parked[i], i) < 0) ChildFailSys(r, "dup2(stdio)");
  }
  // Everything else closes at execve.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) ChildFailSys(r, "close_range");
}

// Step 6: become the sandbox user. Groups first: after setresuid we could not change them.
void BecomeSandboxUser(const ChildPlan& plan, const InitContext& ctx, ChildReport& r) {
  if (plan.may_setgroups && ::setgroups(1, &ctx.sandbox_gid) != 0) ChildFailSys(r, "setgroups");
  if (::setresgid(ctx.sandbox_gid, ctx.sandbox_gid, ctx.sandbox_gid) != 0) {
    ChildFailSys(r, plan.setresgid_step.c_str());
  }
  if (::setresuid(ctx.sandbox_uid, ctx.sandbox_uid, ctx.sandbox_uid) != 0) {
    ChildFailSys(r, plan.setresuid_step.c_str());
  }
}

// Step 8b: the program to run: the first PATH candidate the sandbox user may execute
// (access(X_OK) with the real ids, which are the user's by now).
const char* ResolveProgram(const ChildPlan& plan, ChildReport& r) {
  if (plan.is_path) return plan.candidates[0].c_str();  // execve says what is wrong with it
  int last_errno = ENOENT;
  for (const std::string& candidate : plan.candidates) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.c_str();
    if (errno != ENOENT && errno != ENOTDIR) last_errno = errno;
  }
  ChildFail(r, plan.not_found.c_str(), "", last_errno, false);
}

// The child, on its own stack in init's memory; init is suspended until execve or _exit.
int ChildMain(void* raw) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(raw);
  const ChildPlan& plan = *a.plan;
  const InitContext& ctx = *a.ctx;
  ChildReport& r = *a.report;
  if (::setpgid(0, 0) != 0) ChildFailSys(r, "setpgid");
  ResetSignalsAndFds(a.stdio, r);
  if (Status s = ApplyRlimits(ctx.rlimits); !s.ok()) ChildFailWith(r, "rlimits: ", s.error());
  // The bounding and ambient sets were emptied and the securebits locked by init at start
  // (main.cc), and a clone inherits them; what is left is permitted/effective/inheritable.
  BecomeSandboxUser(plan, ctx, r);
  if (Status s = ClearPermittedCaps(); !s.ok()) ChildFailWith(r, "caps: ", s.error());
  if (::chdir(plan.cwd.c_str()) != 0) ChildFailSys(r, plan.chdir_step.c_str());
  const char* program = ResolveProgram(plan, r);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFailSys(r, "prctl(PR_SET_NO_NEW_PRIVS)");
  // Last check before execve: the filter init installed on itself (ApplySeccompToInit)
  // came with the clone. A program must never run without it.
  if (ctx.seccomp != nullptr && ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER) {
    ChildFail(r, "seccomp: the cell's filter is not in effect in cell init", "", EPERM, false);
  }
  ::execve(program, plan.argv_ptrs.data(), plan.env_ptrs.data());
  const int e = errno;
  r.what[0] = '\0';
  Append(r, "execve(\"");
  Append(r, program);
  Append(r, "\")");
  r.err = e;
  r.sys = true;
  r.failed = true;
  _exit(kExecFailedStatus);
}

// The child's stack: made once, reused by every exec (init is single-threaded and is
// suspended while a child runs on it). A guard page below catches an overflow.
constexpr size_t kStackBytes = 256 * 1024;
Result<char*> ChildStackTop() {
  static char* top = nullptr;
  if (top != nullptr) return top;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* base = ::mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) return Error::Sys("mmap(exec child stack)");
  if (::mprotect(base, page, PROT_NONE) != 0) {
    ::munmap(base, kStackBytes + page);
    return Error::Sys("mprotect(exec child stack guard)");
  }
  top = static_cast<char*>(base) + page + kStackBytes;
  return top;
}

Status ValidateRequest(const control::ExecRequest& request) {
  if (request.argv.empty()) return Error::Msg("argv: empty");
  if (request.argv[0].empty()) return Error::Msg("argv[0]: empty");
  for (size_t i = 0; i < request.argv.size(); ++i) {
    if (request.argv[i].find('\0') != std::string::npos) {
      return Error::Msg("argv[" + std::to_string(i) + "]: contains a NUL byte");
    }
  }
  for (size_t i = 0; i < request.env.size(); ++i) {
    const std::string& e = request.env[i];
    if (e.find('\0') != std::string::npos || e.find('=') == std::string::npos || e[0] == '=') {
      return Error::Msg("env[" + std::to_string(i) + "]: not KEY=VALUE");
    }
  }
  if (!request.cwd.empty() &&
      (request.cwd[0] != '/' || request.cwd.find('\0') != std::string::npos)) {
    return Error::Msg("cwd: must be an absolute path");
  }
  return Ok();
}

}  // namespace

Status ApplySeccompToInit(const InitContext& ctx) {
  if (ctx.seccomp == nullptr) return Ok();
  // Required to install a filter without CAP_SYS_ADMIN, and inherited by every child (which
  // sets it again in step 9). Init never execs, so it changes nothing for init itself.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Error::Sys("prctl(PR_SET_NO_NEW_PRIVS)").Wrap("seccomp");
  }
  if (Status s = InstallSeccompFilter(*ctx.seccomp); !s.ok()) return s.error().Wrap("seccomp");
  return Ok();
}

std::vector<std::string> MergeEnvironment(const std::vector<std::string>& defaults,
                                          const std::vector<std::string>& overlay) {
  std::vector<std::string> out = defaults;
  for (const std::string& entry : overlay) {
    size_t key_len = entry.find('=');
    bool replaced = false;
    for (std::string& existing : out) {
      if (existing.compare(0, key_len + 1, entry, 0, key_len + 1) == 0) {
        existing = entry;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(entry);
  }
  return out;
}

Result<pid_t> StartExec(const control::ExecRequest& request, const int stdio[3],
                        const InitContext& ctx) {
  if (Status s = ValidateRequest(request); !s.ok()) return s.error();
  ChildPlan plan;
  plan.argv = request.argv;
  plan.env = MergeEnvironment(ctx.env_defaults, request.env);
  plan.cwd = request.cwd.empty() ? ctx.workspace : request.cwd;
  std::string path_var;
  for (std::string& a : plan.argv) plan.argv_ptrs.push_back(a.data());
  plan.argv_ptrs.push_back(nullptr);
  for (std::string& e : plan.env) {
    plan.env_ptrs.push_back(e.data());
    if (e.rfind("PATH=", 0) == 0) path_var = e.substr(5);
  }
  plan.env_ptrs.push_back(nullptr);
  const std::string& name = plan.argv[0];
  if (name.find('/') != std::string::npos) {
    plan.candidates.push_back(name);
    plan.is_path = true;
  } else {
    if (path_var.empty()) path_var = "/usr/local/bin:/usr/bin:/bin";
    for (size_t pos = 0; pos <= path_var.size();) {
      size_t end = path_var.find(':', pos);
      if (end == std::string::npos) end = path_var.size();
      std::string dir = path_var.substr(pos, end - pos);
      pos = end + 1;
      plan.candidates.push_back((dir.empty() ? "." : dir) + "/" + name);
    }
    plan.not_found = "not found in PATH (" + path_var + ")";
  }
  plan.setresgid_step = "setresgid(" + std::to_string(ctx.sandbox_gid) + ")";
  plan.setresuid_step = "setresuid(" + std::to_string(ctx.sandbox_uid) + ")";
  plan.chdir_step = "chdir(\"" + plan.cwd + "\")";
  static const bool may_setgroups = SetgroupsAllowed();
  plan.may_setgroups = may_setgroups;

  Result<char*> stack = ChildStackTop();
  if (!stack.ok()) return stack.error();
#ifdef MCPCELL_ASAN
  // The child shares init's memory, shadow included, and never returns from its frames
  // (execve or _exit), so the previous child's frames are still poisoned on the reused
  // stack: without this the next child's first write there is reported as a use after scope.
  __asan_unpoison_memory_region(*stack - kStackBytes, kStackBytes);
#endif
  ChildReport report;
  ChildArgs args{&plan, stdio, &ctx, &report};
  // CLONE_VM | CLONE_VFORK, as posix_spawn does: no copy of init's page tables, and the
  // clone returns once the child has exec'd (or failed and exited), so `report` is final.
  pid_t pid = ::clone(ChildMain, *stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  if (pid < 0) return Error::Sys("clone(CLONE_VM | CLONE_VFORK)");
  // Also from the parent, so a signal to the group sent right after ExecStarted cannot
  // miss a child that has not run its own setpgid yet. EACCES after its execve is fine.
  ::setpgid(pid, pid);
  if (!report.failed) return pid;
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (report.sys) return Error::Sys(report.what, report.err);
  return Error{report.what, report.err};
}

}  // namespace mcpcell::sandbox
