// What the three files of CellChannel share and nothing else includes: the reply checks
// (As<T>), a waiting call's Pending entry and the per-thread wake-up eventfd of execs.
// cell_channel.cc is the connection (reader thread, Call), cell_channel_files.cc the file
// requests, cell_channel_exec.cc Exec and its output pumping.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
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

// One eventfd per thread that runs execs, made on its first exec and kept until the thread
// ends (cell_channel.cc); -1 when it could not be made.
int ThreadWakeFd();

}  // namespace cell_channel_internal

struct CellChannel::Pending {
  std::deque<control::Message> inbox;  // under CellChannel::mu_
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

}  // namespace mcpcell::sandbox
