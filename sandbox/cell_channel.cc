// CellChannel's connection: the control socket, its reader on the io_context, and
// request/reply (Call) with waiting callers. File requests are cell_channel_files.cc, Exec
// cell_channel_exec.cc. See cell_channel.h.
#include "sandbox/cell_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "sandbox/cell_channel_internal.h"
#include "sandbox/cell_reactor.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::As;
using cell_channel_internal::Clock;
using control::Message;

constexpr auto kCallTimeout = std::chrono::seconds(60);  // a file op or signal
// An exec's SIGKILL is sent from the exec's step, which must not block long: a control
// socket full for this long means init is not reading it.
constexpr auto kSignalSendTimeout = std::chrono::seconds(1);
// Frames read per turn of the reader, so one chatty cell does not starve the others on
// the same reactor; the wait is re-armed and fires again at once if more is there.
constexpr int kFramesPerTurn = 64;

int MillisUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

// Messages init may send once it is Ready; anything else is a protocol violation.
bool IsReplyOrEvent(const Message& m) {
  return std::holds_alternative<control::ErrorReply>(m) ||
         std::holds_alternative<control::OkReply>(m) ||
         std::holds_alternative<control::ExecStarted>(m) ||
         std::holds_alternative<control::ExecExited>(m) ||
         std::holds_alternative<control::ReadFileReply>(m) ||
         std::holds_alternative<control::StatReply>(m) ||
         std::holds_alternative<control::ListDirReply>(m) ||
         std::holds_alternative<control::StatsReply>(m);
}

}  // namespace

// The control socket's wait on the io_context. It outlives the channel as long as a
// handler holds it: `channel` is null once the destructor has run, and `mu` makes the
// destructor wait for a handler running on another thread. `handling` is the thread
// inside a handler, so a destructor called from that handler (on_closed destroying the
// cell) knows it already holds `mu`. `descriptor` is Asio's handle of the socket; it does
// not own the fd (the channel's fd_ does) and is touched only under `mu`.
struct CellChannel::ControlReader {
  std::mutex mu;
  CellChannel* channel = nullptr;
  std::atomic<std::thread::id> handling{};
  std::optional<boost::asio::posix::stream_descriptor> descriptor;
};

CellChannel::CellChannel(UniqueFd control_fd, Options options)
    : fd_(std::move(control_fd)),
      options_(std::move(options)),
      name_(options_.name.empty() ? "cell" : options_.name),
      io_(options_.io != nullptr ? *options_.io : CellReactor::Default().context()),
      reader_(std::make_shared<ControlReader>()) {
  // Non-blocking for good: Asio makes a descriptor it waits on non-blocking anyway, and
  // the reader drains frames until EAGAIN. Senders wait for room themselves (Send).
  std::lock_guard lock(reader_->mu);
  reader_->channel = this;
  boost::system::error_code ec;
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    death_ = Error::Sys(name_ + ": fcntl(control socket, O_NONBLOCK)");
  } else if (reader_->descriptor.emplace(io_).assign(fd_.get(), ec); ec) {
    // No memory, or epoll's limit of watches: the cell cannot be served.
    reader_->descriptor.reset();
    death_ = Error{name_ + ": epoll_ctl(ADD, control socket): " + ec.message(), ec.value()};
  }
  if (death_) {
    dead_ = true;
    return;
  }
  WaitForControl(reader_);
}

CellChannel::~CellChannel() {
  Close();
  // Close nudged every exec in flight, but their steps run on io_contexts this thread may
  // not be running (or that are busy): end them here, so none touches the channel after
  // the destructor. Taken out of pending_ first: Abort takes the exec's lock, and an exec's
  // step takes mu_ under it.
  std::vector<std::function<void(const Error&)>> aborts;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, p] : pending_) {
      if (p->is_exec()) aborts.push_back(p->abort);
    }
  }
  const Error gone = Error::Msg(name_ + ": cell channel destroyed (the cell is gone)");
  for (auto& abort : aborts) abort(gone);
  // Stop waiting on the socket before fd_ closes (release() takes it out of epoll and
  // completes the wait as aborted). From on_closed, the handler that called it holds the
  // lock and returns without touching the channel.
  std::unique_lock lock(reader_->mu, std::defer_lock);
  if (reader_->handling.load() != std::this_thread::get_id()) lock.lock();
  reader_->channel = nullptr;
  if (reader_->descriptor) {
    reader_->descriptor->release();
    reader_->descriptor.reset();
  }
}

void CellChannel::Close() {
  // The death is recorded before the shutdown wakes the reader, so pending calls see this
  // reason, not the reader's "control channel closed". shutdown() makes the socket read
  // EOF, which ends the reader; the fd itself stays valid until the destructor, so no
  // other thread can see it reused.
  {
    std::lock_guard lock(mu_);
    if (!death_) {
      death_ = Error::Msg(name_ + ": cell channel closed by the server");
      dead_ = true;
      for (auto& [id, p] : pending_) p->Wake();
    }
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void CellChannel::Fail(const Error& error) {
  Error death;
  {
    std::lock_guard lock(mu_);
    if (death_) return;
    death_ = death = Error{name_ + ": cell init is gone: " + error.message, error.err};
    dead_ = true;
    for (auto& [id, p] : pending_) p->Wake();
  }
  // Copies: on_closed may destroy the channel, and with it death_ and options_.
  if (std::function<void(const Error&)> on_closed = options_.on_closed) on_closed(death);
}

// Readiness, then non-blocking receives: the frame (with any fds) is read by
// control::ReceiveMessage on this thread's buffer, so a waiting cell holds no buffer.
void CellChannel::WaitForControl(const std::shared_ptr<ControlReader>& reader) {
  reader->descriptor->async_wait(
      boost::asio::posix::stream_descriptor::wait_read,
      [reader](const boost::system::error_code& ec) {
        std::unique_lock lock(reader->mu);
        if (reader->channel == nullptr || ec == boost::asio::error::operation_aborted) return;
        CellChannel* channel = reader->channel;
        reader->handling = std::this_thread::get_id();
        std::optional<Error> death =
            ec ? Error{"wait on the control socket: " + ec.message(), ec.value()}
               : channel->ReadControl();
        if (death) {
          // The last use of `channel`: on_closed may destroy it.
          channel->Fail(*death);
        } else {
          WaitForControl(reader);
        }
        reader->handling = std::thread::id();
      });
}

std::optional<Error> CellChannel::ReadControl() {
  for (int frames = 0; frames < kFramesPerTurn; ++frames) {
    Result<control::Received> received = control::ReceiveMessage(fd_.get());
    if (!received.ok()) {
      if (received.error().err == EINTR) continue;
      if (received.error().err == EAGAIN) return std::nullopt;
      if (received.error().err == 0 && received.error().message == "control channel closed") {
        return Error::Msg("control channel closed (cell init exited)");
      }
      // Init died with requests unread in its socket: the same death, not a bad frame.
      if (received.error().err == ECONNRESET) {
        return Error{"control channel closed (cell init exited with requests unread)", ECONNRESET};
      }
      return received.error().Wrap("malformed frame from cell init");
    }
    const Message& m = received->message;
    if (!IsReplyOrEvent(m)) {
      return Error::Msg(std::string("cell init sent ") + control::MessageName(m) + " after Ready");
    }
    const uint64_t id = control::RequestIdOf(m);
    if (id == 0 || id >= next_id_.load()) {
      return Error::Msg(std::string(control::MessageName(m)) + " for request id " +
                        std::to_string(id) + " that was never sent");
    }
    std::lock_guard lock(mu_);
    auto it = pending_.find(id);
    // A late answer to a call that gave up waiting, or to an exec's SignalRequest.
    if (it == pending_.end()) continue;
    if (it->second->is_exec()) {
      return Error::Msg(std::string(control::MessageName(m)) + " for exec " + std::to_string(id) +
                        " on the control socket (an exec's events go to its own socket)");
    }
    it->second->inbox.push_back(std::move(received->message));
    it->second->Wake();
  }
  return std::nullopt;
}

std::shared_ptr<CellChannel::Pending> CellChannel::Register(
    uint64_t id, std::function<void()> nudge, std::function<void(const Error&)> abort) {
  auto p = std::make_shared<Pending>();
  p->nudge = std::move(nudge);
  p->abort = std::move(abort);
  std::lock_guard lock(mu_);
  pending_[id] = p;
  return p;
}

void CellChannel::Unregister(uint64_t id) {
  std::lock_guard lock(mu_);
  pending_.erase(id);
}

Result<Message> CellChannel::Wait(const std::shared_ptr<Pending>& p, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  p->cv.wait_until(lock, deadline, [&] { return !p->inbox.empty() || death_.has_value(); });
  if (!p->inbox.empty()) {
    Message m = std::move(p->inbox.front());
    p->inbox.pop_front();
    return m;
  }
  if (death_) return *death_;
  return Error::Msg(name_ + ": cell init did not answer in time");
}

Result<Message> CellChannel::Call(const Message& request, std::span<const int> fds) {
  {
    std::lock_guard lock(mu_);
    if (death_) return death_->Wrap(control::MessageName(request));  // fail fast, send nothing
  }
  if (io_.get_executor().running_in_this_thread()) {
    // From on_closed or another handler on the same context: the reply would be read by
    // this very thread, which would be waiting for it.
    return Error::Msg(name_ + ": " + control::MessageName(request) +
                      " waits for its reply, which this thread (the control socket's reader) "
                      "would have to read");
  }
  const uint64_t id = control::RequestIdOf(request);
  auto p = Register(id);
  const Clock::time_point deadline = Clock::now() + kCallTimeout;
  Result<Message> reply = Error::Msg("");
  if (Status s = Send(request, fds, deadline); !s.ok()) {
    std::lock_guard lock(mu_);
    reply = death_ ? *death_ : s.error().Wrap(name_);
  } else {
    reply = Wait(p, deadline);
  }
  Unregister(id);
  if (!reply.ok()) return reply.error().Wrap(control::MessageName(request));
  return reply;
}

Error CellChannel::DeathOr(const Error& otherwise) {
  std::lock_guard lock(mu_);
  return death_ ? *death_ : otherwise;
}

void CellChannel::SendSignal(uint64_t exec_id, int signo) {
  // ESRCH (the exec ended, or never started, meanwhile) or a dead channel: nothing to do,
  // the exec's own steps see its end or the death.
  Status s =
      Send(control::SignalRequest{NextId(), exec_id, signo}, {}, Clock::now() + kSignalSendTimeout);
  (void)s;
}

Status CellChannel::Send(const Message& message, std::span<const int> fds,
                         Clock::time_point deadline) {
  for (;;) {
    Status s = control::SendMessage(fd_.get(), message, fds);
    if (s.ok() || s.error().err != EAGAIN) return s;
    const int wait_ms = MillisUntil(deadline);
    if (wait_ms == 0) {
      return Error{std::string("send ") + control::MessageName(message) +
                       ": the control socket stayed full (cell init is not reading it)",
                   EAGAIN};
    }
    pollfd p{fd_.get(), POLLOUT, 0};
    if (::poll(&p, 1, wait_ms) < 0 && errno != EINTR) {
      return Error::Sys("poll(control socket, POLLOUT)");
    }
  }
}

Status CellChannel::ExpectOk(const Message& request) {
  Result<control::OkReply> ok = As<control::OkReply>(Call(request), control::MessageName(request));
  if (!ok.ok()) return ok.error();
  return Ok();
}

}  // namespace mcpcell::sandbox
