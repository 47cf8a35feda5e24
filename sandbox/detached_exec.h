// DetachedExec: the server's handle on a background program that cell init supervises
// (ExecOptions::detached_output, control/protocol.h DetachedExecRequest). Init copies the
// program's output into a file of the cell and reports its exit on the exec's own event
// socket, so no server thread is tied to the program while it runs and no lease is held:
// the cell can be paused and expire as usual. The handle holds the server's ends of that
// event socket and of the program's stdin pipe; dropping it closes both (the program sees
// EOF on stdin; init's exit report is then dropped).
//
// Signals go through the cell (CellLease::SignalExec with exec_id()). When the cell ends
// (session closed, hibernated, replaced) init kills the program and the event socket hangs
// up: Poll then says the program was lost.
//
// Threading: every method is thread-safe (one mutex; Poll waits without holding it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/backend.h"

namespace mcpcell::sandbox {

class DetachedExec {
 public:
  DetachedExec(uint64_t exec_id, pid_t pid, UniqueFd events, UniqueFd stdin_write);

  uint64_t exec_id() const { return exec_id_; }
  pid_t pid() const { return pid_; }  // in the cell's pid namespace

  // The program's exit (exit status or signal, CPU time, peak memory) once init reported
  // it, nullopt while it runs. Waits up to `wait` for it (0: only looks), less when `stop`
  // is requested. An error when init closed the socket without a report (the cell ended,
  // and the program with it) or sent something else; the same error on later calls.
  Result<std::optional<ExecResult>> Poll(std::chrono::milliseconds wait,
                                         const std::stop_token& stop = {});

  // Writes to the program's stdin without blocking: how many bytes went in (fewer than
  // data.size() when the pipe is full). EPIPE when the program closed its stdin, EBADF
  // after CloseStdin.
  Result<size_t> WriteStdin(std::string_view data);
  // Closes the server's end of stdin: the program reads EOF.
  void CloseStdin();
  bool stdin_open() const;

 private:
  // One non-blocking look at the event socket. Under mu_.
  void TakeEventLocked();

  const uint64_t exec_id_;
  const pid_t pid_;
  const std::chrono::steady_clock::time_point started_;
  mutable std::mutex mu_;
  UniqueFd events_;
  UniqueFd stdin_write_;
  std::optional<ExecResult> exited_;
  std::optional<Error> lost_;
};

}  // namespace mcpcell::sandbox
