// CellChannel's connection: the control socket, its reader thread, and request/reply
// (Call) with waiting callers. File requests are cell_channel_files.cc, Exec
// cell_channel_exec.cc. See cell_channel.h.
#include "sandbox/cell_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/cell_channel_internal.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::As;
using cell_channel_internal::Clock;
using control::Message;

constexpr auto kCallTimeout = std::chrono::seconds(60);  // a file op or signal

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

CellChannel::CellChannel(UniqueFd control_fd, Options options)
    : fd_(std::move(control_fd)), options_(std::move(options)) {
  reader_ = std::thread([this] { ReaderLoop(); });
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
  const Error gone = Error::Msg("cell channel destroyed (the cell is gone)");
  for (auto& abort : aborts) abort(gone);
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();  // destroyed from on_closed: the loop has already returned
    } else {
      reader_.join();
    }
  }
}

void CellChannel::Close() {
  // The death is recorded before the shutdown wakes the reader, so pending calls see this
  // reason, not the reader's "control channel closed". shutdown() wakes the reader blocked
  // in recvmsg; the fd itself stays valid until the destructor, so no other thread can
  // see it reused.
  {
    std::lock_guard lock(mu_);
    if (!death_) {
      death_ = Error::Msg("cell channel closed by the server");
      dead_ = true;
      for (auto& [id, p] : pending_) p->Wake();
    }
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void CellChannel::Fail(const Error& error) {
  {
    std::lock_guard lock(mu_);
    if (death_) return;
    death_ = Error{"cell init is gone: " + error.message, error.err};
    dead_ = true;
    for (auto& [id, p] : pending_) p->Wake();
  }
  if (options_.on_closed) options_.on_closed(*death_);
}

void CellChannel::ReaderLoop() {
  for (;;) {
    Result<control::Received> received = control::ReceiveMessage(fd_.get());
    if (!received.ok()) {
      if (received.error().err == EINTR) continue;
      return Fail(received.error().err == 0 && received.error().message == "control channel closed"
                      ? Error::Msg("control channel closed (cell init exited)")
                      : received.error().Wrap("malformed frame from cell init"));
    }
    const Message& m = received->message;
    if (!IsReplyOrEvent(m)) {
      return Fail(
          Error::Msg(std::string("cell init sent ") + control::MessageName(m) + " after Ready"));
    }
    const uint64_t id = control::RequestIdOf(m);
    if (id == 0 || id >= next_id_.load()) {
      return Fail(Error::Msg(std::string(control::MessageName(m)) + " for request id " +
                             std::to_string(id) + " that was never sent"));
    }
    bool for_exec = false;
    {
      std::lock_guard lock(mu_);
      auto it = pending_.find(id);
      // A late answer to a call that gave up waiting, or to an exec's SignalRequest.
      if (it == pending_.end()) continue;
      for_exec = it->second->is_exec();
      if (!for_exec) {
        it->second->inbox.push_back(std::move(received->message));
        it->second->Wake();
      }
    }
    if (for_exec) {
      return Fail(Error::Msg(std::string(control::MessageName(m)) + " for exec " +
                             std::to_string(id) +
                             " on the control socket (an exec's events go to its own socket)"));
    }
  }
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
  return Error::Msg("cell init did not answer in time");
}

Result<Message> CellChannel::Call(const Message& request, std::span<const int> fds) {
  {
    std::lock_guard lock(mu_);
    if (death_) return death_->Wrap(control::MessageName(request));  // fail fast, send nothing
  }
  const uint64_t id = control::RequestIdOf(request);
  auto p = Register(id);
  Result<Message> reply = Error::Msg("");
  if (Status s = control::SendMessage(fd_.get(), request, fds); !s.ok()) {
    std::lock_guard lock(mu_);
    reply = death_ ? *death_ : s.error();
  } else {
    reply = Wait(p, Clock::now() + kCallTimeout);
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
  Status s = control::SendMessage(fd_.get(), control::SignalRequest{NextId(), exec_id, signo});
  (void)s;
}

Status CellChannel::ExpectOk(const Message& request) {
  Result<control::OkReply> ok = As<control::OkReply>(Call(request), control::MessageName(request));
  if (!ok.ok()) return ok.error();
  return Ok();
}

}  // namespace mcpcell::sandbox
