// Cell init's request loop: one request at a time, children reaped through a signalfd.
#include "sandbox/init/control_loop.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include "base/unique_fd.h"
#include "sandbox/control/protocol.h"
#include "sandbox/init/exec.h"
#include "sandbox/init/file_ops.h"
#include "sandbox/init/output_pump.h"

namespace mcpcell::sandbox {
namespace {

using namespace control;  // NOLINT: the loop speaks nothing but the protocol

void Log(const std::string& line) {
  std::string text = "mcpcell-init: " + line + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

class ControlLoop {
 public:
  ControlLoop(int control_fd, const InitContext& ctx, int root_fd)
      : fd_(control_fd),
        ctx_(ctx),
        files_{root_fd, ctx.workspace, ctx.sandbox_uid, ctx.sandbox_gid} {}

  [[noreturn]] void Run(int signal_fd);

 private:
  void HandleFrame();
  void Dispatch(Received& received);
  void HandleExec(const ExecRequest& request, std::vector<UniqueFd>& fds);
  // A background program (DetachedExecRequest): its output goes through a pipe init
  // reads (an OutputPump) into the file the request names.
  void HandleDetachedExec(const DetachedExecRequest& request, std::vector<UniqueFd>& fds);
  void ServePumps(const std::vector<pollfd>& fds);
  // An event of one exec, on its own event socket. A failure (the server gave up on the
  // exec and closed its end: EPIPE) concerns that exec alone: the event is dropped.
  static void SendEvent(int events_fd, const Message& message);
  void HandleSignal(const SignalRequest& request);
  void ReapChildren();
  size_t StopLeftovers(int signo);
  Result<pid_t> StartExecAtTheLimit(const ExecRequest& request, const int stdio[3]);
  void Send(const Message& message);
  void SendError(uint64_t id, const Error& error) {
    Send(ErrorReply{id, error.err, error.message});
  }
  template <typename T>
  void Reply(uint64_t id, Result<T> result) {
    if (result.ok()) {
      Send(std::move(result.value()));
    } else {
      SendError(id, result.error());
    }
  }
  void ReplyStatus(uint64_t id, const Status& status) {
    if (status.ok()) {
      Send(OkReply{id});
    } else {
      SendError(id, status.error());
    }
  }
  [[noreturn]] void Shutdown(int status);

  int fd_;
  const InitContext& ctx_;
  FileOpContext files_;
  struct RunningExec {
    uint64_t request_id = 0;
    UniqueFd events;  // the exec's event socket: ExecExited goes here
  };
  std::map<pid_t, RunningExec> execs_;  // by the running exec leader's pid
  // Detached execs' output, by request id (a pump may outlive its leader while another
  // process of the exec still holds the pipe).
  std::map<uint64_t, OutputPump> pumps_;
  uint64_t children_reaped_ = 0;
};

void ControlLoop::Send(const Message& message) {
  Status s = SendMessage(fd_, message);
  if (!s.ok()) {
    // The server is gone (EPIPE) or the socket broke: nobody is left to serve.
    Log("send " + std::string(MessageName(message)) + ": " + s.error().message);
    Shutdown(s.error().err == EPIPE ? 0 : 1);
  }
}

void ControlLoop::SendEvent(int events_fd, const Message& message) {
  Status s = SendMessage(events_fd, message);
  (void)s;
}

void ControlLoop::HandleExec(const ExecRequest& request, std::vector<UniqueFd>& fds) {
  const int stdio[3] = {fds[0].get(), fds[1].get(), fds[2].get()};
  UniqueFd events = std::move(fds[3]);
  Result<pid_t> pid = StartExec(request, stdio, ctx_);
  if (!pid.ok() && pid.error().err == EAGAIN) pid = StartExecAtTheLimit(request, stdio);
  if (!pid.ok()) {
    fds.clear();  // no program: nothing may hold the pipes open
    const Error& e = pid.error();
    return SendEvent(events.get(), ErrorReply{request.request_id, e.err, e.message});
  }
  if (request.report_start) SendEvent(events.get(), ExecStarted{request.request_id, *pid});
  // Init's copies of the program's stdio close now: the child has its own, and the server
  // keeps its copies of the output ends until it has read ExecExited (so the pipes hang up
  // only after the exit is reported, however the server's thread and init are scheduled).
  execs_[*pid] = RunningExec{request.request_id, std::move(events)};
  fds.clear();
}

void ControlLoop::HandleDetachedExec(const DetachedExecRequest& request,
                                     std::vector<UniqueFd>& fds) {
  UniqueFd events = std::move(fds[1]);
  auto fail = [&](const Error& e) {
    fds.clear();
    SendEvent(events.get(), ErrorReply{request.request_id, e.err, e.message});
  };
  Result<UniqueFd> file = CreateOutputFile(files_, request.output_path);
  if (!file.ok()) return fail(file.error().Wrap("output file"));
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(Error::Sys("pipe2(output)"));
  UniqueFd read_end(p[0]), write_end(p[1]);
  if (::fcntl(read_end.get(), F_SETFL, O_NONBLOCK) != 0)
    return fail(Error::Sys("fcntl(output pipe, O_NONBLOCK)"));
  const ExecRequest exec{request.request_id, request.argv, request.env, request.cwd, 1};
  const int stdio[3] = {fds[0].get(), write_end.get(), write_end.get()};
  Result<pid_t> pid = StartExec(exec, stdio, ctx_);
  if (!pid.ok() && pid.error().err == EAGAIN) pid = StartExecAtTheLimit(exec, stdio);
  if (!pid.ok()) return fail(pid.error());
  SendEvent(events.get(), ExecStarted{request.request_id, *pid});
  execs_[*pid] = RunningExec{request.request_id, std::move(events)};
  pumps_.emplace(request.request_id,
                 OutputPump(std::move(read_end), std::move(*file), request.output_cap));
  fds.clear();  // init's copy of stdin; write_end closes here: the child has its own
}

void ControlLoop::ServePumps(const std::vector<pollfd>& fds) {
  for (const pollfd& p : fds) {
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    for (auto it = pumps_.begin(); it != pumps_.end(); ++it) {
      if (it->second.fd() != p.fd) continue;
      if (!it->second.Drain()) pumps_.erase(it);
      break;
    }
  }
}

// Sends signo to every process of the cell that belongs to no exec in progress: processes
// that calls which have ended left running (a background job, a fork bomb that put itself
// in the background). Returns how many it signalled; signo 0 counts them, zombies included
// (they hold their pid until reaped).
size_t ControlLoop::StopLeftovers(int signo) {
  std::set<pid_t> live_groups;
  for (const auto& [pid, exec] : execs_) live_groups.insert(pid);  // leader pid = group id
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  size_t signalled = 0;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 1) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) continue;  // gone already
    char stat[512];
    ssize_t n = ::read(fd.get(), stat, sizeof stat - 1);
    if (n <= 0) continue;
    stat[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold anything, so parse after the last ')'.
    const char* close = std::strrchr(stat, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!close || std::sscanf(close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (live_groups.count(static_cast<pid_t>(pgrp))) continue;
    if (signo == 0) {
      ++signalled;
      continue;
    }
    if (state == 'Z') continue;
    if (signo == SIGSTOP && state == 'T') continue;  // stopped in an earlier round
    if (::kill(static_cast<pid_t>(pid), signo) == 0) ++signalled;
  }
  ::closedir(proc);
  return signalled;
}

// fork said EAGAIN: the cell is at its process limit (pids.max). A session whose earlier
// call left processes that fill it (a self-backgrounding fork bomb) would otherwise be
// unable to run anything until it ends. Processes of execs in progress are spared; the
// leftovers are stopped first (a stopped process cannot fork into the slot a killed one
// frees), then killed and reaped, and the exec is tried again.
Result<pid_t> ControlLoop::StartExecAtTheLimit(const ExecRequest& request, const int stdio[3]) {
  size_t stopped = 0;
  for (int round = 0; round < 64; ++round) {
    size_t n = StopLeftovers(SIGSTOP);
    stopped += n;
    if (n == 0) break;
  }
  if (stopped == 0) {
    return Error{
        "fork: the cell is at its process limit and every process in it belongs to a "
        "call still running",
        EAGAIN};
  }
  size_t killed = StopLeftovers(SIGKILL);
  Log("at the process limit: killed " + std::to_string(killed) +
      " process(es) left running by calls that had ended");
  // The killed processes hold their pids until reaped (they end up init's orphans): wait
  // for all of them (at most a second), so the call finds the cell's pids free, not one.
  for (int attempt = 0; attempt < 200; ++attempt) {
    ReapChildren();
    if (StopLeftovers(0) == 0) break;
    timespec pause{0, 5'000'000};
    ::nanosleep(&pause, nullptr);
  }
  return StartExec(request, stdio, ctx_);
}

void ControlLoop::HandleSignal(const SignalRequest& request) {
  if (request.signo < 0 || request.signo >= NSIG) {
    return SendError(request.request_id, Error::Msg("signo " + std::to_string(request.signo) +
                                                    ": not a signal number"));
  }
  for (const auto& [pid, exec] : execs_) {
    if (exec.request_id != request.exec_request_id) continue;
    // The group id is the leader's pid (setpgid in exec.cc); the leader is not reaped yet,
    // so the id cannot have been reused.
    if (::kill(-pid, request.signo) != 0) {
      return SendError(request.request_id, Error::Sys("kill(-" + std::to_string(pid) + ")"));
    }
    return Send(OkReply{request.request_id});
  }
  SendError(request.request_id,
            Error::Sys("signal exec " + std::to_string(request.exec_request_id) + ": not running",
                       ESRCH));
}

void ControlLoop::Dispatch(Received& received) {
  Message& m = received.message;
  if (auto* r = std::get_if<ExecRequest>(&m)) return HandleExec(*r, received.fds);
  if (auto* r = std::get_if<DetachedExecRequest>(&m)) return HandleDetachedExec(*r, received.fds);
  if (auto* r = std::get_if<SignalRequest>(&m)) return HandleSignal(*r);
  if (auto* r = std::get_if<ReadFileRequest>(&m)) return Reply(r->request_id, ReadFile(files_, *r));
  if (auto* r = std::get_if<WriteFileRequest>(&m))
    return ReplyStatus(r->request_id, WriteFile(files_, *r));
  if (auto* r = std::get_if<ListDirRequest>(&m)) return Reply(r->request_id, ListDir(files_, *r));
  if (auto* r = std::get_if<StatRequest>(&m)) return Reply(r->request_id, StatPath(files_, *r));
  if (auto* r = std::get_if<MkdirRequest>(&m))
    return ReplyStatus(r->request_id, MakeDirectory(files_, *r));
  if (auto* r = std::get_if<RemoveRequest>(&m))
    return ReplyStatus(r->request_id, RemovePath(files_, *r));
  if (auto* r = std::get_if<RenameRequest>(&m))
    return ReplyStatus(r->request_id, RenamePath(files_, *r));
  if (auto* r = std::get_if<StatsRequest>(&m)) {
    rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    return Send(StatsReply{r->request_id, static_cast<uint32_t>(execs_.size()), children_reaped_,
                           static_cast<uint64_t>(self.ru_maxrss) * 1024});
  }
  // Ready, replies and events only ever travel from init to the server.
  const uint64_t id = RequestIdOf(m);
  Error error = Error::Msg(std::string(MessageName(m)) + ": not a request");
  if (id != 0) return SendError(id, error);
  Log(error.message);
}

void ControlLoop::HandleFrame() {
  Result<Received> received = ReceiveMessage(fd_);
  if (received.ok()) return Dispatch(*received);
  const Error& error = received.error();
  if (error.err == 0 && error.message == "control channel closed") Shutdown(0);
  if (error.err == EAGAIN || error.err == EINTR) return;
  if (error.err != 0) {  // the socket itself failed
    Log(error.message);
    Shutdown(1);
  }
  Log("dropped a malformed frame: " + error.message);  // no trustworthy id to answer
}

void ControlLoop::ReapChildren() {
  for (;;) {
    int status = 0;
    rusage usage{};
    pid_t pid = ::wait4(-1, &status, WNOHANG, &usage);
    if (pid <= 0) return;  // 0: none left to reap now; -1/ECHILD: no children at all
    ++children_reaped_;
    auto it = execs_.find(pid);
    if (it == execs_.end()) continue;  // an orphan reparented to pid 1
    ExecExited exited;
    exited.request_id = it->second.request_id;
    exited.signaled = WIFSIGNALED(status) ? 1 : 0;
    exited.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    exited.signo = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    exited.user_cpu_us = usage.ru_utime.tv_sec * 1000000ull + usage.ru_utime.tv_usec;
    exited.system_cpu_us = usage.ru_stime.tv_sec * 1000000ull + usage.ru_stime.tv_usec;
    exited.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
    // A detached exec's output written before its exit is in the file before the exit is
    // reported, so a reader that saw the exit finds the output too.
    if (auto pump = pumps_.find(exited.request_id); pump != pumps_.end()) {
      if (!pump->second.Drain()) pumps_.erase(pump);
    }
    SendEvent(it->second.events.get(), exited);
    execs_.erase(it);  // closes the event socket: the exec's last event was sent
  }
}

void ControlLoop::Shutdown(int status) {
  // The server is gone: nothing in the cell may outlive its control. kill(-1) from pid 1
  // reaches every other process of the pid namespace; our own exit then ends the namespace.
  ::kill(-1, SIGKILL);
  _exit(status);
}

void ControlLoop::Run(int signal_fd) {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{fd_, POLLIN, 0}, {signal_fd, POLLIN, 0}});
    for (const auto& [id, pump] : pumps_) fds.push_back({pump.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Log(Error::Sys("poll").message);
      Shutdown(1);
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info[8];
      ssize_t ignored = ::read(signal_fd, info, sizeof(info));  // drained; waitpid finds them
      (void)ignored;
      ReapChildren();
    }
    if (fds.size() > 2) ServePumps({fds.begin() + 2, fds.end()});
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) HandleFrame();
  }
}

}  // namespace

void ServeControl(int control_fd, const InitContext& ctx) {
  // SIGCHLD arrives through a signalfd, so it must be blocked; children unblock it again.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, nullptr) != 0) {
    Log(Error::Sys("sigprocmask(SIGCHLD)").message);
    _exit(1);
  }
  int signal_fd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    Log(Error::Sys("signalfd(SIGCHLD)").message);
    _exit(1);
  }
  // A write to a closed pipe or past RLIMIT_FSIZE must be an error for init, not a signal.
  for (int sig : kInitIgnoredSignals) ::signal(sig, SIG_IGN);
  // File operations check permissions with fsuid/fsgid and the supplementary groups;
  // init's own groups must not count. Fails where setgroups is denied (desktop mode, where
  // init has no extra mapped groups anyway).
  ::setgroups(0, nullptr);
  int root_fd = ctx.root_fd;
  if (root_fd < 0) root_fd = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    Log(Error::Sys("open(\"/\")").message);
    _exit(1);
  }
  ControlLoop loop(control_fd, ctx, root_fd);
  loop.Run(signal_fd);
}

}  // namespace mcpcell::sandbox
