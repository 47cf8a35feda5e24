// CellChannel::Exec: makes the exec's pipes and event socket, sends ExecRequest with the
// child's ends, then pumps the exec on the calling thread (events, output, stdin, the
// timeout and stop requests) until the program has exited and its output is drained.
// See cell_channel.h.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "sandbox/cell_channel.h"
#include "sandbox/cell_channel_internal.h"
#include "sandbox/detached_exec.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::Clock;
using cell_channel_internal::FromReply;
using cell_channel_internal::ThreadWakeFd;
using control::Message;

constexpr auto kStartTimeout = std::chrono::seconds(30);  // ExecRequest -> ExecStarted
constexpr auto kKillGrace = std::chrono::seconds(10);     // SIGKILL -> ExecExited
constexpr auto kDrainIdle = std::chrono::milliseconds(100);
constexpr auto kDrainMax = std::chrono::seconds(2);
constexpr size_t kReadChunk = 64 * 1024;

// A pipe whose server end (the read end if `server_reads`, else the write end) is
// non-blocking; `blocking_server_end` leaves it blocking (a stdin with nothing to write,
// whose write end is closed at once). A new pipe end has no status flags, so F_SETFL needs
// no F_GETFL first.
Result<std::pair<UniqueFd, UniqueFd>> ServerPipe(bool server_reads, bool blocking_server_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Error::Sys("pipe2");
  UniqueFd r(p[0]), w(p[1]);
  int server = server_reads ? r.get() : w.get();
  if (!blocking_server_end && ::fcntl(server, F_SETFL, O_NONBLOCK) != 0)
    return Error::Sys("fcntl(O_NONBLOCK)");
  return std::make_pair(std::move(r), std::move(w));
}

// ExecStarted is asked for only when someone needs it: on_started, or the start timeout
// of an exec that has no timeout of its own. Otherwise init sends one event less and the
// exec's thread wakes once less.
bool ReportStart(const ExecOptions& options) {
  return options.on_started || options.timeout.count() == 0;
}

int MillisUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

// This round's poll set of an exec: the wake-up eventfd first, then whichever of the
// exec's fds are still open; an index is -1 for one that is not polled.
struct ExecPollSet {
  pollfd fds[5];
  int n = 0;
  int events = -1, out = -1, err = -1, in = -1;
  int Add(const UniqueFd& fd, short what) {
    if (!fd) return -1;
    fds[n] = {fd.get(), what, 0};
    return n++;
  }
  bool Ready(int index) const { return index >= 0 && fds[index].revents; }
};

// Reads what is there from one output pipe; false at EOF or error (then the fd is closed).
bool DrainOutput(UniqueFd& fd, OutputStream stream, const ExecOptions& options,
                 StreamCapture& capture) {
  char buffer[kReadChunk];
  for (int rounds = 0; rounds < 16; ++rounds) {  // bounded, so the other pipe gets its turn
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      fd.Reset();
      return false;
    }
    capture.total += static_cast<uint64_t>(n);
    if (capture.data.size() < options.keep_bytes) {
      capture.data.append(buffer, std::min<size_t>(n, options.keep_bytes - capture.data.size()));
    }
    if (options.on_output) options.on_output(stream, std::string_view(buffer, n));
  }
  return true;
}

// A write to a pipe whose reader is gone raises SIGPIPE at the writing thread, which kills
// a caller that has not ignored it (the server has; a test or another embedding program
// may not). So SIGPIPE is blocked on this thread around the writes, and one they raise is
// taken off the thread's pending set before the mask is restored: the write says EPIPE.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = ::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    if (raised_ && !was_pending_) {
      const timespec now{0, 0};
      while (::sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  void Raised() { raised_ = true; }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false, raised_ = false;
};

void FeedStdin(UniqueFd& fd, const std::string& data, size_t& offset) {
  SigpipeBlocked blocked;
  while (offset < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + offset, data.size() - offset);
    if (n < 0 && errno == EPIPE) blocked.Raised();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) break;  // EPIPE: the program closed its stdin; not an error of the exec
    offset += static_cast<size_t>(n);
  }
  fd.Reset();  // all written (or refused): the program sees EOF
}
}  // namespace

struct CellChannel::ExecPipes {
  UniqueFd stdin_write, stdout_read, stderr_read;  // the server's ends (capture mode)
  UniqueFd events;                                 // the server's end of the event socket
  // The server's own copies of the program's ends of the output pipes, closed once
  // ExecExited is read: until then the pipes cannot hang up, so the exec's thread wakes
  // once at the end of an exec (the exit; the hang-up is then there at once) rather than
  // once for each pipe's hang-up and again for the exit. Init closes its copies as soon as
  // the program has started.
  UniqueFd stdout_hold, stderr_hold;
  size_t stdin_offset = 0;

  // The child's ends, to go to init over SCM_RIGHTS: stdin, stdout, stderr, event socket.
  // A caller's own fd (passthrough mode) takes the place of a pipe: its `ends` entry stays
  // empty and `fds` holds the caller's fd.
  struct ChildEnds {
    UniqueFd ends[4];
    int fds[4];
  };
  // Makes the pipes the caller gave no fd for, and the event socket.
  static Status Open(const ExecOptions& options, ExecPipes& pipes, ChildEnds& child);
  // After ExecRequest went out: closes the child's stdin and event ends, keeps its output
  // ends as stdout_hold and stderr_hold.
  void KeepOutputEnds(ChildEnds& child);
};

// One exec in flight, as PumpExec's steps see it. Without ExecStarted (see ReportStart) the
// program counts as started when the request went out.
struct CellChannel::ExecRun {
  ExecRun(CellChannel& on, const ExecOptions& exec_options, ExecPipes& exec_pipes, Pending& entry,
          uint64_t exec_id, ExecResult& exec_result)
      : channel(on),
        options(exec_options),
        pipes(exec_pipes),
        pending(entry),
        id(exec_id),
        result(exec_result) {
    if (started && options.timeout.count() > 0) deadline = start + options.timeout;
  }

  CellChannel& channel;
  const ExecOptions& options;
  ExecPipes& pipes;
  Pending& pending;
  const uint64_t id;
  ExecResult& result;
  const bool report_start = ReportStart(options);
  const Clock::time_point sent_at = Clock::now();
  bool started = !report_start, exited = false;
  Clock::time_point start = sent_at, deadline = Clock::time_point::max();
  std::optional<Clock::time_point> killed_at, exited_at;

  // The exec's end when it is over (Ok) or has failed; nullopt to go on polling. Kills the
  // process group on the timeout or a stop request.
  std::optional<Status> CheckClock();
  ExecPollSet PollSet() const;
  int PollTimeoutMs() const;
  // Handles what poll found ready: the wake-up, an event from init, output, stdin.
  Status ServeReady(const ExecPollSet& set);

 private:
  void KillGroup(bool* flag);
  void OnStarted(pid_t pid);
  void OnExited(const control::ExecExited& e);
};

// ---- Exec ----

Result<ExecResult> CellChannel::Exec(const ExecOptions& options) {
  if (options.argv.empty()) return Error::Msg("exec: argv is empty");
  if (!alive()) {
    std::lock_guard lock(mu_);
    return death_->Wrap("exec");
  }
  if (!options.detached_output.empty()) return StartDetached(options);
  std::optional<uint64_t> oom_before;
  if (options_.oom_kill_count) {
    if (auto n = options_.oom_kill_count(); n.ok()) oom_before = *n;
  }
  ExecPipes pipes;
  ExecPipes::ChildEnds child{{}, {options.stdin_fd, options.stdout_fd, options.stderr_fd, -1}};
  if (Status s = ExecPipes::Open(options, pipes, child); !s.ok()) return s.error();
  if (ThreadWakeFd() < 0) return Error::Sys("exec: eventfd");
  const uint64_t id = NextId();
  auto pending = Register(id, true);  // so Close() and Fail() wake this thread
  Status sent = control::SendMessage(
      fd_.get(),
      control::ExecRequest{id, options.argv, options.env, options.cwd, ReportStart(options)},
      child.fds);
  pipes.KeepOutputEnds(child);
  if (!sent.ok()) {
    Unregister(id);
    std::lock_guard lock(mu_);
    return (death_ ? *death_ : sent.error()).Wrap("exec \"" + options.argv[0] + "\"");
  }
  ExecResult result;
  ExecRun run(*this, options, pipes, *pending, id, result);
  Status pumped = PumpExec(run);
  Unregister(id);
  if (!pumped.ok()) return pumped.error().Wrap("exec \"" + options.argv[0] + "\"");
  if (oom_before) {
    if (auto after = options_.oom_kill_count(); after.ok())
      result.oom_killed = *after > *oom_before;
  }
  return result;
}

// The child's ends go to init over SCM_RIGHTS. Stdin's and the event socket's close right
// after; the output ends are kept (stdout_hold) until ExecExited, so the server sees EOF on
// output once the program has been reaped and every other process of the exec has let go
// of it.
Status CellChannel::ExecPipes::Open(const ExecOptions& options, ExecPipes& pipes,
                                    ChildEnds& child) {
  for (int i = 0; i < 3; ++i) {
    if (child.fds[i] >= 0) continue;
    auto pipe = ServerPipe(/*server_reads=*/i != 0,
                           /*blocking_server_end=*/i == 0 && options.stdin_data.empty());
    if (!pipe.ok()) return pipe.error().Wrap("exec");
    if (i == 0) {
      child.ends[0] = std::move(pipe->first);
      if (!options.stdin_data.empty()) pipes.stdin_write = std::move(pipe->second);
    } else {
      child.ends[i] = std::move(pipe->second);
      (i == 1 ? pipes.stdout_read : pipes.stderr_read) = std::move(pipe->first);
    }
    child.fds[i] = child.ends[i].get();
  }
  auto events = control::CreateExecEventPair();
  if (!events.ok()) return events.error().Wrap("exec");
  pipes.events = std::move(events->first);
  child.ends[3] = std::move(events->second);
  child.fds[3] = child.ends[3].get();
  return Ok();
}

void CellChannel::ExecPipes::KeepOutputEnds(ChildEnds& child) {
  child.ends[0].Reset();
  child.ends[3].Reset();
  stdout_hold = std::move(child.ends[1]);  // empty when the caller gave its own fd
  stderr_hold = std::move(child.ends[2]);
}

// One frame from an exec's event socket, checked against what may come next.
struct CellChannel::ExecEvent {
  enum Kind { kNone, kStarted, kExited } kind = kNone;
  pid_t pid = 0;                 // kStarted
  control::ExecExited exited{};  // kExited
};

Result<CellChannel::ExecEvent> CellChannel::TakeExecEvent(int events_fd, uint64_t id, bool started,
                                                          bool report_start) {
  Result<control::Received> received = control::ReceiveMessage(events_fd);
  if (!received.ok()) {
    if (received.error().err == EINTR || received.error().err == EAGAIN) return ExecEvent{};
    {
      std::lock_guard lock(mu_);
      if (death_) return *death_;  // init died: the reader has seen the control socket close
    }
    Error e = received.error().err == 0 && received.error().message == "control channel closed"
                  ? Error::Msg(std::string("cell init closed the exec's event socket before ") +
                               (started ? "it reported the program's exit"
                                        : "it reported the program's start") +
                               " (init exited?)")
                  : received.error().Wrap(
                        "malformed frame from cell init on the exec's event "
                        "socket");
    Fail(e);  // init is gone or broken: the cell is unusable either way
    return Error{"cell init is gone: " + e.message, e.err};
  }
  Message& m = received->message;
  const uint64_t got = control::RequestIdOf(m);
  // With report_start the order is ExecStarted (or ErrorReply), then ExecExited; without,
  // ErrorReply or ExecExited alone.
  const bool is_error = std::holds_alternative<control::ErrorReply>(m);
  const bool expected =
      got == id && (!started       ? std::holds_alternative<control::ExecStarted>(m) || is_error
                    : report_start ? std::holds_alternative<control::ExecExited>(m)
                                   : std::holds_alternative<control::ExecExited>(m) || is_error);
  if (!expected) {
    Error e =
        Error::Msg(std::string("cell init sent ") + control::MessageName(m) + " for request " +
                   std::to_string(got) + " on the event socket of exec " + std::to_string(id) +
                   (!started       ? ""
                    : report_start ? " after ExecStarted"
                                   : " (the request asked for no ExecStarted)"));
    Fail(e);
    return Error{"cell init is gone: " + e.message, e.err};
  }
  if (auto* e = std::get_if<control::ErrorReply>(&m)) return FromReply(*e);
  if (auto* st = std::get_if<control::ExecStarted>(&m)) {
    return ExecEvent{ExecEvent::kStarted, st->pid, {}};
  }
  return ExecEvent{ExecEvent::kExited, 0, std::get<control::ExecExited>(m)};
}

Status CellChannel::PumpExec(ExecRun& run) {
  std::stop_callback on_stop(run.options.stop, [&] { run.pending.Wake(); });
  for (;;) {
    if (std::optional<Status> end = run.CheckClock()) return *end;
    ExecPollSet set = run.PollSet();
    int ready = ::poll(set.fds, set.n, run.PollTimeoutMs());
    if (ready < 0 && errno != EINTR) return Error::Sys("poll(exec pipes)");
    if (ready == 0 && run.exited) return Ok();  // output went quiet after the exit
    if (ready <= 0) continue;
    if (Status s = run.ServeReady(set); !s.ok()) return s;
  }
}

std::optional<Status> CellChannel::ExecRun::CheckClock() {
  if (exited && !pipes.stdout_read && !pipes.stderr_read) return Ok();
  const auto now = Clock::now();
  if (!started && now - sent_at > kStartTimeout) {
    return Status(Error::Msg("cell init did not start the program within " +
                             std::to_string(kStartTimeout.count()) + " s"));
  }
  if (started && !exited && now >= deadline) KillGroup(&result.timed_out);
  if (!exited && options.stop.stop_requested()) KillGroup(&result.cancelled);
  if (!exited && killed_at && now - *killed_at > kKillGrace) {
    return Status(Error::Msg("the process group did not exit within 10 s of SIGKILL"));
  }
  if (exited && now - *exited_at > kDrainMax) return Ok();  // a leftover keeps writing
  if (!exited && channel.dead_.load()) {
    std::lock_guard lock(channel.mu_);
    return Status(*channel.death_);  // closed by the server, or init gone
  }
  return std::nullopt;
}

void CellChannel::ExecRun::KillGroup(bool* flag) {
  *flag = true;
  if (killed_at) return;
  killed_at = Clock::now();
  // Init serves requests in order, so this finds the exec even when its ExecStarted is
  // still on the way. ESRCH: it ended (or never started) meanwhile, fine.
  Status s = channel.SignalExec(id, SIGKILL);
  (void)s;
}

ExecPollSet CellChannel::ExecRun::PollSet() const {
  ExecPollSet set;
  set.fds[set.n++] = {pending.event, POLLIN, 0};
  set.events = set.Add(pipes.events, POLLIN);
  set.out = set.Add(pipes.stdout_read, POLLIN);
  set.err = set.Add(pipes.stderr_read, POLLIN);
  set.in = set.Add(pipes.stdin_write, POLLOUT);
  return set;
}

int CellChannel::ExecRun::PollTimeoutMs() const {
  return exited                                 ? static_cast<int>(kDrainIdle.count())
         : killed_at                            ? 100
         : deadline == Clock::time_point::max() ? 1000
                                                : std::min(1000, MillisUntil(deadline));
}

Status CellChannel::ExecRun::ServeReady(const ExecPollSet& set) {
  if (set.fds[0].revents & POLLIN) {
    uint64_t counter;
    ssize_t ignored = ::read(pending.event, &counter, sizeof(counter));
    (void)ignored;
  }
  if (set.Ready(set.events)) {
    Result<ExecEvent> event = channel.TakeExecEvent(pipes.events.get(), id, started, report_start);
    if (!event.ok()) return event.error();
    if (event->kind == ExecEvent::kStarted) OnStarted(event->pid);
    if (event->kind == ExecEvent::kExited) OnExited(event->exited);
  }
  if (set.Ready(set.out))
    DrainOutput(pipes.stdout_read, OutputStream::kStdout, options, result.out);
  if (set.Ready(set.err))
    DrainOutput(pipes.stderr_read, OutputStream::kStderr, options, result.err);
  if (set.Ready(set.in)) FeedStdin(pipes.stdin_write, options.stdin_data, pipes.stdin_offset);
  return Ok();
}

void CellChannel::ExecRun::OnStarted(pid_t pid) {
  started = true;
  start = Clock::now();
  if (options.timeout.count() > 0) deadline = start + options.timeout;
  if (options.on_started) options.on_started(id, pid);
}

void CellChannel::ExecRun::OnExited(const control::ExecExited& e) {
  exited = true;
  exited_at = Clock::now();
  result.signaled = e.signaled != 0;
  result.exit_code = e.exit_code;
  result.signo = e.signo;
  result.user_cpu = std::chrono::microseconds(e.user_cpu_us);
  result.system_cpu = std::chrono::microseconds(e.system_cpu_us);
  result.peak_memory_bytes = e.max_rss_bytes;
  result.wall_time = std::chrono::duration_cast<std::chrono::microseconds>(*exited_at - start);
  pipes.events.Reset();  // init sends nothing after ExecExited
  pipes.stdout_hold.Reset();
  pipes.stderr_hold.Reset();
}

// ---- Detached exec ----

// The program's stdin is a pipe whose write end the handle keeps (non-blocking, so a full
// pipe never blocks a tool call); init gets the read end and the exec's event socket. The
// output pipe is init's own (it copies it into the file), so nothing of it is here.
Result<ExecResult> CellChannel::StartDetached(const ExecOptions& options) {
  const std::string what = "background exec \"" + options.argv[0] + "\"";
  auto stdin_pipe = ServerPipe(/*server_reads=*/false, /*blocking_server_end=*/false);
  if (!stdin_pipe.ok()) return stdin_pipe.error().Wrap(what);
  auto events = control::CreateExecEventPair();
  if (!events.ok()) return events.error().Wrap(what);
  const uint64_t id = NextId();
  const int fds[2] = {stdin_pipe->first.get(), events->second.get()};
  Status sent = control::SendMessage(
      fd_.get(),
      control::DetachedExecRequest{id, options.argv, options.env, options.cwd,
                                   options.detached_output, options.detached_output_cap},
      fds);
  stdin_pipe->first.Reset();
  events->second.Reset();
  if (!sent.ok()) {
    std::lock_guard lock(mu_);
    return (death_ ? *death_ : sent.error()).Wrap(what);
  }
  const auto deadline = Clock::now() + kStartTimeout;
  for (;;) {
    pollfd p{events->first.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, MillisUntil(std::min(deadline, Clock::now() + kDrainIdle)));
    if (ready < 0 && errno != EINTR) return Error::Sys("poll(exec events)").Wrap(what);
    if (ready > 0) break;
    if (Clock::now() >= deadline)
      return Error::Msg(what + ": cell init did not start the program within " +
                        std::to_string(kStartTimeout.count()) + " s");
    if (dead_.load()) {
      std::lock_guard lock(mu_);
      return death_->Wrap(what);
    }
  }
  Result<ExecEvent> event = TakeExecEvent(events->first.get(), id, /*started=*/false,
                                          /*report_start=*/true);
  if (!event.ok()) return event.error().Wrap(what);
  if (options.on_started) options.on_started(id, event->pid);
  ExecResult result;
  result.detached = std::make_shared<DetachedExec>(id, event->pid, std::move(events->first),
                                                   std::move(stdin_pipe->second));
  return result;
}

}  // namespace mcpcell::sandbox
