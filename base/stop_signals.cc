// StopSignals (see stop_signals.h): the self-pipe and the handlers.
#include "base/stop_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace mcpcell {
namespace {

// The self-pipe: made once and never closed, so a handler still running on another thread
// when a StopSignals is destroyed writes to a live pipe, never to a closed (or reused)
// descriptor. Each Install drains what an earlier signal left in it.
int g_stop_pipe[2] = {-1, -1};

extern "C" void OnStopSignal(int) {
  char byte = 1;
  int saved = errno;
  [[maybe_unused]] ssize_t ignored = ::write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

Result<std::unique_ptr<StopSignals>> StopSignals::Install() {
  static const int made = ::pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) == 0 ? 0 : errno;
  if (made != 0) return Error::Sys("pipe2(stop signals)", made);
  char drained[64];
  while (::read(g_stop_pipe[0], drained, sizeof drained) > 0) {
  }
  std::unique_ptr<StopSignals> signals(new StopSignals());
  struct sigaction stop {};
  stop.sa_handler = OnStopSignal;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGTERM, &stop, &signals->old_term_);
  ::sigaction(SIGINT, &stop, &signals->old_int_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &signals->old_pipe_);
  return signals;
}

StopSignals::~StopSignals() {
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
}

int StopSignals::fd() const { return g_stop_pipe[0]; }

}  // namespace mcpcell
