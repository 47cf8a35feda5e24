/* mcpcell: the launcher. A small static C program (musl: no glibc start-up, whose CPU
 * feature probing alone costs ~0.2 ms of cpuid exits on a virtual machine) that runs one
 * thing itself, the common case of `mcpcell run -- CMD` when a `mcpcell pool` is on the
 * socket, and execs `mcpcell-front` (next to it, the C++ front: run, pool, doctor, and
 * mcpcell-server for the rest) with the same arguments for everything else.
 *
 * It handles a run only when every option is one it knows exactly as the front parses
 * it (--state-dir, --pool, -e/--env, --cwd, --timeout) and no cell option is given (the
 * pool's cells must be of the default shape: MCPCELL_DEFAULT_CELL_KEY). Anything else,
 * no pool there, or a pool that declines: the front, which behaves as it always did. The
 * pooled run does what the front's RunInPool does (tools/cmd_run.cc, the same protocol,
 * tools/cell_pool.h): SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked at once, one that
 * comes before the request means the command is not run (128+N), later ones are sent to
 * the command's process group once it runs; the exit status is the command's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tools/launcher/pool_reply.h"

enum { kMaxFrame = 128 * 1024, kMaxEnv = 256 };

static const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "INT";
    case SIGTERM:
      return "TERM";
    case SIGHUP:
      return "HUP";
    case SIGQUIT:
      return "QUIT";
    default:
      return "?";
  }
}

/* Execs mcpcell-front with our arguments; with `no_pool`, "--no-pool" after "run" (the
 * pool was tried already). Returns only on failure (exit 127 then). */
static int ExecFront(int argc, char** argv, int no_pool) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof "-front");
  if (n <= 0) {
    fprintf(stderr, "mcpcell: readlink(/proc/self/exe): %s\n", strerror(errno));
    return 127;
  }
  memcpy(path + n, "-front", sizeof "-front");
  char** args = calloc((size_t)argc + 2, sizeof *args);
  if (args == NULL) return 127;
  int k = 0;
  for (int i = 0; i < argc; ++i) {
    args[k++] = argv[i];
    if (i == 1 && no_pool) args[k++] = "--no-pool";
  }
  args[k] = NULL;
  execv(path, args);
  const int err = errno;
  free(args);
  fprintf(stderr, "mcpcell: cannot run %s: %s\n", path, strerror(err));
  return 127;
}

struct run {
  const char* state_dir;
  const char* pool;
  const char* cwd;
  const char* env[kMaxEnv];
  int env_count;
  double timeout_s;
  int have_state_dir, have_pool, have_cwd, have_timeout;
  char** command;
  int command_count;
};

/* `--name value` or `--name=value` at argv[*i]; 1 and advances *i when it is `name`.
 * (A short option's `-e=value` is not CLI11's syntax: the caller takes `-e` alone.) */
static int OptionValue(int argc, char** argv, int* i, const char* name, const char** value) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return 0;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return 1;
  }
  if (argv[*i][n] != '\0' || *i + 1 >= argc) return 0;
  *value = argv[++*i];
  return 1;
}

/* 1 when every argument after "run" is understood here (see the top). */
static int ParseRun(int argc, char** argv, struct run* r) {
  memset(r, 0, sizeof *r);
  for (int i = 2; i < argc; ++i) {
    const char* v = NULL;
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      r->command = argv + i + 1;
      r->command_count = argc - i - 1;
      return r->command_count > 0;
    }
    if (OptionValue(argc, argv, &i, "--state-dir", &v)) {
      if (r->have_state_dir++ || v[0] == '\0' || v[0] == '-') return 0;
      r->state_dir = v;
    } else if (OptionValue(argc, argv, &i, "--pool", &v)) {
      if (r->have_pool++ || v[0] == '\0' || v[0] == '-') return 0;
      r->pool = v;
    } else if (OptionValue(argc, argv, &i, "--cwd", &v)) {
      if (r->have_cwd++ || v[0] == '-') return 0;
      r->cwd = v;
    } else if (OptionValue(argc, argv, &i, "--timeout", &v)) {
      char* end = NULL;
      errno = 0;
      double t = strtod(v, &end);
      /* Plain decimal only ("2", "0.5", "1e3"); what else the front accepts, it handles. */
      if (r->have_timeout++ || !((v[0] >= '0' && v[0] <= '9') || v[0] == '.') ||
          strpbrk(v, "xX") != NULL || *end != '\0' || errno != 0 || !isfinite(t) || t > 1e9)
        return 0;
      r->timeout_s = t;
    } else if ((strcmp(a, "-e") == 0 && OptionValue(argc, argv, &i, "-e", &v)) ||
               OptionValue(argc, argv, &i, "--env", &v)) {
      /* Not KEY=VALUE: the front says so. */
      if (v[0] == '-' || v[0] == '=' || strchr(v, '=') == NULL || r->env_count == kMaxEnv) return 0;
      r->env[r->env_count++] = v;
    } else {
      return 0;
    }
  }
  return 0; /* no "--": the front explains the usage */
}

/* The state dir when none is given (sandbox::DefaultStateDir). */
static void DefaultStateDir(char* out, size_t size) {
  const char* dir = getenv("MCPCELL_STATE_DIR");
  if (dir != NULL && *dir) {
    snprintf(out, size, "%s", dir);
  } else if (geteuid() == 0) {
    snprintf(out, size, "/run/mcpcell");
  } else if ((dir = getenv("XDG_RUNTIME_DIR")) != NULL && *dir) {
    snprintf(out, size, "%s/mcpcell", dir);
  } else {
    snprintf(out, size, "/tmp/mcpcell-%u", (unsigned)geteuid());
  }
}

struct frame {
  char data[kMaxFrame + 1];
  size_t size;
  int overflow;
};

static void Append(struct frame* f, const char* s, size_t n) {
  if (f->overflow || kMaxFrame - f->size < n) {
    f->overflow = 1;
    return;
  }
  memcpy(f->data + f->size, s, n);
  f->size += n;
}

static void AppendText(struct frame* f, const char* s) { Append(f, s, strlen(s)); }

/* A JSON string; 0 when `s` is not UTF-8 (the front then makes its own cell). */
static int AppendString(struct frame* f, const char* s) {
  size_t n = strlen(s);
  if (!IsJsonSafeUtf8(s, n)) return 0;
  Append(f, "\"", 1);
  for (size_t i = 0; i < n; ++i) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') {
      char esc[2] = {'\\', (char)ch};
      Append(f, esc, 2);
    } else if (ch < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", ch);
      Append(f, esc, 6);
    } else {
      Append(f, (const char*)&ch, 1);
    }
  }
  Append(f, "\"", 1);
  return 1;
}

static int AppendStrings(struct frame* f, const char* const* items, int count) {
  AppendText(f, "[");
  for (int i = 0; i < count; ++i) {
    if (i > 0) AppendText(f, ",");
    if (!AppendString(f, items[i])) return 0;
  }
  AppendText(f, "]");
  return 1;
}

static int SendFrame(int fd, const char* data, size_t size, const int* fds, int nfds) {
  struct iovec iov = {(void*)data, size};
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    memset(&control, 0, sizeof control);
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
  }
  ssize_t sent;
  do {
    sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == (ssize_t)size ? 0 : -1;
}

static void SendSignal(int fd, int sig) {
  char text[64];
  int n = snprintf(text, sizeof text, "{\"op\":\"signal\",\"signo\":%d}", sig);
  (void)SendFrame(fd, text, (size_t)n, NULL, 0);
}

static int ExitForError(long err) {
  if (err == ENOENT) return 127;
  return (err == EACCES || err == ENOEXEC || err == EISDIR) ? 126 : 125;
}

static int NotRun(int sig) {
  fprintf(stderr, "mcpcell run: SIG%s before the command started; it was not run\n",
          SignalName(sig));
  return 128 + sig;
}

static struct frame request;

int main(int argc, char** argv) {
  struct run r;
  if (argc < 3 || strcmp(argv[1], "run") != 0 || !ParseRun(argc, argv, &r))
    return ExecFront(argc, argv, 0);

  /* From here a signal is either forwarded or makes the run end unstarted, never lost;
   * the mask and anything pending survive an exec of the front. */
  sigset_t forwarded;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  sigaddset(&forwarded, SIGHUP);
  sigaddset(&forwarded, SIGQUIT);
  sigprocmask(SIG_BLOCK, &forwarded, NULL);

  char state_dir[PATH_MAX];
  if (r.have_state_dir)
    snprintf(state_dir, sizeof state_dir, "%s", r.state_dir);
  else
    DefaultStateDir(state_dir, sizeof state_dir);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  int n = r.have_pool ? snprintf(addr.sun_path, sizeof addr.sun_path, "%s", r.pool)
                      : snprintf(addr.sun_path, sizeof addr.sun_path, "%s/pool.sock", state_dir);
  if (n < 0 || (size_t)n >= sizeof addr.sun_path) return ExecFront(argc, argv, 0);
  int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (sock < 0) return ExecFront(argc, argv, 0);
  if (connect(sock, (struct sockaddr*)&addr, sizeof addr) != 0) {
    /* No pool, a stale socket or another user's: the front's own cell, quietly. Anything
     * else, or a pool named with --pool: the front tries again and says why. */
    int quiet = !r.have_pool && (errno == ENOENT || errno == ECONNREFUSED || errno == EACCES);
    close(sock);
    return ExecFront(argc, argv, quiet);
  }
  const struct timespec now = {0, 0};
  int early = sigtimedwait(&forwarded, NULL, &now);
  if (early > 0) return NotRun(early);

  /* The request, as PoolClient::Run builds it. */
  const char* env[kMaxEnv + 1];
  int env_count = 0;
  const char* term = getenv("TERM");
  char term_entry[4096];
  if (term != NULL && *term) {
    if ((size_t)snprintf(term_entry, sizeof term_entry, "TERM=%s", term) >= sizeof term_entry)
      return ExecFront(argc, argv, 1);
    env[env_count++] = term_entry;
  }
  for (int i = 0; i < r.env_count; ++i) env[env_count++] = r.env[i];
  int fds[3], nfds = 0, have[3];
  for (int fd = 0; fd < 3; ++fd) {
    have[fd] = fcntl(fd, F_GETFD) >= 0;
    if (have[fd]) fds[nfds++] = fd;
  }
  char number[64];
  AppendText(&request, "{\"op\":\"exec\",\"cell\":\"" MCPCELL_DEFAULT_CELL_KEY "\",\"argv\":");
  int ok = AppendStrings(&request, (const char* const*)r.command, r.command_count);
  AppendText(&request, ",\"env\":");
  ok = ok && AppendStrings(&request, env, env_count);
  AppendText(&request, ",\"cwd\":");
  ok = ok && AppendString(&request, r.have_cwd ? r.cwd : "");
  snprintf(number, sizeof number, ",\"timeout_ms\":%lld,\"stdio\":[%s,%s,%s]}",
           (long long)(r.timeout_s * 1000), have[0] ? "true" : "false", have[1] ? "true" : "false",
           have[2] ? "true" : "false");
  AppendText(&request, number);
  /* Not UTF-8, too large, or the pool gone: the front's own cell, as the front would. */
  if (!ok || request.overflow || SendFrame(sock, request.data, request.size, fds, nfds) != 0) {
    close(sock);
    return ExecFront(argc, argv, 1);
  }

  int sfd = signalfd(-1, &forwarded, SFD_CLOEXEC | SFD_NONBLOCK);
  int started = 0, pending = 0;
  static char reply[kMaxFrame + 1];
  for (;;) {
    struct pollfd p[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) {
      fprintf(stderr, "mcpcell run: poll: %s\n", strerror(errno));
      return 125;
    }
    struct signalfd_siginfo info;
    while (sfd >= 0 && read(sfd, &info, sizeof info) == (ssize_t)sizeof info)
      pending = (int)info.ssi_signo;
    if (started && pending != 0) {
      SendSignal(sock, pending);
      pending = 0;
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    union {
      char buf[CMSG_SPACE(16 * sizeof(int))];
      struct cmsghdr align;
    } control;
    struct iovec iov = {reply, sizeof reply};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    ssize_t got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0 && errno == EINTR) continue;
    /* Fds are never part of an answer: closed. */
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int extra;
        memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof extra);
        close(extra);
      }
    }
    if (got <= 0 || (msg.msg_flags & MSG_TRUNC)) {
      char what[256];
      if (got == 0)
        snprintf(what, sizeof what, "the pool closed the connection before the command %s",
                 started ? "ended (the pool stopped or crashed)" : "started");
      else
        snprintf(what, sizeof what, "reading from the pool: %s",
                 got < 0 ? strerror(errno) : "a frame too large");
      if (!started) {
        /* Not started: as when the pool declines (the front's own cell). */
        if (pending != 0) return NotRun(pending);
        if (r.have_pool) fprintf(stderr, "mcpcell run: not using the pool: %s\n", what);
        close(sock);
        return ExecFront(argc, argv, 1);
      }
      fprintf(stderr, "mcpcell run: %s\n", what);
      return 125;
    }
    struct pool_reply ev;
    char why[256];
    if (ParsePoolReply(reply, (size_t)got, &ev, why, sizeof why) != 0) {
      fprintf(stderr, "mcpcell run: the pool sent a bad frame: %s\n", why);
      return 125;
    }
    if (ev.event == POOL_EVENT_STARTED) {
      started = 1;
      if (pending != 0) {
        SendSignal(sock, pending);
        pending = 0;
      }
    } else if (ev.event == POOL_EVENT_EXITED) {
      if (ev.timed_out)
        fprintf(stderr, "mcpcell run: timed out after %.3g s, killed\n", r.timeout_s);
      if (ev.oom_killed) fprintf(stderr, "mcpcell run: the cell ran out of memory (OOM kill)\n");
      if (ev.timed_out) return 124;
      return ev.signaled ? 128 + (int)ev.signo : (int)ev.exit_code;
    } else if (ev.event == POOL_EVENT_ERROR) {
      const char* message =
          ev.has_message ? ev.message : "the pool sent an error without a message";
      if (ev.fallback && !started) {
        if (pending != 0) return NotRun(pending);
        if (r.have_pool) fprintf(stderr, "mcpcell run: not using the pool: %s\n", message);
        close(sock);
        return ExecFront(argc, argv, 1);
      }
      fprintf(stderr, "mcpcell run: %s\n", message);
      return ExitForError(ev.err);
    }
    /* Other events are for later versions: ignored. */
  }
}
