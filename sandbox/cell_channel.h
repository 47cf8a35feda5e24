// CellChannel: the server's client of one cell's control protocol (sandbox/control).
//
// Built by the owner of a cell (sandbox/cell.h's Cell) from the control socket once cell
// init has sent Ready. It owns the socket and one reader thread that receives every frame
// from init, validates it (init is untrusted) and hands replies to the waiting caller by
// request id. All public methods are thread-safe; any number of Exec and file calls may
// run at once from different threads.
//
// Exec: the server creates the stdio pipes itself and passes the child's ends to init, so
// output flows from the program to the server directly, never through init. Init reports
// the exec's start and exit on a socket of that exec alone (protocol.h, "Exec events"),
// so the calling thread polls that socket and the read ends together and nothing else is
// on the path: init's ExecStarted and ExecExited wake the calling thread directly, not
// through the reader thread. Each output chunk goes to `on_output` as it comes and at most
// `keep_bytes` per stream are kept; the rest is counted and dropped, so a program writing
// gigabytes cannot grow the server's memory. A wall-clock timeout or a stop request sends
// SIGKILL to the whole process group. Passthrough mode (mcpcell run) hands the caller's
// own fds to the program instead.
//
// Death of init: when the socket closes or a frame from init is malformed (on the control
// socket or an exec's event socket), the channel becomes dead: every pending and future
// call fails with an error that says so (never a hang), and `on_closed` (if set) is called
// once, from the thread that found out (the reader, or an exec's calling thread).
//
// Files: cell_channel.cc (the socket, reader thread, Call), cell_channel_files.cc (file
// requests), cell_channel_exec.cc (Exec); cell_channel_internal.h is what they share.
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

namespace mcpcell::sandbox {

class CellChannel {
 public:
  struct Options {
    // Returns the cell cgroup's OOM-kill counter; used to set ExecResult::oom_killed.
    std::function<Result<uint64_t>()> oom_kill_count;
    // Called once when the channel dies (init exited, bad frame), from the thread that saw
    // it: the reader thread or an exec's calling thread. It must not destroy the channel.
    std::function<void(const Error&)> on_closed;
  };

  // Takes ownership of the control socket (init has already sent Ready on it).
  CellChannel(UniqueFd control_fd, Options options);
  ~CellChannel();  // closes the socket (init then kills its processes) and joins the reader
  CellChannel(const CellChannel&) = delete;
  CellChannel& operator=(const CellChannel&) = delete;

  // Runs one program to completion. An error means it could not run (bad argv, cell dead);
  // a program that ran and failed is a result.
  Result<ExecResult> Exec(const ExecOptions& options);

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
  void ReaderLoop();
  void Fail(const Error& error);
  std::shared_ptr<Pending> Register(uint64_t id, bool is_exec);
  void Unregister(uint64_t id);
  Result<control::Message> Wait(const std::shared_ptr<Pending>& pending,
                                std::chrono::steady_clock::time_point deadline);
  struct ExecEvent;
  // Receives the next frame of an exec's event socket. An error: the exec could not start
  // (init's ErrorReply), or init is gone or broke the protocol (then the channel is dead).
  Result<ExecEvent> TakeExecEvent(int events_fd, uint64_t id, bool started, bool report_start);
  // One exec in flight: its fds, its clock (start, deadline, kill) and its result.
  struct ExecRun;
  // Polls the exec's event socket, pipes and wake-up fd until the program has exited and
  // its output is drained, or the exec failed.
  Status PumpExec(ExecRun& run);
  // Exec of a detached program (ExecOptions::detached_output): DetachedExecRequest, then
  // waits for ExecStarted and returns the handle (cell_channel_exec.cc).
  Result<ExecResult> StartDetached(const ExecOptions& options);

  UniqueFd fd_;
  Options options_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> dead_{false};
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;  // by request id, under mu_
  std::optional<Error> death_;                            // under mu_
  std::thread reader_;
};

}  // namespace mcpcell::sandbox
