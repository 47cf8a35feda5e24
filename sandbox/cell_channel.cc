// CellChannel: request/reply over the control socket, with one reader thread and exec
// output read straight from pipes by the calling thread. See cell_channel.h.
#include "sandbox/cell_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

namespace mcpcell::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
using control::Message;

constexpr auto kCallTimeout = std::chrono::seconds(60);   // a file op or signal
constexpr auto kStartTimeout = std::chrono::seconds(30);  // ExecRequest -> ExecStarted
constexpr auto kKillGrace = std::chrono::seconds(10);     // SIGKILL -> ExecExited
constexpr auto kDrainIdle = std::chrono::milliseconds(100);
constexpr auto kDrainMax = std::chrono::seconds(2);
constexpr size_t kReadChunk = 64 * 1024;

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

Error FromReply(const control::ErrorReply& e) { return Error{e.message, e.err}; }

template <typename T>
Result<T> As(Result<Message> reply, const char* request) {
  if (!reply.ok()) return reply.error();
  if (auto* e = std::get_if<control::ErrorReply>(&*reply)) return FromReply(*e);
  if (auto* t = std::get_if<T>(&*reply)) return std::move(*t);
  return Error::Msg(std::string("cell init answered ") + request + " with " +
                    control::MessageName(*reply));
}

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

}  // namespace

struct CellChannel::Pending {
  std::deque<Message> inbox;  // under CellChannel::mu_
  std::condition_variable cv;
  // Exec only: the exec thread's wake-up eventfd (ThreadWakeFd), written on the channel's
  // death and on a stop request. Not owned.
  int event = -1;
  void Wake() {
    cv.notify_all();
    if (event >= 0) {
      uint64_t one = 1;
      ssize_t ignored = ::write(event, &one, sizeof(one));
      (void)ignored;
    }
  }
};

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
};

namespace {
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
}  // namespace

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

Status CellChannel::SignalExec(uint64_t exec_id, int signo) {
  return ExpectOk(control::SignalRequest{NextId(), exec_id, signo});
}

Result<control::StatsReply> CellChannel::Stats() {
  return As<control::StatsReply>(Call(control::StatsRequest{NextId()}), "StatsRequest");
}

Result<FileWindow> CellChannel::ReadFileRange(const std::string& path, uint64_t offset,
                                              uint64_t max_bytes) {
  FileWindow w;
  for (;;) {
    const uint64_t remaining = max_bytes - w.data.size();
    const uint32_t ask = static_cast<uint32_t>(
        std::min<uint64_t>(control::kMaxFileChunkBytes, std::max<uint64_t>(remaining, 1)));
    auto chunk = As<control::ReadFileReply>(
        Call(control::ReadFileRequest{NextId(), path, offset + w.data.size(), ask}),
        "ReadFileRequest");
    if (!chunk.ok()) return chunk.error();
    if (chunk->data.size() > ask) return Error::Msg("ReadFileReply: more data than asked for");
    w.file_size = chunk->file_size;
    if (w.data.size() + chunk->data.size() > max_bytes) {  // only when max_bytes == 0
      w.eof = false;
      return w;
    }
    w.data += chunk->data;
    w.eof = chunk->eof || chunk->data.empty();
    if (w.eof || w.data.size() >= max_bytes) {
      w.eof = w.eof || offset + w.data.size() >= w.file_size;
      return w;
    }
  }
}

Result<std::string> CellChannel::ReadFile(const std::string& path, uint64_t max_bytes) {
  std::string out;
  for (;;) {
    // One byte more than the caller's limit, so an oversized file shows as such.
    const uint64_t remaining = max_bytes - out.size();
    const uint32_t ask = remaining >= control::kMaxFileChunkBytes
                             ? control::kMaxFileChunkBytes
                             : static_cast<uint32_t>(remaining + 1);
    auto chunk = As<control::ReadFileReply>(
        Call(control::ReadFileRequest{NextId(), path, out.size(), ask}), "ReadFileRequest");
    if (!chunk.ok()) return chunk.error();
    if (chunk->data.size() > ask) return Error::Msg("ReadFileReply: more data than asked for");
    out += chunk->data;
    if (out.size() > max_bytes) {
      return Error::Msg("\"" + path + "\": file is " + std::to_string(chunk->file_size) +
                        " bytes, over the limit of " + std::to_string(max_bytes));
    }
    if (chunk->eof || chunk->data.empty()) return out;
  }
}

Status CellChannel::WriteFile(const std::string& path, std::string_view data, uint32_t mode) {
  size_t offset = 0;
  do {
    size_t n = std::min<size_t>(control::kMaxFileChunkBytes, data.size() - offset);
    uint32_t flags = offset == 0 ? control::kWriteCreate | control::kWriteTruncate : 0;
    if (Status s = ExpectOk(control::WriteFileRequest{NextId(), path, offset, flags, mode,
                                                      std::string(data.substr(offset, n))});
        !s.ok()) {
      return s;
    }
    offset += n;
  } while (offset < data.size());
  return Ok();
}

// Sends `data` in frame-sized WriteFileRequests: the first with `first_flags`, the rest
// with `later_flags`, each at `offset` + what went before (ignored by init for appends).
Status CellChannel::WriteChunks(const std::string& path, uint64_t offset, std::string_view data,
                                uint32_t first_flags, uint32_t later_flags, uint32_t mode) {
  size_t done = 0;
  do {
    size_t n = std::min<size_t>(control::kMaxFileChunkBytes, data.size() - done);
    const uint32_t flags = done == 0 ? first_flags : later_flags;
    if (Status s = ExpectOk(control::WriteFileRequest{NextId(), path, offset + done, flags, mode,
                                                      std::string(data.substr(done, n))});
        !s.ok()) {
      return s;
    }
    done += n;
  } while (done < data.size());
  return Ok();
}

Status CellChannel::WriteFileAt(const std::string& path, uint64_t offset, std::string_view data,
                                bool truncate, uint32_t mode) {
  const uint32_t first =
      control::kWriteCreate | (truncate ? uint32_t{control::kWriteTruncate} : 0u);
  return WriteChunks(path, offset, data, first, control::kWriteCreate, mode);
}

Status CellChannel::WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) {
  return WriteChunks(path, 0, data, control::kWriteCreate | control::kWriteExclusive, 0, mode);
}

Status CellChannel::AppendFile(const std::string& path, std::string_view data, uint32_t mode) {
  const uint32_t append = control::kWriteCreate | control::kWriteAppend;
  return WriteChunks(path, 0, data, append, append, mode);
}

Result<std::vector<control::DirEntry>> CellChannel::ListDir(const std::string& path,
                                                            size_t max_entries) {
  std::vector<control::DirEntry> out;
  uint64_t cookie = 0;
  do {
    auto page = As<control::ListDirReply>(Call(control::ListDirRequest{NextId(), path, cookie}),
                                          "ListDirRequest");
    if (!page.ok()) return page.error();
    if (page->next_cookie != 0 && (page->entries.empty() || page->next_cookie == cookie)) {
      return Error::Msg("ListDirReply: listing of \"" + path + "\" makes no progress");
    }
    for (auto& e : page->entries) out.push_back(std::move(e));
    if (out.size() > max_entries) {
      return Error::Msg("\"" + path + "\": more than " + std::to_string(max_entries) + " entries");
    }
    cookie = page->next_cookie;
  } while (cookie != 0);
  return out;
}

Result<control::FileStat> CellChannel::Stat(const std::string& path, bool follow_symlinks) {
  auto r = As<control::StatReply>(
      Call(control::StatRequest{NextId(), path, static_cast<uint8_t>(follow_symlinks)}),
      "StatRequest");
  if (!r.ok()) return r.error();
  return r->stat;
}

Status CellChannel::Mkdir(const std::string& path, uint32_t mode, bool parents) {
  return ExpectOk(control::MkdirRequest{NextId(), path, mode, static_cast<uint8_t>(parents)});
}

Status CellChannel::Remove(const std::string& path, bool recursive) {
  return ExpectOk(control::RemoveRequest{NextId(), path, static_cast<uint8_t>(recursive)});
}

Status CellChannel::Rename(const std::string& from, const std::string& to, bool no_replace) {
  return ExpectOk(control::RenameRequest{NextId(), from, to, static_cast<uint8_t>(no_replace)});
}

// ---- Exec ----

Result<ExecResult> CellChannel::Exec(const ExecOptions& options) {
  if (options.argv.empty()) return Error::Msg("exec: argv is empty");
  if (!alive()) {
    std::lock_guard lock(mu_);
    return death_->Wrap("exec");
  }
  std::optional<uint64_t> oom_before;
  if (options_.oom_kill_count) {
    if (auto n = options_.oom_kill_count(); n.ok()) oom_before = *n;
  }
  // The child's ends go to init over SCM_RIGHTS. Stdin's and the event socket's close here
  // right after; the output ends are kept (ExecPipes::stdout_hold) until ExecExited, so the
  // server sees EOF on output once the program has been reaped and every other process of
  // the exec has let go of it.
  ExecPipes pipes;
  UniqueFd child_ends[4];
  int child_fds[4] = {options.stdin_fd, options.stdout_fd, options.stderr_fd, -1};
  for (int i = 0; i < 3; ++i) {
    if (child_fds[i] >= 0) continue;
    auto pipe = ServerPipe(/*server_reads=*/i != 0,
                           /*blocking_server_end=*/i == 0 && options.stdin_data.empty());
    if (!pipe.ok()) return pipe.error().Wrap("exec");
    if (i == 0) {
      child_ends[0] = std::move(pipe->first);
      if (!options.stdin_data.empty()) pipes.stdin_write = std::move(pipe->second);
    } else {
      child_ends[i] = std::move(pipe->second);
      (i == 1 ? pipes.stdout_read : pipes.stderr_read) = std::move(pipe->first);
    }
    child_fds[i] = child_ends[i].get();
  }
  auto events = control::CreateExecEventPair();
  if (!events.ok()) return events.error().Wrap("exec");
  pipes.events = std::move(events->first);
  child_ends[3] = std::move(events->second);
  child_fds[3] = child_ends[3].get();
  if (ThreadWakeFd() < 0) return Error::Sys("exec: eventfd");
  const uint64_t id = NextId();
  auto pending = Register(id, true);  // so Close() and Fail() wake this thread
  Status sent = control::SendMessage(
      fd_.get(),
      control::ExecRequest{id, options.argv, options.env, options.cwd, ReportStart(options)},
      child_fds);
  child_ends[0].Reset();
  child_ends[3].Reset();
  pipes.stdout_hold = std::move(child_ends[1]);  // empty when the caller gave its own fd
  pipes.stderr_hold = std::move(child_ends[2]);
  if (!sent.ok()) {
    Unregister(id);
    std::lock_guard lock(mu_);
    return (death_ ? *death_ : sent.error()).Wrap("exec \"" + options.argv[0] + "\"");
  }
  ExecResult result;
  Status pumped = PumpExec(options, pipes, pending, id, result);
  Unregister(id);
  if (!pumped.ok()) return pumped.error().Wrap("exec \"" + options.argv[0] + "\"");
  if (oom_before) {
    if (auto after = options_.oom_kill_count(); after.ok())
      result.oom_killed = *after > *oom_before;
  }
  return result;
}

namespace {
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

Status CellChannel::PumpExec(const ExecOptions& options, ExecPipes& pipes,
                             const std::shared_ptr<Pending>& pending, uint64_t id,
                             ExecResult& result) {
  const auto sent_at = Clock::now();
  const int wake_fd = pending->event;
  // Without ExecStarted the program counts as started when the request went out.
  const bool report_start = ReportStart(options);
  bool started = !report_start, exited = false;
  Clock::time_point start = sent_at, deadline = Clock::time_point::max();
  if (started && options.timeout.count() > 0) deadline = start + options.timeout;
  std::stop_callback on_stop(options.stop, [&] { pending->Wake(); });
  std::optional<Clock::time_point> killed_at, exited_at;
  auto kill_group = [&](bool* flag) {
    *flag = true;
    if (killed_at) return;
    killed_at = Clock::now();
    // Init serves requests in order, so this finds the exec even when its ExecStarted is
    // still on the way. ESRCH: it ended (or never started) meanwhile, fine.
    Status s = SignalExec(id, SIGKILL);
    (void)s;
  };
  for (;;) {
    if (exited && !pipes.stdout_read && !pipes.stderr_read) return Ok();
    const auto now = Clock::now();
    if (!started && now - sent_at > kStartTimeout) {
      return Error::Msg("cell init did not start the program within " +
                        std::to_string(kStartTimeout.count()) + " s");
    }
    if (started && !exited && now >= deadline) kill_group(&result.timed_out);
    if (!exited && options.stop.stop_requested()) kill_group(&result.cancelled);
    if (!exited && killed_at && now - *killed_at > kKillGrace) {
      return Error::Msg("the process group did not exit within 10 s of SIGKILL");
    }
    if (exited && now - *exited_at > kDrainMax) return Ok();  // a leftover keeps writing
    if (!exited && dead_.load()) {
      std::lock_guard lock(mu_);
      return *death_;  // closed by the server, or init gone
    }
    pollfd fds[5];
    int n = 0;
    fds[n++] = {wake_fd, POLLIN, 0};
    const int events_index = pipes.events ? n : -1;
    if (pipes.events) fds[n++] = {pipes.events.get(), POLLIN, 0};
    const int out_index = pipes.stdout_read ? n : -1;
    if (pipes.stdout_read) fds[n++] = {pipes.stdout_read.get(), POLLIN, 0};
    const int err_index = pipes.stderr_read ? n : -1;
    if (pipes.stderr_read) fds[n++] = {pipes.stderr_read.get(), POLLIN, 0};
    const int in_index = pipes.stdin_write ? n : -1;
    if (pipes.stdin_write) fds[n++] = {pipes.stdin_write.get(), POLLOUT, 0};
    int timeout = exited                                 ? static_cast<int>(kDrainIdle.count())
                  : killed_at                            ? 100
                  : deadline == Clock::time_point::max() ? 1000
                                                         : std::min(1000, MillisUntil(deadline));
    int ready = ::poll(fds, n, timeout);
    if (ready < 0 && errno != EINTR) return Error::Sys("poll(exec pipes)");
    if (ready == 0 && exited) return Ok();  // output went quiet after the exit
    if (ready <= 0) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t counter;
      ssize_t ignored = ::read(wake_fd, &counter, sizeof(counter));
      (void)ignored;
    }
    if (events_index >= 0 && fds[events_index].revents) {
      Result<ExecEvent> event = TakeExecEvent(pipes.events.get(), id, started, report_start);
      if (!event.ok()) return event.error();
      if (event->kind == ExecEvent::kStarted) {
        started = true;
        start = Clock::now();
        if (options.timeout.count() > 0) deadline = start + options.timeout;
        if (options.on_started) options.on_started(id, event->pid);
      } else if (event->kind == ExecEvent::kExited) {
        const control::ExecExited& e = event->exited;
        exited = true;
        exited_at = Clock::now();
        result.signaled = e.signaled != 0;
        result.exit_code = e.exit_code;
        result.signo = e.signo;
        result.user_cpu = std::chrono::microseconds(e.user_cpu_us);
        result.system_cpu = std::chrono::microseconds(e.system_cpu_us);
        result.peak_memory_bytes = e.max_rss_bytes;
        result.wall_time =
            std::chrono::duration_cast<std::chrono::microseconds>(*exited_at - start);
        pipes.events.Reset();  // init sends nothing after ExecExited
        pipes.stdout_hold.Reset();
        pipes.stderr_hold.Reset();
      }
    }
    if (out_index >= 0 && fds[out_index].revents)
      DrainOutput(pipes.stdout_read, OutputStream::kStdout, options, result.out);
    if (err_index >= 0 && fds[err_index].revents)
      DrainOutput(pipes.stderr_read, OutputStream::kStderr, options, result.err);
    if (in_index >= 0 && fds[in_index].revents)
      FeedStdin(pipes.stdin_write, options.stdin_data, pipes.stdin_offset);
  }
}

}  // namespace mcpcell::sandbox
