// What the files of CellChannel share and nothing else includes: the reply checks (As<T>),
// a waiting call's Pending entry, an exec's pipes and events, and AsyncExec (an exec in
// flight on an io_context). cell_channel.cc is the connection (reader thread, Call),
// cell_channel_files.cc the file requests, cell_channel_exec.cc Exec and ExecAsync's start,
// cell_channel_exec_run.cc the steps of an exec in flight.
#pragma once

#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include "sandbox/cell_channel.h"

namespace mcpcell::sandbox {

namespace cell_channel_internal {

using Clock = std::chrono::steady_clock;

inline Error FromReply(const control::ErrorReply& e) { return Error{e.message, e.err}; }

// The reply as a T; init's ErrorReply as its error; any other message as a protocol error.
template <typename T>
Result<T> As(Result<control::Message> reply, const char* request) {
  if (!reply.ok()) return reply.error();
  if (auto* e = std::get_if<control::ErrorReply>(&*reply)) return FromReply(*e);
  if (auto* t = std::get_if<T>(&*reply)) return std::move(*t);
  return Error::Msg(std::string("cell init answered ") + request + " with " +
                    control::MessageName(*reply));
}

// ExecStarted is asked for only when someone needs it: on_started, or the start timeout
// of an exec that has no timeout of its own. Otherwise init sends one event less and the
// exec wakes once less.
inline bool ReportStart(const ExecOptions& options) {
  return options.on_started || options.timeout.count() == 0;
}

}  // namespace cell_channel_internal

// A request waiting for its answer. A call's thread waits on `cv` for the inbox; an exec's
// answers come on its own event socket, so its entry only carries the two ways the channel
// reaches the exec: `nudge` (death, Close: look again; called under CellChannel::mu_, it
// only posts) and `abort` (the channel is being destroyed; called with no lock held).
struct CellChannel::Pending {
  std::deque<control::Message> inbox;  // under CellChannel::mu_
  std::condition_variable cv;
  std::function<void()> nudge;
  std::function<void(const Error&)> abort;
  bool is_exec() const { return static_cast<bool>(nudge); }
  void Wake() {
    cv.notify_all();
    if (nudge) nudge();
  }
};

struct CellChannel::ExecPipes {
  UniqueFd stdin_write, stdout_read, stderr_read;  // the server's ends (capture mode)
  UniqueFd events;                                 // the server's end of the event socket
  // The server's own copies of the program's ends of the output pipes, closed once
  // ExecExited is read: until then the pipes cannot hang up, so the exec wakes once at its
  // end (the exit; the hang-up is then there at once) rather than once for each pipe's
  // hang-up and again for the exit. Init closes its copies as soon as the program has
  // started.
  UniqueFd stdout_hold, stderr_hold;

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

// One frame from an exec's event socket, checked against what may come next.
struct CellChannel::ExecEvent {
  enum Kind { kNone, kStarted, kExited } kind = kNone;
  pid_t pid = 0;                 // kStarted
  control::ExecExited exited{};  // kExited
};

// An exec in flight. Its steps run as handlers on `io` (readiness of the event socket, the
// pipes and stdin; the timer of its clock; nudges), each under `mu_`, so the steps of one
// exec never run at once even when several threads run `io`. It ends once: Finish closes
// its fds, unregisters it from the channel (after which it never touches the channel
// again) and posts `done`. Lock order: mu_, then the channel's.
struct CellChannel::AsyncExec : std::enable_shared_from_this<AsyncExec> {
  // `external`: options that outlive the exec (Exec's, on its caller's stack); null: the
  // exec keeps `owned`.
  AsyncExec(boost::asio::io_context& io, ExecOptions owned, const ExecOptions* external,
            ExecCallback done);
  const ExecOptions& options() const { return external_ ? *external_ : owned_; }

  // After ExecRequest went out with the child's ends: takes the server's, starts waiting.
  void Begin(CellChannel& channel, uint64_t id, ExecPipes pipes,
             std::optional<uint64_t> oom_before);
  // The request never went out (or could not be made): `done` gets `error`.
  void FailToStart(const Error& error);
  // From any thread: look at the clock and the channel again (a stop request, death).
  void Nudge();
  // From any thread: kill the process group, as a stop request does.
  void Cancel();
  // The channel is being destroyed: end now with `error`; the channel is not touched after.
  void Abort(const Error& error);

 private:
  using Lock = std::unique_lock<std::mutex>;
  using Descriptor = boost::asio::posix::stream_descriptor;
  enum class Wait { kEvents, kStdout, kStderr, kStdin };

  Descriptor* DescriptorOf(Wait which);
  void WaitFor(Wait which);
  void OnReady(Wait which, const boost::system::error_code& ec);
  Status Serve(Wait which);
  // The exec's end (Ok: over; an error: failed) or nullopt to go on; kills the process
  // group on the timeout or a stop request.
  std::optional<Status> CheckClock();
  // CheckClock, then Finish or re-arm the timer for the next point CheckClock must see.
  void Settle();
  // The next point in time CheckClock has something to do (max: none).
  cell_channel_internal::Clock::time_point NextCheck() const;
  void ArmTimer();
  void KillGroup(bool* flag);
  void OnStarted(pid_t pid);
  void OnExited(const control::ExecExited& e);
  // Ends the exec (once): closes its fds, unregisters it, posts `done` with the result or
  // the error. Under mu_.
  void Finish(const Status& end);

  using Clock = cell_channel_internal::Clock;
  std::mutex mu_;
  boost::asio::io_context& io_;
  const ExecOptions owned_;
  const ExecOptions* const external_;
  ExecCallback done_;
  CellChannel* channel_ = nullptr;  // set by Begin, null once finished
  uint64_t id_ = 0;
  std::optional<uint64_t> oom_before_;
  bool begun_ = false, finished_ = false;
  std::atomic<bool> cancel_{false};  // Cancel() was called
  ExecResult result_;
  std::optional<Descriptor> events_, stdout_, stderr_, stdin_;
  UniqueFd stdout_hold_, stderr_hold_;  // ExecPipes::stdout_hold, until ExecExited
  size_t stdin_offset_ = 0;
  boost::asio::steady_timer timer_;
  Clock::time_point armed_ = Clock::time_point::max();  // when the timer fires (max: idle)
  // Without ExecStarted (ReportStart) the program counts as started when the request went.
  bool report_start_ = false, started_ = false, exited_ = false;
  Clock::time_point sent_at_, start_, deadline_ = Clock::time_point::max(), last_activity_;
  std::optional<Clock::time_point> killed_at_, exited_at_;
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

}  // namespace mcpcell::sandbox
