// CellChannel's execs: Exec (ExecAsync's path, run by the calling thread), ExecAsync's
// start (the exec's pipes and event socket, ExecRequest with the child's ends), the checks
// of frames on an exec's event socket, and detached execs. What happens once the request
// is out is cell_channel_exec_run.cc. See cell_channel.h.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "sandbox/cell_channel.h"
#include "sandbox/cell_channel_internal.h"
#include "sandbox/detached_exec.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::Clock;
using cell_channel_internal::FromReply;
using cell_channel_internal::ReportStart;
using control::Message;

constexpr auto kStartTimeout = std::chrono::seconds(30);  // DetachedExecRequest -> ExecStarted
constexpr auto kPollPeriod = std::chrono::milliseconds(100);

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

int MillisUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

}  // namespace

// ---- Exec ----

Result<ExecResult> CellChannel::Exec(const ExecOptions& options) {
  if (!options.detached_output.empty()) {
    if (options.argv.empty()) return Error::Msg("exec: argv is empty");
    if (!alive()) return DeathOr(Error::Msg("")).Wrap("exec");
    return StartDetached(options);
  }
  // The exec's steps on a context only this thread runs, here until `done`: the same path
  // as ExecAsync, and on_output still runs on the caller's thread. A context per call (an
  // epoll fd, an eventfd, a timerfd): one kept per thread would hold three fds for every
  // worker thread that ever ran an exec (the client-faults test saw them as a leak).
  boost::asio::io_context context(1);
  boost::asio::io_context* io = &context;
  std::optional<Result<ExecResult>> outcome;
  StartExec(std::make_shared<AsyncExec>(*io, ExecOptions{}, &options,
                                        [&](Result<ExecResult> r) { outcome = std::move(r); }));
  io->run();
  if (!outcome) return Error::Msg("exec: ended without a result");
  return std::move(*outcome);
}

CellChannel::ExecHandle CellChannel::ExecAsync(boost::asio::io_context& io, ExecOptions options,
                                               ExecCallback done) {
  return StartExec(std::make_shared<AsyncExec>(io, std::move(options), nullptr, std::move(done)));
}

CellChannel::ExecHandle CellChannel::StartExec(std::shared_ptr<AsyncExec> run) {
  const ExecOptions& options = run->options();
  ExecHandle handle;
  if (options.argv.empty()) {
    run->FailToStart(Error::Msg("exec: argv is empty"));
    return handle;
  }
  const std::string what = "exec \"" + options.argv[0] + "\"";
  if (!options.detached_output.empty()) {
    run->FailToStart(Error::Msg(what + ": a detached program is started by Exec, not ExecAsync"));
    return handle;
  }
  if (!alive()) {
    run->FailToStart(DeathOr(Error::Msg("")).Wrap("exec"));
    return handle;
  }
  std::optional<uint64_t> oom_before;
  if (options_.oom_kill_count) {
    if (auto n = options_.oom_kill_count(); n.ok()) oom_before = *n;
  }
  ExecPipes pipes;
  ExecPipes::ChildEnds child{{}, {options.stdin_fd, options.stdout_fd, options.stderr_fd, -1}};
  if (Status s = ExecPipes::Open(options, pipes, child); !s.ok()) {
    run->FailToStart(s.error());
    return handle;
  }
  const uint64_t id = NextId();
  std::weak_ptr<AsyncExec> weak = run;
  Register(
      id,
      [weak] {
        if (auto r = weak.lock()) r->Nudge();
      },
      [weak](const Error& e) {
        if (auto r = weak.lock()) r->Abort(e);
      });
  // Waits for room in the socket at most as long as init may take to start the program.
  Status sent =
      Send(control::ExecRequest{id, options.argv, options.env, options.cwd, ReportStart(options)},
           child.fds, Clock::now() + kStartTimeout);
  pipes.KeepOutputEnds(child);
  if (!sent.ok()) {
    Unregister(id);
    run->FailToStart(DeathOr(sent.error()).Wrap(what));
    return handle;
  }
  run->Begin(*this, id, std::move(pipes), oom_before);
  handle.run_ = run;
  handle.exec_id_ = id;
  return handle;
}

void CellChannel::ExecHandle::Cancel() const {
  if (auto run = run_.lock()) run->Cancel();
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

Result<CellChannel::ExecEvent> CellChannel::TakeExecEvent(int events_fd, uint64_t id, bool started,
                                                          bool report_start) {
  Result<control::Received> received = control::ReceiveMessage(events_fd);
  if (!received.ok()) {
    if (received.error().err == EINTR || received.error().err == EAGAIN) return ExecEvent{};
    if (dead_.load()) return DeathOr(Error::Msg(""));  // init died: the reader saw it
    Error e = received.error().err == 0 && received.error().message == "control channel closed"
                  ? Error::Msg(std::string("cell init closed the exec's event socket before ") +
                               (started ? "it reported the program's exit"
                                        : "it reported the program's start") +
                               " (init exited?)")
                  : received.error().Wrap(
                        "malformed frame from cell init on the exec's event "
                        "socket");
    Fail(e);  // init is gone or broken: the cell is unusable either way
    return Error{name_ + ": cell init is gone: " + e.message, e.err};
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
    return Error{name_ + ": cell init is gone: " + e.message, e.err};
  }
  if (auto* e = std::get_if<control::ErrorReply>(&m)) return FromReply(*e);
  if (auto* st = std::get_if<control::ExecStarted>(&m)) {
    return ExecEvent{ExecEvent::kStarted, st->pid, {}};
  }
  return ExecEvent{ExecEvent::kExited, 0, std::get<control::ExecExited>(m)};
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
  Status sent =
      Send(control::DetachedExecRequest{id, options.argv, options.env, options.cwd,
                                        options.detached_output, options.detached_output_cap},
           fds, Clock::now() + kStartTimeout);
  stdin_pipe->first.Reset();
  events->second.Reset();
  if (!sent.ok()) return DeathOr(sent.error()).Wrap(what);
  const auto deadline = Clock::now() + kStartTimeout;
  for (;;) {
    pollfd p{events->first.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, MillisUntil(std::min(deadline, Clock::now() + kPollPeriod)));
    if (ready < 0 && errno != EINTR) return Error::Sys("poll(exec events)").Wrap(what);
    if (ready > 0) break;
    if (Clock::now() >= deadline)
      return Error::Msg(what + ": cell init did not start the program within " +
                        std::to_string(kStartTimeout.count()) + " s");
    if (dead_.load()) return DeathOr(Error::Msg("")).Wrap(what);
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
