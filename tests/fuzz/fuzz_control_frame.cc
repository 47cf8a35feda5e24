// fuzz_control_frame: what a hostile cell init could send to the server over the control
// socket. The server decodes every frame from a cell with control::DecodeFrame (after
// ReceiveMessage has counted the SCM_RIGHTS fds), so the input is one frame and it is
// decoded once for each fd count a datagram can carry (0..kMaxFdsPerFrame).
//
// Beyond "no crash": a frame that decodes must be internally consistent (its fd count is
// the one its type requires) and canonical: re-encoding the message gives back exactly the
// input bytes, so no field is read differently from how it is written and no byte of the
// frame goes unchecked.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "sandbox/control/protocol.h"

namespace {

using namespace mcpcell::sandbox::control;

[[noreturn]] void Fail(const char* what, const Message& message, uint32_t fd_count) {
  std::fprintf(stderr, "fuzz_control_frame: %s (%s, %u fds)\n", what, MessageName(message),
               fd_count);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> frame(data, size);
  for (uint32_t fds = 0; fds <= kMaxFdsPerFrame; ++fds) {
    auto decoded = DecodeFrame(frame, fds);
    if (!decoded) continue;
    const Message& message = *decoded;
    if (RequiredFdCount(message) != fds)
      Fail("accepted a frame with the wrong fd count", message, fds);
    (void)RequestIdOf(message);
    std::vector<uint8_t> again = EncodeFrame(message, fds);
    if (again.size() > kMaxFrameBytes)
      Fail("re-encoded frame exceeds kMaxFrameBytes", message, fds);
    if (!std::equal(again.begin(), again.end(), frame.begin(), frame.end()))
      Fail("re-encoding the decoded message gives other bytes", message, fds);
  }
  return 0;
}
