// mcp_roundtrip_forkexec: a bare fork()+execv() of a program from a small process, for
// mcp_roundtrip_bench.
//
// The bench's own fork() copies the page tables of a big C++ process (it links the sandbox
// library and nlohmann), which makes its fork+exec slower than that of a small program. This
// helper is the small program (C, libc only): each byte read on stdin is one measurement of
// fork(), execv(argv[1]) with stdout to /dev/null (as the bench's other bare rows), and
// waitpid, timed with CLOCK_MONOTONIC inside the helper, so the pipe to the bench is not in
// it. Each result goes to stdout as one line, the milliseconds, or "error ..." naming what
// failed. EOF on stdin ends it.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PROGRAM [ARG...]  (one measurement per byte on stdin)\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  char byte;
  for (;;) {
    ssize_t n = read(0, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;
    double t0 = NowMs();
    pid_t pid = fork();
    if (pid < 0) {
      printf("error fork: %s\n", strerror(errno));
      continue;
    }
    if (pid == 0) {
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, 1);
      execv(argv[1], argv + 1);
      _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    double ms = NowMs() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      printf("error %s: exit status %d\n", argv[1], status);
    else
      printf("%.6f\n", ms);
  }
}
