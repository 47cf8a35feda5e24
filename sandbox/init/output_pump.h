// OutputPump: cell init's copy of one detached exec's output (control/protocol.h,
// DetachedExecRequest) from the pipe the program writes into the file the server reads.
// The file stays bounded: once `cap` bytes are in it, one marker line says so and the rest
// is read and discarded, so the program never blocks on a full pipe. A write error (the
// cell's disk is full) is treated the same way, with the error in the marker.
//
// Owned by the control loop (single-threaded pid 1); the loop polls fd() and calls Drain
// when it is readable, and once more before it reports the program's exit.
#pragma once

#include <cstdint>
#include <string>

#include "base/unique_fd.h"

namespace mcpcell::sandbox {

class OutputPump {
 public:
  // `pipe`: the read end, non-blocking. `file`: the output file, open for writing.
  OutputPump(UniqueFd pipe, UniqueFd file, uint64_t cap);

  int fd() const { return pipe_.get(); }
  // Copies what the pipe holds now (a bounded number of reads, so other work gets its
  // turn). False once the pipe is at EOF or failed: the pump is finished.
  bool Drain();

 private:
  void Store(const char* data, size_t size);
  void StopStoring(const std::string& why);

  UniqueFd pipe_, file_;
  uint64_t cap_, written_ = 0;
  bool storing_ = true;
};

// How the marker line starts (tests match it); the reason follows.
inline constexpr char kOutputStoppedMarker[] = "\n[mcpcell: output not kept past here";

}  // namespace mcpcell::sandbox
