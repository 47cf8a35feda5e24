// fuzz_pool_reply: what a pool (or whatever listens on its socket) could send to the
// mcpcell launcher, which reads it with its own small JSON reader (tools/launcher/
// pool_reply.c, C, no JSON library). Beyond "no crash": a frame that reads holds a known
// event, its numbers in their ranges and its message NUL-terminated inside the buffer; a
// refused one says why. The same bytes go through the UTF-8 check of the request's strings.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tools/launcher/pool_reply.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  pool_reply reply;
  char why[256];
  why[0] = '\0';
  if (ParsePoolReply(text, size, &reply, why, sizeof why) == 0) {
    if (reply.event != POOL_EVENT_OTHER && reply.event != POOL_EVENT_STARTED &&
        reply.event != POOL_EVENT_EXITED && reply.event != POOL_EVENT_ERROR)
      std::abort();
    if (reply.event == POOL_EVENT_EXITED && (!reply.has_exit_code || !reply.has_signo))
      std::abort();
    if (reply.exit_code < 0 || reply.exit_code > 255 || reply.signo < 0 || reply.signo > 64 ||
        reply.err < 0 || reply.err > 4095)
      std::abort();
    if (memchr(reply.message, '\0', sizeof reply.message) == nullptr) std::abort();
  } else if (why[0] == '\0' || memchr(why, '\0', sizeof why) == nullptr) {
    std::abort();
  }
  (void)IsJsonSafeUtf8(text, size);
  return 0;
}
