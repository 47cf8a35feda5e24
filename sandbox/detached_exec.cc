#include "sandbox/detached_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "sandbox/control/protocol.h"

namespace mcpcell::sandbox {
namespace {
using Clock = std::chrono::steady_clock;
// Poll sleeps in slices this long so a stop request is seen without a wake-up fd.
constexpr auto kStopCheck = std::chrono::milliseconds(50);
}  // namespace

DetachedExec::DetachedExec(uint64_t exec_id, pid_t pid, UniqueFd events, UniqueFd stdin_write)
    : exec_id_(exec_id),
      pid_(pid),
      started_(Clock::now()),
      events_(std::move(events)),
      stdin_write_(std::move(stdin_write)) {}

void DetachedExec::TakeEventLocked() {
  if (exited_ || lost_ || !events_) return;
  pollfd p{events_.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  Result<control::Received> received = control::ReceiveMessage(events_.get());
  if (!received.ok()) {
    lost_ = received.error().err == 0
                ? Error::Msg(
                      "the cell ended before the program's exit was reported (session "
                      "closed, cell hibernated, restored or replaced)")
                : received.error().Wrap("the exec's event socket");
    events_.Reset();
    return;
  }
  auto* e = std::get_if<control::ExecExited>(&received->message);
  if (!e || e->request_id != exec_id_) {
    lost_ = Error::Msg(std::string("cell init sent ") + control::MessageName(received->message) +
                       " on the event socket of background exec " + std::to_string(exec_id_));
    events_.Reset();
    return;
  }
  ExecResult r;
  r.signaled = e->signaled != 0;
  r.exit_code = e->exit_code;
  r.signo = e->signo;
  r.user_cpu = std::chrono::microseconds(e->user_cpu_us);
  r.system_cpu = std::chrono::microseconds(e->system_cpu_us);
  r.peak_memory_bytes = e->max_rss_bytes;
  r.wall_time = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_);
  exited_ = std::move(r);
  events_.Reset();  // init sends nothing after ExecExited
}

Result<std::optional<ExecResult>> DetachedExec::Poll(std::chrono::milliseconds wait,
                                                     const std::stop_token& stop) {
  const auto deadline = Clock::now() + wait;
  for (;;) {
    int fd = -1;
    {
      std::lock_guard lock(mu_);
      TakeEventLocked();
      if (exited_) return std::optional<ExecResult>(*exited_);
      if (lost_) return *lost_;
      fd = events_.get();
    }
    const auto now = Clock::now();
    if (now >= deadline || stop.stop_requested()) return std::optional<ExecResult>();
    auto slice = std::min<Clock::duration>(deadline - now, kStopCheck);
    int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    // The fd may be closed by another thread's TakeEventLocked meanwhile: poll then reports
    // POLLNVAL (or a reused fd wakes early); either way the next round looks under mu_.
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) < 0 && errno != EINTR) return Error::Sys("poll(background exec)");
  }
}

Result<size_t> DetachedExec::WriteStdin(std::string_view data) {
  std::lock_guard lock(mu_);
  if (!stdin_write_) return Error{"stdin is closed", EBADF};
  // The server ignores SIGPIPE (as the exec pump assumes too); a closed reader is EPIPE.
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(stdin_write_.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return Error::Sys("write(stdin)");
    done += static_cast<size_t>(n);
  }
  return done;
}

void DetachedExec::CloseStdin() {
  std::lock_guard lock(mu_);
  stdin_write_.Reset();
}

bool DetachedExec::stdin_open() const {
  std::lock_guard lock(mu_);
  return static_cast<bool>(stdin_write_);
}

}  // namespace mcpcell::sandbox
