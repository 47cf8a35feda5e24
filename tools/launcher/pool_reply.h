/* The events a `mcpcell pool` sends to a run (tools/cell_pool.h), read by the launcher
 * (launcher.c), which has no JSON library: one flat JSON object per datagram, as the pool
 * writes them. C, so that the launcher builds against musl; the unit tests link it too.
 */
#ifndef MCPCELL_TOOLS_LAUNCHER_POOL_REPLY_H_
#define MCPCELL_TOOLS_LAUNCHER_POOL_REPLY_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The cell options `mcpcell run` sends when none is given (CellShape::Key of the
 * defaults; a unit test holds them equal). The launcher handles only such runs. */
#define MCPCELL_DEFAULT_CELL_KEY "disk=1073741824 memory=0 pids=0 cpu=0 seccomp=on"

enum pool_event { POOL_EVENT_OTHER, POOL_EVENT_STARTED, POOL_EVENT_EXITED, POOL_EVENT_ERROR };

struct pool_reply {
  enum pool_event event;
  /* exited */
  long exit_code, signo;
  int signaled, timed_out, oom_killed;
  int has_exit_code, has_signo;
  /* error */
  char message[1024]; /* cut to fit, always NUL-terminated */
  int has_message;
  long err;
  int fallback;
};

/* Parses one datagram. 0 on success; -1 when it is not one JSON object whose "event" is a
 * string, or a known field has the wrong type or range, with `why` (>= 128 bytes) saying
 * what. Unknown fields are skipped, unknown events are POOL_EVENT_OTHER. */
int ParsePoolReply(const char* data, size_t size, struct pool_reply* out, char* why,
                   size_t why_size);

/* 1 when `s` (length n) is valid UTF-8 without NUL bytes, which is what a JSON string of
 * the request may hold. */
int IsJsonSafeUtf8(const char* s, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* MCPCELL_TOOLS_LAUNCHER_POOL_REPLY_H_ */
