// The stdio transport: newline-delimited JSON-RPC on an input and an output fd (stdin and
// stdout by default). stdout carries MCP messages and nothing else. Two threads take turns
// as the reader (leader/follower): the reader that delivered a request whose task it
// adopted (AdoptTask) passes reading to the other and runs the task itself, so a tool call
// starts on the thread that read it. At most one task is adopted at a time; the rest go to
// the server's worker pool. A line longer than max_message_bytes is not buffered: the reader stops
// accumulating at the limit, discards up to the next newline and reports one error naming
// the limit. EOF on input half-closes: on_eof (if set; else on_close), and replies can still
// be written until Close().
#pragma once

#include <cstddef>
#include <memory>
#include <thread>

#include "mcp/transport.h"

namespace mcp {

class Server;

struct StdioOptions {
  int in_fd = 0;
  int out_fd = 1;
  // 0 = ServeStdio takes the server's ServerOptions::max_message_bytes; a bare
  // StdioTransport then uses 16 MiB.
  size_t max_message_bytes = 0;
  // Optional fd the reader also polls; readable = stop (an application's stop signals
  // write to it; the transport only reads its readiness, never its bytes). -1 = none.
  int stop_fd = -1;
};

class StdioTransport : public Transport {
 public:
  explicit StdioTransport(StdioOptions options = {});
  ~StdioTransport() override;  // closes and joins the readers
  void Start(TransportCallbacks callbacks) override;
  bool Send(const Json& message) override;
  void Close() override;
  bool AdoptTask(std::function<void()>& task) override;
  // Reader threads waiting for input right now: 2 when idle, 1 while the other reads or
  // runs a task, 0 for input read by one thread (a regular file). For tests and
  // diagnostics.
  int IdleReaders() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves `server` over stdin/stdout until EOF or until options.stop_fd is readable, then
// closes the session (cancelling in-flight requests and waiting for their handlers).
// Returns a process exit status (0 on a clean end). Installs no signal handlers: the
// application decides what SIGTERM/SIGINT do (e.g. a self-pipe as stop_fd) and should
// ignore SIGPIPE, since a client that goes away makes writes fail.
int ServeStdio(Server& server, StdioOptions options = {});

}  // namespace mcp
