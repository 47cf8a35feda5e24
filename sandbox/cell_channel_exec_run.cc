// An exec in flight (CellChannel::AsyncExec, cell_channel_internal.h): its steps on the
// io_context. ExecStarted and ExecExited come from its event socket, output is drained as
// it comes, stdin is fed as the pipe takes it, and one timer serves its clock (the start
// timeout, the exec's own timeout, the kill's grace, the drain after the exit). No step
// blocks: a kill is a SignalRequest whose answer nobody waits for. See cell_channel.h.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "sandbox/cell_channel.h"
#include "sandbox/cell_channel_internal.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::Clock;
using cell_channel_internal::ReportStart;

constexpr auto kStartTimeout = std::chrono::seconds(30);  // ExecRequest -> ExecStarted
constexpr auto kKillGrace = std::chrono::seconds(10);     // SIGKILL -> ExecExited
constexpr auto kDrainIdle = std::chrono::milliseconds(100);
constexpr auto kDrainMax = std::chrono::seconds(2);
constexpr size_t kReadChunk = 64 * 1024;

// Reads what is there from one output pipe; false at EOF or error (then it is closed).
bool DrainOutput(int fd, OutputStream stream, const ExecOptions& options, StreamCapture& capture) {
  char buffer[kReadChunk];
  for (int rounds = 0; rounds < 16; ++rounds) {  // bounded, so the other pipe gets its turn
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
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

// Writes what the pipe takes; true when all is written or refused (then the program gets
// EOF once the fd is closed), false to wait until it takes more.
bool FeedStdin(int fd, const std::string& data, size_t& offset) {
  SigpipeBlocked blocked;
  while (offset < data.size()) {
    ssize_t n = ::write(fd, data.data() + offset, data.size() - offset);
    if (n < 0 && errno == EPIPE) blocked.Raised();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    if (n < 0) break;  // EPIPE: the program closed its stdin; not an error of the exec
    offset += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

CellChannel::AsyncExec::AsyncExec(boost::asio::io_context& io, ExecOptions owned,
                                  const ExecOptions* external, ExecCallback done)
    : io_(io), owned_(std::move(owned)), external_(external), done_(std::move(done)), timer_(io) {}

void CellChannel::AsyncExec::Begin(CellChannel& channel, uint64_t id, ExecPipes pipes,
                                   std::optional<uint64_t> oom_before) {
  Lock lock(mu_);
  channel_ = &channel;
  id_ = id;
  oom_before_ = oom_before;
  begun_ = true;
  const ExecOptions& o = options();
  report_start_ = ReportStart(o);
  started_ = !report_start_;
  sent_at_ = start_ = last_activity_ = Clock::now();
  if (started_ && o.timeout.count() > 0) deadline_ = start_ + o.timeout;
  stdout_hold_ = std::move(pipes.stdout_hold);
  stderr_hold_ = std::move(pipes.stderr_hold);
  // Each fd the server reads or writes goes to the reactor (epoll); failing that (no
  // memory, the fd limit of epoll) the exec fails and its process group is killed.
  boost::system::error_code ec;
  const char* failed = nullptr;
  auto adopt = [&](std::optional<Descriptor>& d, UniqueFd& fd, const char* name) {
    if (!fd || failed) return;
    d.emplace(io_);
    if (d->assign(fd.get(), ec); ec) {
      d.reset();
      failed = name;
      return;
    }
    fd.Release();
  };
  adopt(events_, pipes.events, "event socket");
  adopt(stdout_, pipes.stdout_read, "stdout pipe");
  adopt(stderr_, pipes.stderr_read, "stderr pipe");
  adopt(stdin_, pipes.stdin_write, "stdin pipe");
  if (failed) {
    KillGroup(&result_.cancelled);
    return Finish(Error{std::string("epoll_ctl(ADD, the exec's ") + failed + "): " + ec.message(),
                        ec.value()});
  }
  if (o.stop.stop_possible()) {
    std::weak_ptr<AsyncExec> weak = weak_from_this();
    on_stop_.emplace(o.stop, std::function<void()>([weak] {
                       if (auto run = weak.lock()) run->Nudge();
                     }));
  }
  for (Wait w : {Wait::kEvents, Wait::kStdout, Wait::kStderr, Wait::kStdin}) {
    if (DescriptorOf(w)) WaitFor(w);
  }
  Settle();
}

void CellChannel::AsyncExec::FailToStart(const Error& error) {
  Lock lock(mu_);
  finished_ = true;
  boost::asio::post(io_, [done = std::move(done_), error]() { done(error); });
}

void CellChannel::AsyncExec::Nudge() {
  boost::asio::post(io_, [self = shared_from_this()] {
    Lock lock(self->mu_);
    if (self->begun_ && !self->finished_) self->Settle();
  });
}

void CellChannel::AsyncExec::Cancel() {
  cancel_ = true;
  Nudge();
}

void CellChannel::AsyncExec::Abort(const Error& error) {
  Lock lock(mu_);
  if (!finished_) Finish(error);
}

CellChannel::AsyncExec::Descriptor* CellChannel::AsyncExec::DescriptorOf(Wait which) {
  std::optional<Descriptor>& d = which == Wait::kEvents   ? events_
                                 : which == Wait::kStdout ? stdout_
                                 : which == Wait::kStderr ? stderr_
                                                          : stdin_;
  return d ? &*d : nullptr;
}

// Readiness, not reads: the step reads with its own stack buffer (DrainOutput), so an exec
// waiting for output holds no buffer, and a frame with fds is received by TakeExecEvent.
void CellChannel::AsyncExec::WaitFor(Wait which) {
  DescriptorOf(which)->async_wait(
      which == Wait::kStdin ? Descriptor::wait_write : Descriptor::wait_read,
      [self = shared_from_this(), which](const boost::system::error_code& ec) {
        self->OnReady(which, ec);
      });
}

void CellChannel::AsyncExec::OnReady(Wait which, const boost::system::error_code& ec) {
  Lock lock(mu_);
  // Aborted: the fd was closed (the exec's end, ExecExited, EOF). Any other error is left
  // to the read or receive, which reports it.
  if (finished_ || ec == boost::asio::error::operation_aborted || !DescriptorOf(which)) return;
  if (Status s = Serve(which); !s.ok()) return Finish(s);
  if (finished_) return;
  if (DescriptorOf(which)) WaitFor(which);
  Settle();
}

Status CellChannel::AsyncExec::Serve(Wait which) {
  last_activity_ = Clock::now();
  switch (which) {
    case Wait::kEvents: {
      Result<ExecEvent> event =
          channel_->TakeExecEvent(events_->native_handle(), id_, started_, report_start_);
      if (!event.ok()) return event.error();
      if (event->kind == ExecEvent::kStarted) OnStarted(event->pid);
      if (event->kind == ExecEvent::kExited) OnExited(event->exited);
      return Ok();
    }
    case Wait::kStdout:
    case Wait::kStderr: {
      const bool out = which == Wait::kStdout;
      std::optional<Descriptor>& d = out ? stdout_ : stderr_;
      if (!DrainOutput(d->native_handle(), out ? OutputStream::kStdout : OutputStream::kStderr,
                       options(), out ? result_.out : result_.err)) {
        d.reset();
      }
      return Ok();
    }
    case Wait::kStdin:
      if (FeedStdin(stdin_->native_handle(), options().stdin_data, stdin_offset_)) stdin_.reset();
      return Ok();
  }
  return Ok();
}

void CellChannel::AsyncExec::Settle() {
  if (std::optional<Status> end = CheckClock()) return Finish(*end);
  ArmTimer();
}

std::optional<Status> CellChannel::AsyncExec::CheckClock() {
  if (exited_ && !stdout_ && !stderr_) return Ok();
  const auto now = Clock::now();
  if (!started_ && now - sent_at_ >= kStartTimeout) {
    return Status(Error::Msg("cell init did not start the program within " +
                             std::to_string(kStartTimeout.count()) + " s"));
  }
  if (started_ && !exited_ && now >= deadline_) KillGroup(&result_.timed_out);
  if (!exited_ && (cancel_.load() || options().stop.stop_requested())) {
    KillGroup(&result_.cancelled);
  }
  if (!exited_ && killed_at_ && now - *killed_at_ >= kKillGrace) {
    return Status(Error::Msg("the process group did not exit within 10 s of SIGKILL"));
  }
  if (exited_ && now - *exited_at_ >= kDrainMax) return Ok();      // a leftover keeps writing
  if (exited_ && now - last_activity_ >= kDrainIdle) return Ok();  // output went quiet
  if (!exited_ && channel_->dead_.load()) {
    return Status(channel_->DeathOr(Error::Msg("")));  // closed by the server, or init gone
  }
  return std::nullopt;
}

Clock::time_point CellChannel::AsyncExec::NextCheck() const {
  Clock::time_point t = Clock::time_point::max();
  if (!started_) t = std::min(t, sent_at_ + kStartTimeout);
  if (started_ && !exited_ && !killed_at_) t = std::min(t, deadline_);
  if (killed_at_ && !exited_) t = std::min(t, *killed_at_ + kKillGrace);
  if (exited_) t = std::min({t, *exited_at_ + kDrainMax, last_activity_ + kDrainIdle});
  return t;
}

// One timer per exec, moved only earlier: a check that comes too early (the drain's idle
// point moved on with new output) just arms it again.
void CellChannel::AsyncExec::ArmTimer() {
  const Clock::time_point t = NextCheck();
  if (t == Clock::time_point::max() || t >= armed_) return;
  armed_ = t;
  timer_.expires_at(t);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    Lock lock(self->mu_);
    if (ec == boost::asio::error::operation_aborted || self->finished_) return;
    self->armed_ = Clock::time_point::max();
    self->Settle();
  });
}

void CellChannel::AsyncExec::KillGroup(bool* flag) {
  *flag = true;
  if (killed_at_) return;
  killed_at_ = Clock::now();
  // Init serves requests in order, so this finds the exec even when its ExecStarted is
  // still on the way. ESRCH: it ended (or never started) meanwhile, fine.
  channel_->SendSignal(id_, SIGKILL);
}

void CellChannel::AsyncExec::OnStarted(pid_t pid) {
  started_ = true;
  start_ = Clock::now();
  if (options().timeout.count() > 0) deadline_ = start_ + options().timeout;
  if (options().on_started) options().on_started(id_, pid);
}

void CellChannel::AsyncExec::OnExited(const control::ExecExited& e) {
  exited_ = true;
  exited_at_ = Clock::now();
  result_.signaled = e.signaled != 0;
  result_.exit_code = e.exit_code;
  result_.signo = e.signo;
  result_.user_cpu = std::chrono::microseconds(e.user_cpu_us);
  result_.system_cpu = std::chrono::microseconds(e.system_cpu_us);
  result_.peak_memory_bytes = e.max_rss_bytes;
  result_.wall_time = std::chrono::duration_cast<std::chrono::microseconds>(*exited_at_ - start_);
  events_.reset();  // init sends nothing after ExecExited
  stdout_hold_.Reset();
  stderr_hold_.Reset();
}

void CellChannel::AsyncExec::Finish(const Status& end) {
  finished_ = true;
  // Closing a descriptor completes its pending wait as aborted; those steps see finished_.
  events_.reset();
  stdout_.reset();
  stderr_.reset();
  stdin_.reset();
  stdout_hold_.Reset();
  stderr_hold_.Reset();
  timer_.cancel();
  on_stop_.reset();  // waits for a stop callback running now (it only posts)
  if (channel_) {
    channel_->Unregister(id_);
    if (end.ok() && oom_before_ && channel_->options_.oom_kill_count) {
      if (auto after = channel_->options_.oom_kill_count(); after.ok())
        result_.oom_killed = *after > *oom_before_;
    }
    channel_ = nullptr;
  }
  Result<ExecResult> outcome =
      end.ok() ? Result<ExecResult>(std::move(result_))
               : Result<ExecResult>(end.error().Wrap("exec \"" + options().argv[0] + "\""));
  boost::asio::post(io_, [done = std::move(done_), outcome = std::move(outcome)]() mutable {
    done(std::move(outcome));
  });
}

}  // namespace mcpcell::sandbox
