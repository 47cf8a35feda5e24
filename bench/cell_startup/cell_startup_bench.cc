// cell_startup_bench: how long a fresh cell costs, next to bubblewrap and the bare command.
//
// The commands of every round run, in an order that rotates per round so that none always
// runs first (cold caches) or right after another: `/bin/true` and
// `/usr/bin/python3 -c 'print(1)'`, each bare, under `mcpcell run`, and under `bwrap` with
// an equivalent layout (new user/mount/pid/net/ipc/uts/cgroup namespaces, read-only /usr
// with the usual symlinks, /etc, private /proc, minimal /dev, tmpfs /tmp and /run, a
// /workspace cwd, uid 1000, no capabilities). Each run's wall time is measured from
// posix_spawn to waitpid; stdout goes to /dev/null. Prints medians, p90 and the ratios the
// issue sets as targets: mcpcell /bin/true <= 0.7x bwrap, mcpcell python <= 1.15x bare
// python, pooled python <= 1.2x bare python (the python rows say how much a cell adds to a
// real, if small, program).
//
// --baseline PATH adds two rows, the same commands under another `mcpcell run` (an older
// build, with its own mcpcell-init next to it), so a change is measured side by side with
// what it replaces, in the same rounds.
//
// Two more rows run the same commands in one warm cell through CellChannel::Exec, the way
// an MCP session uses its cell for every call after the first: they show the per-call
// cost of a cell apart from its creation.
//
// Two more, `pooled true` and `pooled python`, run `mcpcell run` against a `mcpcell pool
// --size 2` the bench starts in a state dir of its own: each run takes a fresh cell the
// pool made ahead (never used before, destroyed after the run). Before and after each
// pooled run the bench waits until the pool is full again, so neither that run nor the
// next row shares the CPUs with a cell being made or destroyed: the rows say what a run
// costs when the pool is at rest (runs at least ~10 ms apart here). That pool warms its
// cells as `mcpcell pool` does by default (python3 started once in each); `pooled py cold`
// runs python against a second pool started with --no-warm. The `mcpcell` rows pass
// --no-pool: a cell of the run's own, always.
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/linux/overlay.h"

extern char** environ;

namespace {

struct Config {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> ms;
  std::function<double()> run;  // set for in-process configurations (warm cell)
};

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string p(buf, n > 0 ? n : 0);
  return p.substr(0, p.rfind('/'));
}

std::vector<std::string> Bwrap(std::vector<std::string> cmd) {
  std::vector<std::string> argv = {"bwrap",
                                   "--unshare-all",
                                   "--die-with-parent",
                                   "--new-session",
                                   "--ro-bind",
                                   "/usr",
                                   "/usr",
                                   "--symlink",
                                   "usr/bin",
                                   "/bin",
                                   "--symlink",
                                   "usr/lib",
                                   "/lib",
                                   "--symlink",
                                   "usr/lib64",
                                   "/lib64",
                                   "--symlink",
                                   "usr/sbin",
                                   "/sbin",
                                   "--ro-bind",
                                   "/etc",
                                   "/etc",
                                   "--proc",
                                   "/proc",
                                   "--dev",
                                   "/dev",
                                   "--tmpfs",
                                   "/tmp",
                                   "--tmpfs",
                                   "/run",
                                   "--dir",
                                   "/workspace",
                                   "--chdir",
                                   "/workspace",
                                   "--hostname",
                                   "cell",
                                   "--uid",
                                   "1000",
                                   "--gid",
                                   "1000",
                                   "--cap-drop",
                                   "ALL",
                                   "--"};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

// Wall time of one run of `args` in ms; exits the benchmark if the command fails (a
// failing configuration would otherwise look fast).
double SpawnAndWait(const std::string& name, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    std::fprintf(stderr, "%s: spawn %s: %s\n", name.c_str(), argv[0], std::strerror(err));
    std::exit(1);
  }
  int status;
  waitpid(pid, &status, 0);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s: command failed (status %d)\n", name.c_str(), status);
    std::exit(1);
  }
  return ms;
}

double RunOnce(const Config& c) { return c.run ? c.run() : SpawnAndWait(c.name, c.argv); }

// The bench's own `mcpcell pool`s: stopped at any exit (a failed row exits at once), so no
// pool and no cell of theirs outlives the bench. SIGTERM: a pool destroys its cells and socket.
std::vector<pid_t> g_pool_pids;
void StopPools() {
  for (pid_t pid : g_pool_pids) kill(pid, SIGTERM);
  for (pid_t pid : g_pool_pids) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  g_pool_pids.clear();
}

// How many cells the `mcpcell pool` on `socket` has ready ({"op":"status"}), -1 if it
// does not answer.
int PoolReady(const std::string& socket) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
  int ready = -1;
  const char request[] = R"({"op":"status"})";
  char reply[4096];
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request, sizeof request - 1, MSG_NOSIGNAL) > 0) {
    ssize_t n = ::recv(fd, reply, sizeof reply - 1, 0);
    reply[n > 0 ? n : 0] = '\0';
    if (const char* p = std::strstr(reply, "\"ready\":")) ready = std::atoi(p + 8);
  }
  ::close(fd);
  return ready;
}

// Waits until the pool has `size` cells ready again (its refill after the last run), so
// that neither the measured run nor the next configuration shares the CPUs with a cell
// being made or destroyed.
void WaitForFullPool(const std::string& socket, int size) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (PoolReady(socket) < size) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "the pool on %s did not fill up within 30 s\n", socket.c_str());
      std::exit(1);
    }
    usleep(2000);
  }
  usleep(2000);  // its last destroy's deferred work (RCU callbacks) settles
}

constexpr int kPoolSize = 2;

// Starts `mcpcell pool --size kPoolSize EXTRA...` in a state dir of its own (its log next to
// it) and waits until it is full; returns the state dir.
std::string StartPool(const std::string& mcpcell, const std::vector<std::string>& extra) {
  char state_template[] = "/tmp/mcpcell-bench-pool-XXXXXX";
  if (mkdtemp(state_template) == nullptr) {
    std::fprintf(stderr, "mkdtemp: %s\n", std::strerror(errno));
    std::exit(1);
  }
  const std::string state = state_template;
  std::vector<std::string> args = {mcpcell, "pool",   "--state-dir",
                                   state,   "--size", std::to_string(kPoolSize)};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> pargv;
  for (std::string& a : args) pargv.push_back(a.data());
  pargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, (state + ".log").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, pargv[0], &actions, nullptr, pargv.data(), environ) != 0) {
    std::fprintf(stderr, "could not start %s pool\n", mcpcell.c_str());
    std::exit(1);
  }
  posix_spawn_file_actions_destroy(&actions);
  g_pool_pids.push_back(pid);
  WaitForFullPool(state + "/pool.sock", kPoolSize);
  return state;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 30;
  std::string mcpcell = SelfDir() + "/mcpcell";
  std::string baseline;  // another mcpcell (an older build, say) run in the same rounds
  int settle_ms = 0;     // a pause before each measured run
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--mcpcell" && i + 1 < argc) {
      mcpcell = argv[++i];
    } else if (a == "--baseline" && i + 1 < argc) {
      baseline = argv[++i];
    } else if (a == "--settle-ms" && i + 1 < argc) {
      settle_ms = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds N] [--mcpcell PATH] [--baseline PATH] [--settle-ms N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  const std::vector<std::string> t = {"/bin/true"};
  const std::vector<std::string> py = {"/usr/bin/python3", "-c", "print(1)"};
  auto run = [&](std::vector<std::string> cmd, const std::string& bin) {
    std::vector<std::string> v = {bin, "run", "--"};
    if (bin == mcpcell) v.insert(v.begin() + 2, "--no-pool");  // a cell of its own, always
    v.insert(v.end(), cmd.begin(), cmd.end());
    return v;
  };
  // One warm cell for the in-process rows, in a temp state dir removed at the end.
  char state_template[] = "/tmp/mcpcell-bench-XXXXXX";
  const std::string state = mkdtemp(state_template) ? state_template : "";
  namespace sb = mcpcell::sandbox;
  sb::CellSpec spec = sb::DefaultCellSpec(sb::GenerateCellId(), state);
  auto skeleton = sb::PrepareHostTemplate(state);
  if (skeleton.ok()) spec.rootfs.skeleton_dir = *skeleton;
  sb::CellCreateOptions create;
  create.init_path = SelfDir() + "/mcpcell-init";
  auto cell = sb::Cell::Create(spec, create);
  if (!cell.ok()) {
    std::fprintf(stderr, "warm cell: %s\n", cell.error().message.c_str());
    return 1;
  }
  auto warm = [&](std::vector<std::string> cmd) {
    return [&cell, cmd] {
      sb::ExecOptions o;
      o.argv = cmd;
      const auto start = std::chrono::steady_clock::now();
      auto r = (*cell)->channel().Exec(o);
      if (!r.ok() || r->exit_code != 0) {
        std::fprintf(stderr, "warm cell exec failed: %s\n",
                     r.ok() ? r->err.data.c_str() : r.error().message.c_str());
        std::exit(1);
      }
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
          .count();
    };
  };
  // `mcpcell pool`s of the bench's own, for the pooled rows: `mcpcell run --state-dir S`
  // finds one on S/pool.sock and takes a fresh cell made ahead of the run. The first warms
  // its cells as `mcpcell pool` does by default (python3 started once in each); the
  // second does not, to show what that warm-up is worth.
  std::atexit(StopPools);
  const std::string pool_state = StartPool(mcpcell, {});
  const std::string cold_pool_state = StartPool(mcpcell, {"--no-warm"});
  auto pooled = [&](std::vector<std::string> cmd, std::string name, const std::string& dir) {
    std::vector<std::string> v = {mcpcell, "run", "--state-dir", dir, "--"};
    v.insert(v.end(), cmd.begin(), cmd.end());
    return [v, name, socket = dir + "/pool.sock"] {
      WaitForFullPool(socket, kPoolSize);
      const double ms = SpawnAndWait(name, v);
      WaitForFullPool(socket, kPoolSize);  // its destroy and refill, outside any row
      return ms;
    };
  };
  std::vector<Config> configs = {
      {"bare true", t, {}, {}},
      {"mcpcell true", run(t, mcpcell), {}, {}},
      {"bwrap true", Bwrap(t), {}, {}},
      {"bare python", py, {}, {}},
      {"mcpcell python", run(py, mcpcell), {}, {}},
      {"bwrap python", Bwrap(py), {}, {}},
      {"warm-cell true", {}, {}, warm(t)},
      {"warm-cell python", {}, {}, warm(py)},
      {"pooled true", {}, {}, pooled(t, "pooled true", pool_state)},
      {"pooled python", {}, {}, pooled(py, "pooled python", pool_state)},
      {"pooled py cold", {}, {}, pooled(py, "pooled py cold", cold_pool_state)}};
  if (!baseline.empty()) {
    configs.push_back({"baseline true", run(t, baseline), {}, {}});  // index 11
    configs.push_back({"baseline python", run(py, baseline), {}, {}});
  }
  for (Config& c : configs) RunOnce(c);  // warm-up: template, page cache
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + r) % configs.size()];
      if (settle_ms > 0) usleep(static_cast<useconds_t>(settle_ms) * 1000);
      c.ms.push_back(RunOnce(c));
    }
  }
  std::printf("%-16s %10s %10s   (%d rounds, interleaved)\n", "config", "median ms", "p90 ms",
              rounds);
  for (const Config& c : configs) {
    std::printf("%-16s %10.2f %10.2f\n", c.name.c_str(), Percentile(c.ms, 0.5),
                Percentile(c.ms, 0.9));
  }
  auto median = [&](size_t i) { return Percentile(configs[i].ms, 0.5); };
  std::printf("\nratios of medians\n");
  std::printf("  mcpcell true   / bwrap true   = %.2f  (target <= 0.70)\n", median(1) / median(2));
  std::printf("  mcpcell true   / bare true    = %.2f\n", median(1) / median(0));
  std::printf("  mcpcell python / bare python  = %.2f  (target <= 1.15)\n", median(4) / median(3));
  std::printf("  mcpcell python / bwrap python = %.2f\n", median(4) / median(5));
  std::printf("  bwrap true     / bare true    = %.2f\n", median(2) / median(0));
  std::printf("  warm-cell true / bare true    = %.2f  (per call in an existing cell)\n",
              median(6) / median(0));
  std::printf("  warm-cell python / bare python = %.2f  (per call in an existing cell)\n",
              median(7) / median(3));
  std::printf(
      "  pooled true    / bwrap true   = %.2f  (target <= 0.70; a fresh cell the pool made)\n",
      median(8) / median(2));
  std::printf("  pooled python  / bare python  = %.2f  (target <= 1.2)\n", median(9) / median(3));
  std::printf("  pooled py cold / bare python  = %.2f  (a pool without warm-up: --no-warm)\n",
              median(10) / median(3));
  std::printf("  pooled true    / bare true    = %.2f\n", median(8) / median(0));
  if (!baseline.empty()) {
    std::printf("  mcpcell true   / baseline true   = %.2f  (%s)\n", median(1) / median(11),
                baseline.c_str());
    std::printf("  mcpcell python / baseline python = %.2f\n", median(4) / median(12));
    std::printf("  baseline true  / bwrap true      = %.2f\n", median(11) / median(2));
  }
  (void)(*cell)->Destroy();
  std::filesystem::remove_all(state);
  StopPools();
  for (const std::string& dir : {pool_state, cold_pool_state}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".log");
  }
  return 0;
}
