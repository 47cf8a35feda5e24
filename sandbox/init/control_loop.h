// The request loop of cell init: after setup, pid 1 of a cell serves the server here.
//
// ServeControl owns the control socket and never returns normally: it polls the socket and
// a signalfd for SIGCHLD, one request at a time (cell init is single-threaded).
//   - ExecRequest: fork a child that becomes the sandbox user and execs (exec.h), reply
//     ExecStarted{pid} (unless report_start is 0) or ErrorReply; when that child is
//     reaped, send ExecExited. All
//     three go to the request's own event socket (protocol.h, "Exec events"), which init
//     closes after the last; a server that gave up on an exec costs init nothing.
//   - SignalRequest: kill(-pgid, signo) for a running exec's process group.
//   - file operations: file_ops.h, as the sandbox user, resolved inside the cell's root.
//   - StatsRequest: counts kept by the loop.
// Every other process that dies in the pid namespace (orphans reparented to pid 1) is
// reaped too, so no zombie stays behind. A malformed frame is answered with an
// ErrorReply when it has a request id, otherwise it is logged to stderr and dropped; the
// loop keeps serving. When the server's end closes, init kills every process of the cell
// and exits (the pid namespace then dies with it).
//
// Built without exceptions; no threads; allocation is fine (fork of a single-threaded
// process).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "sandbox/linux/rlimits.h"
#include "sandbox/linux/seccomp.h"

namespace mcpcell::sandbox {

// What cell init's main() knows after setup and the loop needs. Filled by init's main
// (sandbox/init/main.cc) from the CellSpec.
struct InitContext {
  uid_t sandbox_uid = 1000;  // ids inside the cell that every exec and file op runs as
  gid_t sandbox_gid = 1000;
  std::vector<std::string> env_defaults;  // "KEY=VALUE"; an ExecRequest's env overlays it
  std::string workspace = "/workspace";   // default cwd, base of relative file op paths
  RlimitSpec rlimits;
  // Compiled once and installed on init itself before Ready (ApplySeccompToInit), so every
  // fork inherits it; nullptr = seccomp disabled by the spec
  // (A's init reports that in Ready, never silently).
  const SeccompProgram* seccomp = nullptr;
  // fd of the cell's root directory ("/" after pivot_root); -1 = ServeControl opens "/".
  // File operations resolve every path inside it (RESOLVE_IN_ROOT).
  int root_fd = -1;
};

// The signals whose disposition init changes (ignored, see ServeControl). Init resets every
// disposition to the default once at start, so a forked child only resets these.
inline constexpr int kInitIgnoredSignals[] = {SIGPIPE, SIGXFSZ};

// Serves requests on `control_fd` until the server closes it, then kills the cell's
// processes and calls _exit(0). Exits with status 1 after a fatal local error (e.g.
// signalfd cannot be created), reporting it on stderr.
[[noreturn]] void ServeControl(int control_fd, const InitContext& ctx);

}  // namespace mcpcell::sandbox
