// The fork in cell init and the child's path to execve. The order of the child's steps is
// the point of this file; exec.h lists it and says why.
#include "sandbox/init/exec.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sandbox/control/unique_fd.h"
#include "sandbox/linux/caps.h"

namespace mcpcell::sandbox {
namespace {

constexpr int kStdioBase = 100;  // stdio fds are parked here before dup2 onto 0..2
constexpr int kExecFailedStatus = 127;

// Everything the child needs, prepared before fork so the child only makes syscalls.
struct ChildPlan {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::vector<char*> argv_ptrs;
  std::vector<char*> env_ptrs;
  std::string cwd;
  std::string path_var;  // PATH of the merged environment
  bool may_setgroups = true;
};

// The child's failure report: errno, then "step: message", through the CLOEXEC pipe.
[[noreturn]] void ChildFail(int err_fd, const std::string& what, int err) {
  char buffer[1024];
  std::memcpy(buffer, &err, sizeof(err));
  size_t n = std::min(what.size(), sizeof(buffer) - sizeof(err));
  std::memcpy(buffer + sizeof(err), what.data(), n);
  ssize_t ignored = ::write(err_fd, buffer, sizeof(err) + n);
  (void)ignored;
  _exit(kExecFailedStatus);
}
[[noreturn]] void ChildFail(int err_fd, const Error& error) {
  ChildFail(err_fd, error.message, error.err);
}
[[noreturn]] void ChildFailSys(int err_fd, const std::string& what) {
  int e = errno;
  ChildFail(err_fd, Error::Sys(what, e).message, e);
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
void ResetSignalsAndFds(const int stdio[3], int err_fd) {
  sigset_t all;
  sigemptyset(&all);
  if (sigprocmask(SIG_SETMASK, &all, nullptr) != 0) ChildFailSys(err_fd, "sigprocmask");
  // Init reset every disposition at start (main.cc) and changed only these since.
  for (int sig : kInitIgnoredSignals) ::signal(sig, SIG_DFL);
  // Park the three fds above 2 first: one of them may itself be 0, 1 or 2.
  int parked[3];
  for (int i = 0; i < 3; ++i) {
    parked[i] = ::fcntl(stdio[i], F_DUPFD_CLOEXEC, kStdioBase);
    if (parked[i] < 0) ChildFailSys(err_fd, "fcntl(F_DUPFD stdio)");
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(parked[i], i) < 0) ChildFailSys(err_fd, "dup2(stdio)");
  }
  // Everything else closes at execve (not now: err_fd must survive until then).
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) ChildFailSys(err_fd, "close_range");
}

// Step 6: become the sandbox user. Groups first: after setresuid we could not change them.
void BecomeSandboxUser(const InitContext& ctx, bool may_setgroups, int err_fd) {
  if (may_setgroups && ::setgroups(1, &ctx.sandbox_gid) != 0) ChildFailSys(err_fd, "setgroups");
  if (::setresgid(ctx.sandbox_gid, ctx.sandbox_gid, ctx.sandbox_gid) != 0) {
    ChildFailSys(err_fd, "setresgid(" + std::to_string(ctx.sandbox_gid) + ")");
  }
  if (::setresuid(ctx.sandbox_uid, ctx.sandbox_uid, ctx.sandbox_uid) != 0) {
    ChildFailSys(err_fd, "setresuid(" + std::to_string(ctx.sandbox_uid) + ")");
  }
}

// Step 8b: the program to run. A name without '/' is searched in PATH, checked with
// access(X_OK) as the sandbox user (real ids are the user's by now).
std::string ResolveProgram(const ChildPlan& plan, int err_fd) {
  const std::string& name = plan.argv[0];
  if (name.find('/') != std::string::npos) return name;
  std::string path = plan.path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : plan.path_var;
  int last_errno = ENOENT;
  for (size_t pos = 0; pos <= path.size();) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(pos, end - pos);
    pos = end + 1;
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (errno != ENOENT && errno != ENOTDIR) last_errno = errno;
  }
  ChildFail(err_fd, "not found in PATH (" + path + ")", last_errno);
}

[[noreturn]] void ChildMain(const ChildPlan& plan, const int stdio[3], const InitContext& ctx,
                            int err_fd) {
  if (::setpgid(0, 0) != 0) ChildFailSys(err_fd, "setpgid");
  ResetSignalsAndFds(stdio, err_fd);
  if (Status s = ApplyRlimits(ctx.rlimits); !s.ok()) ChildFail(err_fd, s.error().Wrap("rlimits"));
  // The bounding and ambient sets were emptied and the securebits locked by init at start
  // (main.cc), and a fork inherits them; what is left is permitted/effective/inheritable.
  BecomeSandboxUser(ctx, plan.may_setgroups, err_fd);
  if (Status s = ClearPermittedCaps(); !s.ok()) ChildFail(err_fd, s.error().Wrap("caps"));
  if (::chdir(plan.cwd.c_str()) != 0) ChildFailSys(err_fd, "chdir(\"" + plan.cwd + "\")");
  std::string program = ResolveProgram(plan, err_fd);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    ChildFailSys(err_fd, "prctl(PR_SET_NO_NEW_PRIVS)");
  // Last check before execve: the filter init installed on itself (ApplySeccompToInit)
  // came with the fork. A program must never run without it.
  if (ctx.seccomp != nullptr && ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER) {
    ChildFail(err_fd, "seccomp: the cell's filter is not in effect in cell init", EPERM);
  }
  ::execve(program.c_str(), plan.argv_ptrs.data(), plan.env_ptrs.data());
  ChildFailSys(err_fd, "execve(\"" + program + "\")");
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

// Reads the child's failure report; EOF without data means execve succeeded.
Result<bool> ReadChildReport(int fd, pid_t pid) {
  char buffer[1024];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return true;
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n < static_cast<ssize_t>(sizeof(int))) return Error::Sys("read(exec report pipe)");
  int err;
  std::memcpy(&err, buffer, sizeof(err));
  return Error{std::string(buffer + sizeof(err), n - sizeof(err)), err};
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
  for (std::string& a : plan.argv) plan.argv_ptrs.push_back(a.data());
  plan.argv_ptrs.push_back(nullptr);
  for (std::string& e : plan.env) {
    plan.env_ptrs.push_back(e.data());
    if (e.rfind("PATH=", 0) == 0) plan.path_var = e.substr(5);
  }
  plan.env_ptrs.push_back(nullptr);
  static const bool may_setgroups = SetgroupsAllowed();
  plan.may_setgroups = may_setgroups;

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return Error::Sys("pipe2(exec report)");
  UniqueFd report_read(report[0]), report_write(report[1]);
  pid_t pid = ::fork();
  if (pid < 0) return Error::Sys("fork");
  if (pid == 0) ChildMain(plan, stdio, ctx, report_write.get());
  // Also from the parent, so a signal to the group sent right after ExecStarted cannot
  // miss a child that has not run its own setpgid yet. EACCES after its execve is fine.
  ::setpgid(pid, pid);
  report_write.Reset();
  Result<bool> report_result = ReadChildReport(report_read.get(), pid);
  if (!report_result.ok()) return report_result.error();
  return pid;
}

}  // namespace mcpcell::sandbox
