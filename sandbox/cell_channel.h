// CellChannel: the server's client of one cell's control protocol (sandbox/control).
//
// Built by the owner of a cell (sandbox/cell.h's Cell) from the control socket once cell
// init has sent Ready. It owns the socket. No thread is the cell's own (issue 29): the
// socket is waited on by an io_context (Options::io, or CellReactor::Default()'s), whose
// handler receives every frame from init, validates it (init is untrusted) and hands
// replies to the waiting caller by request id. All public methods are thread-safe; any
// number of Exec and file calls may run at once from different threads. The blocking
// calls (file requests, SignalExec, Stats) wait on a condition variable for the reactor to
// hand them their reply, so they must not be made on a thread running that io_context (the
// reply could never be read): such a call fails at once, saying so.
//
// Exec: the server creates the stdio pipes itself and passes the child's ends to init, so
// output flows from the program to the server directly, never through init. Init reports
// the exec's start and exit on a socket of that exec alone (protocol.h, "Exec events").
// ExecAsync waits on that socket, the output pipes, the program's stdin and the exec's
// clock on an io_context (a CellReactor's, cell_reactor.h): no thread is held while the
// program runs, and the callback gets the result once. Exec is the same path on an
// io_context of its own, run by the calling thread until the result is there. Each output
// chunk goes to `on_output` as it comes and at most `keep_bytes` per stream are kept; the
// rest is counted and dropped, so a program writing gigabytes cannot grow the server's
// memory. A wall-clock timeout, a stop request or ExecHandle::Cancel sends SIGKILL to the
// whole process group. Passthrough mode (mcpcell run) hands the caller's own fds to the
// program instead.
//
// Death of init: when the socket closes or a frame from init is malformed (on the control
// socket or an exec's event socket), the channel becomes dead: every pending and future
// call fails with an error that names the cell (Options::name) and says so (never a hang),
// and `on_closed` (if set) is called once, from the thread that found out (the control
// socket's io_context, or the thread running an exec's step). Destroying the channel with
// asynchronous execs in flight completes each of them with an error (posted to its
// io_context) before the destructor returns; a control-socket handler running on another
// thread is waited for.
//
// Files: cell_channel.cc (the socket, its reader on the io_context, Call),
// cell_channel_files.cc (file requests), cell_channel_exec.cc (Exec, ExecAsync's start,
// detached execs), cell_channel_exec_run.cc (an exec in flight on the io_context);
// cell_channel_internal.h is what they share.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/backend.h"
#include "sandbox/control/protocol.h"

namespace boost::asio {
class io_context;  // boost/asio/io_context.hpp; kept out of this widely included header
}  // namespace boost::asio

namespace mcpcell::sandbox {

class CellChannel {
 public:
  struct Options {
    // Returns the cell cgroup's OOM-kill counter; used to set ExecResult::oom_killed.
    std::function<Result<uint64_t>()> oom_kill_count;
    // Called once when the channel dies (init exited, bad frame), from the thread that saw
    // it: the reader thread or the thread running an exec's step. It must not destroy the
    // channel.
    std::function<void(const Error&)> on_closed;
    // The context that waits on the control socket; it must outlive the channel. Null:
    // CellReactor::Default()'s (one thread for every such channel of the process).
    boost::asio::io_context* io = nullptr;
    // How errors name the cell ("cell 3f2a..."); empty: "cell".
    std::string name;
  };

  // The outcome of an asynchronous exec: what Exec would have returned.
  using ExecCallback = std::function<void(Result<ExecResult>)>;
  struct AsyncExec;  // an exec in flight (cell_channel_exec_run.cc)

  // The caller's hold on an asynchronous exec. Cancel kills its process group, as a stop
  // request does (the result then has `cancelled`); after the end it does nothing. It
  // does not keep the exec alive. Copyable, thread-safe.
  class ExecHandle {
   public:
    ExecHandle() = default;
    void Cancel() const;
    // The exec's request id (SignalExec's exec_id); 0 when it failed before being sent.
    uint64_t exec_id() const { return exec_id_; }

   private:
    friend class CellChannel;
    std::weak_ptr<AsyncExec> run_;
    uint64_t exec_id_ = 0;
  };

  // Takes ownership of the control socket (init has already sent Ready on it).
  CellChannel(UniqueFd control_fd, Options options);
  // Closes the socket (init then kills its processes), completes the execs in flight with
  // an error and stops waiting on the socket (waiting for a handler running meanwhile on
  // another thread).
  ~CellChannel();
  CellChannel(const CellChannel&) = delete;
  CellChannel& operator=(const CellChannel&) = delete;

  // Runs one program to completion. An error means it could not run (bad argv, cell dead);
  // a program that ran and failed is a result. The calling thread runs the exec's steps
  // (ExecAsync's, on an io_context of its own): on_output and on_started run on it.
  Result<ExecResult> Exec(const ExecOptions& options);

  // Starts one program and returns at once; `done` gets what Exec would have returned,
  // exactly once, on a thread running `io` (also when the exec fails to start, or the
  // channel dies or is destroyed meanwhile). on_output and on_started run on `io`'s threads
  // under the exec's lock: they must not block for long, and must not destroy the channel
  // (`done` may). `io` must outlive the exec. Detached execs (detached_output) are not
  // taken here: use Exec, which returns as soon as they run.
  ExecHandle ExecAsync(boost::asio::io_context& io, ExecOptions options, ExecCallback done);

  // Sends `signo` to the process group of the running exec `exec_id` (see Exec's
  // on_started). Mostly for tests; Exec handles timeouts and stop requests itself.
  Status SignalExec(uint64_t exec_id, int signo);

  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes);
  // A window of a file: at most `max_bytes` from `offset` (no error when the file is
  // longer); see FileWindow.
  Result<FileWindow> ReadFileRange(const std::string& path, uint64_t offset, uint64_t max_bytes);
  Status WriteFile(const std::string& path, std::string_view data, uint32_t mode = 0644);
  // Writes `data` at `offset`, creating the file; `truncate` empties it first. With
  // offset = the current size this appends (write_file's append, saved tool output).
  Status WriteFileAt(const std::string& path, uint64_t offset, std::string_view data, bool truncate,
                     uint32_t mode = 0644);
  // Appends `data` at the end (O_APPEND, creating the file): concurrent appends do not
  // overwrite each other (data above one chunk, 128 KiB, may interleave with theirs).
  Status AppendFile(const std::string& path, std::string_view data, uint32_t mode = 0644);
  // Creates `path`, which must not exist (EEXIST otherwise), with `data`.
  Status WriteNewFile(const std::string& path, std::string_view data, uint32_t mode);
  Result<std::vector<control::DirEntry>> ListDir(const std::string& path,
                                                 size_t max_entries = 100000);
  Result<control::FileStat> Stat(const std::string& path, bool follow_symlinks = false);
  Status Mkdir(const std::string& path, uint32_t mode = 0755, bool parents = false);
  Status Remove(const std::string& path, bool recursive = false);
  // Renames inside the cell (atomic within one filesystem; EXDEV across mounts).
  Status Rename(const std::string& from, const std::string& to, bool no_replace = false);
  Result<control::StatsReply> Stats();

  bool alive() const { return !dead_.load(); }
  // Closes the socket and fails pending calls; idempotent. The destructor calls it.
  void Close();

 private:
  Status WriteChunks(const std::string& path, uint64_t offset, std::string_view data,
                     uint32_t first_flags, uint32_t later_flags, uint32_t mode);
  struct Pending;
  struct ExecPipes;
  uint64_t NextId() { return next_id_.fetch_add(1); }
  Result<control::Message> Call(const control::Message& request, std::span<const int> fds = {});
  Status ExpectOk(const control::Message& request);
  // Sends one frame on the control socket. The socket is non-blocking (the reactor waits on
  // it), so a full send buffer is waited out with poll, at most until `deadline`.
  Status Send(const control::Message& message, std::span<const int> fds,
              std::chrono::steady_clock::time_point deadline);
  struct ControlReader;  // the control socket's wait on the io_context (cell_channel.cc)
  static void WaitForControl(const std::shared_ptr<ControlReader>& reader);
  // Receives what init has sent (up to a bounded number of frames): nullopt to wait for
  // more, or the reason the channel is dead. On the io_context, under the reader's lock.
  std::optional<Error> ReadControl();
  void Fail(const Error& error);
  // An exec's entry has `nudge` and `abort` (Pending); a call's has neither.
  std::shared_ptr<Pending> Register(uint64_t id, std::function<void()> nudge = {},
                                    std::function<void(const Error&)> abort = {});
  void Unregister(uint64_t id);
  Result<control::Message> Wait(const std::shared_ptr<Pending>& pending,
                                std::chrono::steady_clock::time_point deadline);
  // The death as an error (under mu_), or `otherwise` while the channel lives.
  Error DeathOr(const Error& otherwise);
  // Sends SignalRequest and does not wait for its answer (the reader drops it): for an
  // exec's steps, which must not block their thread.
  void SendSignal(uint64_t exec_id, int signo);
  struct ExecEvent;
  // Receives the next frame of an exec's event socket. An error: the exec could not start
  // (init's ErrorReply), or init is gone or broke the protocol (then the channel is dead).
  Result<ExecEvent> TakeExecEvent(int events_fd, uint64_t id, bool started, bool report_start);
  // Starts `run` (Exec's or ExecAsync's): the pipes, the event socket, ExecRequest.
  ExecHandle StartExec(std::shared_ptr<AsyncExec> run);
  // Exec of a detached program (ExecOptions::detached_output): DetachedExecRequest, then
  // waits for ExecStarted and returns the handle (cell_channel_exec.cc).
  Result<ExecResult> StartDetached(const ExecOptions& options);

  UniqueFd fd_;
  Options options_;
  std::string name_;             // Options::name, or "cell"
  boost::asio::io_context& io_;  // Options::io, or CellReactor::Default()'s
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> dead_{false};
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;  // by request id, under mu_
  std::optional<Error> death_;                            // under mu_
  std::shared_ptr<ControlReader> reader_;
};

}  // namespace mcpcell::sandbox
