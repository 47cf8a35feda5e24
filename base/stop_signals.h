// A server's stop signals (`mcpcell serve`, the conformance server): while a StopSignals
// exists, SIGTERM and SIGINT make fd() readable (a self-pipe), which the transport serving
// the MCP session watches as its stop fd (mcp::StdioOptions::stop_fd, mcp::ServeHttp's
// stop_fd); SIGPIPE is ignored, so a client that goes away makes a write fail instead of
// killing the server. The previous dispositions come back when it is destroyed. In base/
// because the mcp/ library leaves signals to the application, and each server needs this.
//
// Handlers, not a blocked mask and a sigwait thread: a mask would be inherited by every
// cell the server makes, and their processes must see SIGTERM and SIGINT.
// Threading: one at a time, made and destroyed on the serving thread.
#pragma once

#include <signal.h>

#include <memory>

#include "base/status.h"

namespace mcpcell {

class StopSignals {
 public:
  // Installs the handlers; an error when the self-pipe cannot be made.
  static Result<std::unique_ptr<StopSignals>> Install();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Readable once SIGTERM or SIGINT arrived (stays readable; never closed).
  int fd() const;

 private:
  StopSignals() = default;
  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
  struct sigaction old_pipe_ {};
};

}  // namespace mcpcell
