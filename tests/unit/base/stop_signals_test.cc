// StopSignals (base/stop_signals.h): SIGTERM and SIGINT make the stop fd readable while installed,
// SIGPIPE is ignored, and the previous dispositions come back afterwards.
#include "base/stop_signals.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

namespace mcpcell {
namespace {

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

TEST(StopSignals, SigtermAndSigintMakeTheStopFdReadable) {
  for (int sig : {SIGTERM, SIGINT}) {
    auto signals = StopSignals::Install();
    ASSERT_TRUE(signals) << signals.error().message;
    EXPECT_FALSE(Readable((*signals)->fd(), 0));  // drained of any earlier signal
    ::kill(::getpid(), sig);
    EXPECT_TRUE(Readable((*signals)->fd(), 5000)) << "signal " << sig;
  }
}

TEST(StopSignals, IgnoresSigpipeAndRestoresThePreviousDispositions) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  {
    auto signals = StopSignals::Install();
    ASSERT_TRUE(signals) << signals.error().message;
    struct sigaction pipe {};
    ::sigaction(SIGPIPE, nullptr, &pipe);
    EXPECT_EQ(pipe.sa_handler, SIG_IGN);
    struct sigaction term {};
    ::sigaction(SIGTERM, nullptr, &term);
    EXPECT_NE(term.sa_handler, before.sa_handler);
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  struct sigaction pipe {};
  ::sigaction(SIGPIPE, nullptr, &pipe);
  EXPECT_EQ(pipe.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace mcpcell
