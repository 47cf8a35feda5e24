// CellChannel's connection: the control socket, its reader thread, and request/reply
// (Call) with waiting callers. File requests are cell_channel_files.cc, Exec
// cell_channel_exec.cc. See cell_channel.h.
#include "sandbox/cell_channel.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/cell_channel_internal.h"

namespace mcpcell::sandbox {
namespace {

using cell_channel_internal::As;
using cell_channel_internal::Clock;
using cell_channel_internal::ThreadWakeFd;
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

namespace cell_channel_internal {
// One eventfd per thread that runs execs, made on its first exec and kept until the thread
// ends: an exec's poll also waits on it for stop requests and the channel's death. A wake
// meant for an earlier exec on this thread (written after that exec had stopped reading,
// never after its Exec returned: the stop callback and the pending entry are gone by then)
// only makes the next poll return once.
int ThreadWakeFd() {
  thread_local UniqueFd fd;
  if (!fd) fd.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));  // tried again after EMFILE
  return fd.get();
}
}  // namespace cell_channel_internal

CellChannel::CellChannel(UniqueFd control_fd, Options options)
    : fd_(std::move(control_fd)), options_(std::move(options)) {
  reader_ = std::thread([this] { ReaderLoop(); });
}

CellChannel::~CellChannel() {
  Close();
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
      if (it == pending_.end()) continue;  // a late answer to a call that gave up waiting
      for_exec = it->second->event >= 0;
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

std::shared_ptr<CellChannel::Pending> CellChannel::Register(uint64_t id, bool is_exec) {
  auto p = std::make_shared<Pending>();
  if (is_exec) p->event = ThreadWakeFd();
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
  auto p = Register(id, false);
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

Status CellChannel::ExpectOk(const Message& request) {
  Result<control::OkReply> ok = As<control::OkReply>(Call(request), control::MessageName(request));
  if (!ok.ok()) return ok.error();
  return Ok();
}

}  // namespace mcpcell::sandbox
