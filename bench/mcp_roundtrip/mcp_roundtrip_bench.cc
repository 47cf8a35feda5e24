// mcp_roundtrip_bench: what an MCP tool call costs, next to doing the same thing bare.
//
// It starts `mcpcell serve` over pipes (the way Claude Desktop does), speaks JSON-RPC to
// it directly, and measures, interleaved round by round (in an order rotated each round)
// so that machine noise hits every row alike:
//   warm  run_command "true" in an existing session   vs  bare posix_spawn of
//                                                           `/bin/sh -c true` (what the
//                                                           call runs: the baseline), of
//                                                           /bin/true,
//                                                           and fork()+execv of it from a
//                                                           small process (the helper
//                                                           mcp_roundtrip_forkexec) and
//                                                           from this bench
//   `/bin/sh -c true` exec'd in a cell of the bench's own through CellChannel::Exec, in
//   process: the sandbox's part of the round trip without MCP, so the difference is MCP's
//   warm  run_code python print(1) in that session    vs  bare python3 -c 'print(1)'
//   warm  run_command "python3 -c 'print(1)'" (what run_code adds over run_command)
//   first call of a new session (initialize done; cell creation included) vs bare /bin/true
// and prints p50, p95 and the ratios the targets name: round trip <= 1.5x a bare
// posix_spawn of `/bin/sh -c true`, first call <= bare + 10 ms, python <= 1.2x bare.
//
// With --baseline PATH (another build's mcpcell), a second server of that build gets the
// same warm calls in the same rounds, so two builds are compared under the same noise
// (this machine's timings drift by 2x within minutes when other work runs).
//
// With --policy-a FILE --policy-b FILE, only that: this build as two servers, one under
// each policy, warm run_command calls interleaved round by round, reported as b/a at p50
// and p95 (e.g. [audit] enabled = false as a, the default as b: what auditing costs).
//
// --python-every N runs the python pair every N rounds (default 4; 0: never), e.g. to
// profile the server over warm run_command calls alone.
//
// Two more sections, after the interleaved rounds:
//   --idle-rounds N (default 40), --idle-ms M (default 20): a warm call and a bare spawn
//     each after M ms of sleep, the cadence of an agent (calls seconds apart), where every
//     CPU has gone idle and the first wake-up of each thread and CPU costs more.
//   --cpu-calls N (default 2000): N warm calls back to back, then N bare spawns, and the
//     CPU time each process spent per call (threads' run time from
//     /proc/PID/task/*/schedstat; cell init's reaped children from /proc/PID/stat; the
//     bare programs from getrusage(RUSAGE_CHILDREN)). Where the round trip's time goes,
//     without a profiler in the way. 0: skipped.
//
// Usage: mcp_roundtrip_bench [--rounds N] [--fresh N] [--python-every N] [--idle-rounds N]
//                            [--idle-ms M] [--cpu-calls N] [--mcpcell PATH] [--baseline PATH]
//                            [--policy-a FILE --policy-b FILE]
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/linux/overlay.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A null-terminated argv pointing into `cmd`, which must outlive it.
std::vector<char*> ArgvOf(std::vector<std::string>& cmd) {
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// A child with its stdin and stdout on pipes (`to` and `from` get the bench's ends) and
// stderr to /dev/null. Throws naming the program when it cannot be started.
pid_t SpawnOnPipes(std::vector<std::string> cmd, int& to, int& from) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC)) throw std::runtime_error("pipe");
  if (pipe2(out, O_CLOEXEC)) {
    close(in[0]);
    close(in[1]);
    throw std::runtime_error("pipe");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv = ArgvOf(cmd);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    throw std::runtime_error("spawn " + cmd[0] + ": " + std::strerror(rc));
  }
  to = in[1];
  from = out[0];
  return pid;
}

// One `mcpcell serve` child over pipes.
class Server {
 public:
  // `policy`: the server's --policy file ("": its default).
  Server(const std::string& binary, const std::string& state_dir, const std::string& policy = "") {
    std::vector<std::string> cmd = {binary, "serve", "--state-dir", state_dir};
    if (!policy.empty()) cmd.insert(cmd.end(), {"--policy", policy});
    pid_ = SpawnOnPipes(std::move(cmd), to_, from_);
    Request("initialize", {{"protocolVersion", "2025-06-18"},
                           {"capabilities", Json::object()},
                           {"clientInfo", {{"name", "bench"}, {"version", "1"}}}});
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  ~Server() {
    close(to_);
    int status;
    waitpid(pid_, &status, 0);
    close(from_);
  }
  Json Request(const std::string& method, Json params) {
    int id = next_id_++;
    Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    for (;;) {
      Json m = Json::parse(ReadLine());
      if (m.contains("id") && m["id"] == id) {
        if (m.contains("error")) throw std::runtime_error(m["error"].dump());
        return m["result"];
      }
    }
  }
  pid_t pid() const { return pid_; }
  Json Call(const std::string& tool, Json args) {
    Json r = Request("tools/call", {{"name", tool}, {"arguments", std::move(args)}});
    if (r.value("isError", false)) throw std::runtime_error(tool + ": " + r.dump());
    return r;
  }

 private:
  void Send(const Json& m) {
    std::string line = m.dump() + "\n";
    if (write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("write to server");
  }
  std::string ReadLine() {
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      char chunk[65536];
      ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) throw std::runtime_error("server closed stdout");
      buf_.append(chunk, n);
    }
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 1;
  std::string buf_;
};

double SpawnAndWait(std::vector<std::string> cmd) {
  std::vector<char*> argv = ArgvOf(cmd);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  auto t0 = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("spawn " + cmd[0]);
  int status;
  waitpid(pid, &status, 0);
  auto t1 = Clock::now();
  posix_spawn_file_actions_destroy(&fa);
  return Ms(t1 - t0);
}

// The same with fork() and execv(), the words taken literally. fork() copies the
// bench's page tables, so this is slower than posix_spawn (clone with CLONE_VM |
// CLONE_VFORK); the target is checked against posix_spawn, the stricter of the two.
double ForkExecAndWait(std::vector<std::string> cmd) {
  std::vector<char*> argv = ArgvOf(cmd);
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  return Ms(Clock::now() - t0);
}

// The same from a small process: mcp_roundtrip_forkexec (forkexec_helper.c) beside the
// bench, started once, times one fork()+execv()+waitpid per byte it is sent. A bare
// fork+exec as a small program does it, without this bench's big page tables.
class SmallForkExec {
 public:
  SmallForkExec(const std::string& helper, const std::string& program) {
    int from = -1;
    pid_ = SpawnOnPipes({helper, program}, to_, from);
    from_ = fdopen(from, "r");
    if (!from_) close(from);  // Once() then says the helper does not answer
  }
  ~SmallForkExec() {
    close(to_);  // EOF ends the helper
    if (from_) fclose(from_);
    int status;
    waitpid(pid_, &status, 0);
  }
  SmallForkExec(const SmallForkExec&) = delete;
  SmallForkExec& operator=(const SmallForkExec&) = delete;
  double Once() {
    char line[256];
    if (write(to_, "x", 1) != 1 || !from_ || !fgets(line, sizeof line, from_))
      throw std::runtime_error("mcp_roundtrip_forkexec stopped answering");
    char* end = nullptr;
    double ms = std::strtod(line, &end);
    if (end == line || ms <= 0)
      throw std::runtime_error(std::string("mcp_roundtrip_forkexec: ") + line);
    return ms;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

struct Row {
  std::string name;
  std::vector<double> ms;
  double Pct(double p) const {
    if (ms.empty()) return std::nan("");  // a row not run (--fresh 0, --python-every 0)
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
  }
};

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  return std::filesystem::path(buf).parent_path();
}

// Run time so far of every thread of process `pid`, in ms: the first field of each
// /proc/PID/task/TID/schedstat (nanoseconds, exact, unlike /proc/PID/stat's clock ticks).
// A thread that ended no longer counts; the server's pool threads live as long as it does.
double ThreadsRunMs(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) throw std::runtime_error("cannot open " + dir);
  uint64_t ns = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/schedstat");
    uint64_t run = 0;
    if (f >> run) ns += run;
  }
  closedir(d);
  return static_cast<double>(ns) / 1e6;
}

// The fields of /proc/PID/stat after the command name (which may hold spaces), from
// field 3 (state) on.
std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) throw std::runtime_error("unreadable /proc/PID/stat");
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string x; rest >> x;) fields.push_back(x);
  if (fields.size() < 15) throw std::runtime_error("short /proc/PID/stat");
  return fields;
}

// CPU time of the reaped children of `pid` (cutime + cstime), in ms: for cell init, the
// programs it ran, each with its set-up between clone and execve.
double ReapedChildrenMs(pid_t pid) {
  std::vector<std::string> f = StatFields(pid);
  const double ticks = std::stod(f[13]) + std::stod(f[14]);  // fields 16 and 17
  return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The cell inits the server started (its children named mcpcell-init): the session's and
// the warm pool's spare, which runs nothing.
std::vector<pid_t> CellInitsOf(pid_t server) {
  std::vector<pid_t> inits;
  const std::string dir = "/proc/" + std::to_string(server) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) throw std::runtime_error("cannot open " + dir);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream children(dir + "/" + e->d_name + "/children");
    for (pid_t child; children >> child;) {
      std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
      std::string name;
      if (std::getline(comm, name) && name == "mcpcell-init") inits.push_back(child);
    }
  }
  closedir(d);
  if (inits.empty()) throw std::runtime_error("found no cell init among the server's children");
  return inits;
}

double ChildrenRusageMs() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

void SleepMs(int ms) {
  timespec t{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// One warm call's time, split: per call, the wall time and the CPU of each process.
struct CpuSplit {
  double wall = 0, client = 0, server = 0, init = 0, programs = 0;
};

// `calls` warm calls back to back, then `calls` bare spawns of `bare_cmd`. cell init's
// programs include each one's set-up between clone and execve; the bare programs include
// posix_spawn's child side. The bench is the client on both sides.
void MeasureCpuSplit(Server& server, int calls, const Json& args,
                     const std::vector<std::string>& bare_cmd, CpuSplit& warm, CpuSplit& bare) {
  const pid_t self = getpid();
  const std::vector<pid_t> inits = CellInitsOf(server.pid());
  auto inits_own = [&] {
    double ms = 0;
    for (pid_t p : inits) ms += ThreadsRunMs(p);
    return ms;
  };
  auto inits_children = [&] {
    double ms = 0;
    for (pid_t p : inits) ms += ReapedChildrenMs(p);
    return ms;
  };
  const double n = calls;
  double client0 = ThreadsRunMs(self), server0 = ThreadsRunMs(server.pid());
  double init0 = inits_own(), programs0 = inits_children();
  auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) server.Call("run_command", args);
  warm.wall = Ms(Clock::now() - t0) / n;
  warm.client = (ThreadsRunMs(self) - client0) / n;
  warm.server = (ThreadsRunMs(server.pid()) - server0) / n;
  warm.init = (inits_own() - init0) / n;
  warm.programs = (inits_children() - programs0) / n;
  client0 = ThreadsRunMs(self);
  programs0 = ChildrenRusageMs();
  t0 = Clock::now();
  for (int i = 0; i < calls; ++i) SpawnAndWait(bare_cmd);
  bare.wall = Ms(Clock::now() - t0) / n;
  bare.client = (ThreadsRunMs(self) - client0) / n;
  bare.programs = (ChildrenRusageMs() - programs0) / n;
}

// A count given on the command line: a whole number from 0 to 10 million, else exits 2
// naming the flag and what was wrong.
int CountFlag(const std::string& flag, const char* text) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > 10'000'000) {
    std::fprintf(stderr,
                 "mcp_roundtrip_bench: %s: \"%s\" is not a whole number from 0 to 10000000\n",
                 flag.c_str(), text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

// Lines in `<state_dir>/audit/audit.jsonl` (0 when there is none): the trail records a
// server wrote, to show what each side of a comparison audits.
size_t TrailLines(const std::string& state_dir) {
  std::ifstream f(state_dir + "/audit/audit.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

// --policy-a A --policy-b B: the SAME binary as two servers, each with its own state dir
// under `state_dir`, one under each policy; every round makes one warm run_command call to
// each, in alternating order, so the machine's noise hits both alike. Prints p50/p95 of
// both and b/a at each, and the trail records each server wrote per call.
void ComparePolicies(const std::string& binary, const std::string& state_dir,
                     const std::string& policy_a, const std::string& policy_b, int rounds) {
  const std::string dir_a = state_dir + "/a", dir_b = state_dir + "/b";
  // The cells' own uids must be able to pass through the parent (mkdtemp made it 0700).
  if (chmod(state_dir.c_str(), 0711) != 0)
    throw std::runtime_error("chmod " + state_dir + ": " + std::strerror(errno));
  std::filesystem::create_directories(dir_a);
  std::filesystem::create_directories(dir_b);
  const Json kTrueArgs = {{"command", "true"}};
  Row a{"a: run_command true (warm)", {}}, b{"b: run_command true (warm)", {}};
  size_t lines_a = 0, lines_b = 0;
  {
    Server server_a(binary, dir_a, policy_a), server_b(binary, dir_b, policy_b);
    for (int i = 0; i < 20; ++i) {  // cells created and paths warm before timing
      server_a.Call("run_command", kTrueArgs);
      server_b.Call("run_command", kTrueArgs);
    }
    lines_a = TrailLines(dir_a);
    lines_b = TrailLines(dir_b);
    auto timed = [&](Server& s, Row& row) {
      auto t0 = Clock::now();
      s.Call("run_command", kTrueArgs);
      row.ms.push_back(Ms(Clock::now() - t0));
    };
    for (int i = 0; i < rounds; ++i) {
      if (i % 2 == 0) {
        timed(server_a, a);
        timed(server_b, b);
      } else {
        timed(server_b, b);
        timed(server_a, a);
      }
    }
    lines_a = TrailLines(dir_a) - lines_a;
    lines_b = TrailLines(dir_b) - lines_b;
  }
  std::printf("a = %s\nb = %s\n\n", policy_a.c_str(), policy_b.c_str());
  std::printf("%-36s %9s %9s %6s %14s\n", "", "p50 ms", "p95 ms", "n", "records/call");
  for (auto [r, lines] : {std::pair{&a, lines_a}, std::pair{&b, lines_b}})
    std::printf("%-36s %9.3f %9.3f %6zu %14.2f\n", r->name.c_str(), r->Pct(0.5), r->Pct(0.95),
                r->ms.size(), rounds ? static_cast<double>(lines) / rounds : 0.0);
  std::printf("  b / a                            %.3fx (p50), %.3fx (p95)\n",
              b.Pct(0.5) / a.Pct(0.5), b.Pct(0.95) / a.Pct(0.95));
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200, fresh = 20, python_every = 4, idle_rounds = 40, idle_ms = 20, cpu_calls = 2000;
  std::string binary = SelfDir() + "/mcpcell";
  std::string baseline, policy_a, policy_b;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 == argc) {
      std::fprintf(stderr, "mcp_roundtrip_bench: %s needs a value\n", flag.c_str());
      return 2;
    }
    if (flag == "--rounds")
      rounds = CountFlag(flag, argv[i + 1]);
    else if (flag == "--fresh")
      fresh = CountFlag(flag, argv[i + 1]);
    else if (flag == "--python-every")
      python_every = CountFlag(flag, argv[i + 1]);
    else if (flag == "--idle-rounds")
      idle_rounds = CountFlag(flag, argv[i + 1]);
    else if (flag == "--idle-ms")
      idle_ms = CountFlag(flag, argv[i + 1]);
    else if (flag == "--cpu-calls")
      cpu_calls = CountFlag(flag, argv[i + 1]);
    else if (flag == "--mcpcell")
      binary = argv[i + 1];
    else if (flag == "--baseline")
      baseline = argv[i + 1];
    else if (flag == "--policy-a")
      policy_a = argv[i + 1];
    else if (flag == "--policy-b")
      policy_b = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--rounds N] [--fresh N] [--python-every N] [--idle-rounds N] "
                   "[--idle-ms M] [--cpu-calls N] [--mcpcell PATH] [--baseline PATH] "
                   "[--policy-a FILE --policy-b FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  // A server or helper that died must come back as a write error the bench reports (and
  // cleans up after), not as SIGPIPE killing it silently with its state dir left behind.
  std::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/mcpcell-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "mcp_roundtrip_bench: mkdtemp(%s): %s\n", tmpl, std::strerror(errno));
    return 1;
  }
  const std::string state_dir = tmpl;
  if (policy_a.empty() != policy_b.empty()) {
    std::fprintf(stderr, "mcp_roundtrip_bench: --policy-a and --policy-b go together\n");
    std::filesystem::remove_all(state_dir);
    return 2;
  }
  if (!policy_a.empty()) {
    try {
      ComparePolicies(binary, state_dir, policy_a, policy_b, rounds);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mcp_roundtrip_bench: %s\n", e.what());
      std::filesystem::remove_all(state_dir);
      return 1;
    }
    std::filesystem::remove_all(state_dir);
    return 0;
  }
  int status = 0;
  try {
    Row warm{"run_command true (warm session)", {}}, bare{"bare posix_spawn /bin/true", {}};
    Row bare_sh{"bare posix_spawn /bin/sh -c true", {}};
    Row bare_fork{"bare fork()+execv (this bench)", {}};
    Row small_fork{"bare fork()+execv (small process)", {}};
    Row py{"run_code python print(1) (warm)", {}}, bare_py{"bare python3 -c print(1)", {}};
    Row cmd_py{"run_command python3 -c print(1)", {}};
    Row first{"first call of a new session", {}};
    const std::vector<std::string> kTrue = {"/bin/true"};
    const std::vector<std::string> kShTrue = {"/bin/sh", "-c", "true"};
    const std::vector<std::string> kPy = {"/usr/bin/python3", "-c", "print(1)"};
    Row base_warm{"baseline: run_command true (warm)", {}};
    Row base_py{"baseline: run_code python (warm)", {}};
    Server server(binary, state_dir);
    server.Call("run_command", {{"command", "true"}});  // creates the cell
    std::unique_ptr<Server> base;
    if (!baseline.empty()) {
      base = std::make_unique<Server>(baseline, state_dir);
      base->Call("run_command", {{"command", "true"}});
    }
    // The sandbox's part alone: `/bin/sh -c true` exec'd in a cell of the bench's own (the
    // default shape), in process through CellChannel::Exec, which the server's tools call,
    // with the server's exec options (a timeout, output to a callback): everything of a warm
    // call but MCP (JSON-RPC over stdio, the session, the tool's arguments and result).
    // Where the bench may not make cells of its own, the row says why and the rest runs.
    namespace sb = mcpcell::sandbox;
    std::unique_ptr<sb::Cell> cell;
    std::string cell_error;
    {
      sb::CellSpec spec = sb::DefaultCellSpec(sb::GenerateCellId(), state_dir);
      auto skeleton = sb::PrepareHostTemplate(state_dir);
      if (skeleton.ok()) {
        spec.rootfs.skeleton_dir = *skeleton;
        sb::CellCreateOptions create;
        create.init_path = SelfDir() + "/mcpcell-init";
        auto made = sb::Cell::Create(spec, create);
        if (made.ok())
          cell = std::move(*made);
        else
          cell_error = made.error().message;
      } else {
        cell_error = skeleton.error().message;
      }
    }
    Row cell_exec{"cell exec sh -c true (no MCP)", {}};
    auto cell_exec_once = [&] {
      if (!cell) return;
      sb::ExecOptions o;
      o.argv = {"/bin/sh", "-c", "true"};
      o.timeout = std::chrono::seconds(60);
      o.keep_bytes = 0;
      o.on_output = [](sb::OutputStream, std::string_view) {};
      auto t0 = Clock::now();
      auto r = cell->channel().Exec(o);
      cell_exec.ms.push_back(Ms(Clock::now() - t0));
      if (!r.ok() || r->exit_code != 0)
        throw std::runtime_error(
            "exec in the bench's own cell failed: " +
            (r.ok() ? "exit code " + std::to_string(r->exit_code) : r.error().message));
    };
    std::unique_ptr<SmallForkExec> small;
    std::string small_error;
    try {
      small = std::make_unique<SmallForkExec>(SelfDir() + "/mcp_roundtrip_forkexec", kTrue[0]);
      small->Once();  // the helper's first pays for first touches
    } catch (const std::exception& e) {
      small.reset();
      small_error = e.what();
    }
    cell_exec_once();  // its first exec pays for first touches, not a round's
    cell_exec.ms.clear();
    auto timed = [](Server& s, const char* tool, const Json& args, Row& row) {
      auto t0 = Clock::now();
      s.Call(tool, args);
      row.ms.push_back(Ms(Clock::now() - t0));
    };
    const Json kTrueArgs = {{"command", "true"}};
    const Json kPyArgs = {{"language", "python"}, {"code", "print(1)"}};
    const Json kCmdPyArgs = {{"command", "python3 -c 'print(1)'"}};
    // Each round measures every row once, in an order rotated round by round: whatever
    // runs first in a round comes right after the last round's python runs (caches and
    // branch predictors full of python), and a fixed order made that always the same row
    // (the warm call: 0.3-0.4 ms slower there than in other rounds, the bare spawn less).
    // Rotation keeps the cyclic order, so each row always follows the same one: the warm
    // call follows the last row of the list (the small process's fork+exec when the helper
    // runs), never the cell exec (which would warm the kernel's paths through a cell for it).
    std::vector<std::function<void()>> fast = {
        [&] { timed(server, "run_command", kTrueArgs, warm); },
        [&] { bare.ms.push_back(SpawnAndWait(kTrue)); }, cell_exec_once,
        [&] { bare_sh.ms.push_back(SpawnAndWait(kShTrue)); },
        [&] { bare_fork.ms.push_back(ForkExecAndWait(kTrue)); }};
    if (base) fast.push_back([&] { timed(*base, "run_command", kTrueArgs, base_warm); });
    if (small) fast.push_back([&] { small_fork.ms.push_back(small->Once()); });
    std::vector<std::function<void()>> slow = {
        [&] { timed(server, "run_code", kPyArgs, py); },
        [&] { bare_py.ms.push_back(SpawnAndWait(kPy)); },
        [&] { timed(server, "run_command", kCmdPyArgs, cmd_py); }};
    if (base) slow.push_back([&] { timed(*base, "run_code", kPyArgs, base_py); });
    int python_rounds = 0;
    for (int i = 0; i < rounds; ++i) {
      for (size_t k = 0; k < fast.size(); ++k) fast[(i + k) % fast.size()]();
      if (python_every > 0 && i % python_every == 0) {
        for (size_t k = 0; k < slow.size(); ++k) slow[(python_rounds + k) % slow.size()]();
        ++python_rounds;
      }
    }
    // The bench's own cell is done with; its clean-up is checked, not left to ~Cell.
    if (cell) {
      if (auto destroyed = cell->Destroy(); !destroyed.ok()) {
        std::fprintf(stderr, "mcp_roundtrip_bench: the bench's own cell was not cleaned up: %s\n",
                     destroyed.error().message.c_str());
        status = 1;
      }
    }
    // An agent's cadence: every CPU idle before each measurement.
    Row idle_warm{"run_command true (warm session)", {}};
    Row idle_bare{"bare posix_spawn /bin/true", {}};
    for (int i = 0; i < idle_rounds; ++i) {
      for (int k = 0; k < 2; ++k) {
        SleepMs(idle_ms);
        if ((i + k) % 2 == 0)
          timed(server, "run_command", kTrueArgs, idle_warm);
        else
          idle_bare.ms.push_back(SpawnAndWait(kTrue));
      }
    }
    // Where a warm call's time goes: per call, the wall time and each process's CPU.
    CpuSplit cpu_warm, cpu_bare;
    std::string cpu_error;  // why the split could not be made; the rest is still printed
    if (cpu_calls > 0) {
      try {
        MeasureCpuSplit(server, cpu_calls, kTrueArgs, kTrue, cpu_warm, cpu_bare);
      } catch (const std::exception& e) {
        cpu_error = e.what();
      }
    }
    base.reset();
    Row base_first{"baseline: first call of a new session", {}};
    for (int i = 0; i < fresh; ++i) {
      {
        Server s(binary, state_dir);
        timed(s, "run_command", kTrueArgs, first);
      }
      if (!baseline.empty()) {
        Server s(baseline, state_dir);
        timed(s, "run_command", kTrueArgs, base_first);
      }
    }
    std::printf("%-36s %9s %9s %6s\n", "", "p50 ms", "p95 ms", "n");
    small.reset();
    for (const Row* r : {&warm, &cell_exec, &bare_sh, &bare, &bare_fork, &small_fork, &py, &bare_py,
                         &cmd_py, &first})
      std::printf("%-36s %9.2f %9.2f %6zu\n", r->name.c_str(), r->Pct(0.5), r->Pct(0.95),
                  r->ms.size());
    std::printf("\nratios (p50):\n");
    std::printf("  round trip / spawn sh -c true   %.2fx  (target <= 1.5x)\n",
                warm.Pct(0.5) / bare_sh.Pct(0.5));
    std::printf("  round trip / bare posix_spawn   %.2fx  (of /bin/true)\n",
                warm.Pct(0.5) / bare.Pct(0.5));
    if (!small_fork.ms.empty())
      std::printf(
          "  round trip / small fork()+execv %.2fx  (the target's words: a small process's)\n",
          warm.Pct(0.5) / small_fork.Pct(0.5));
    else
      std::printf("  round trip / small fork()+execv: not measured: %s\n", small_error.c_str());
    std::printf(
        "  round trip / this bench's fork  %.2fx  (fork copies this big process's page tables)\n",
        warm.Pct(0.5) / bare_fork.Pct(0.5));
    if (cell)
      std::printf(
          "  cell exec (no MCP) / bare spawn %.2fx  (MCP's part: %+.2f ms of the round trip)\n",
          cell_exec.Pct(0.5) / bare.Pct(0.5), warm.Pct(0.5) - cell_exec.Pct(0.5));
    else
      std::printf("  cell exec (no MCP): not measured: the bench's own cell: %s\n",
                  cell_error.c_str());
    if (!py.ms.empty()) {
      std::printf("  run_code python / bare python   %.2fx  (target <= 1.2x)\n",
                  py.Pct(0.5) / bare_py.Pct(0.5));
      std::printf("  run_command python / bare python %.2fx\n", cmd_py.Pct(0.5) / bare_py.Pct(0.5));
    }
    std::printf("  first call - bare /bin/true     %+.2f ms (target <= +10 ms)\n",
                first.Pct(0.5) - bare.Pct(0.5));
    if (idle_rounds > 0) {
      std::printf("\nafter %d ms of idle before each:     %9s %9s %6s\n", idle_ms, "p50 ms",
                  "p95 ms", "n");
      for (const Row* r : {&idle_warm, &idle_bare})
        std::printf("%-36s %9.2f %9.2f %6zu\n", r->name.c_str(), r->Pct(0.5), r->Pct(0.95),
                    r->ms.size());
      std::printf("  round trip / bare posix_spawn   %.2fx\n",
                  idle_warm.Pct(0.5) / idle_bare.Pct(0.5));
    }
    if (cpu_calls > 0 && !cpu_error.empty()) {
      std::printf("\nper call, back to back: not measured: %s\n", cpu_error.c_str());
    } else if (cpu_calls > 0) {
      std::printf("\nper call, %d back to back (ms):      %7s %7s %7s %7s %9s\n", cpu_calls, "wall",
                  "client", "server", "init", "programs");
      std::printf("%-36s %7.3f %7.3f %7.3f %7.3f %9.3f\n", "run_command true (warm session)",
                  cpu_warm.wall, cpu_warm.client, cpu_warm.server, cpu_warm.init,
                  cpu_warm.programs);
      std::printf("%-36s %7.3f %7.3f %7s %7s %9.3f\n", "bare posix_spawn /bin/true", cpu_bare.wall,
                  cpu_bare.client, "-", "-", cpu_bare.programs);
      std::printf("%-36s %+7.3f %+7.3f %+7.3f %+7.3f %+9.3f\n", "  difference",
                  cpu_warm.wall - cpu_bare.wall, cpu_warm.client - cpu_bare.client, cpu_warm.server,
                  cpu_warm.init, cpu_warm.programs - cpu_bare.programs);
      std::printf("  round trip / bare posix_spawn   %.2fx (wall, back to back)\n",
                  cpu_warm.wall / cpu_bare.wall);
    }
    if (!baseline.empty()) {
      std::printf("\nbaseline %s, same rounds:\n", baseline.c_str());
      for (const Row* r : {&base_warm, &base_py, &base_first})
        std::printf("%-36s %9.2f %9.2f %6zu\n", r->name.c_str(), r->Pct(0.5), r->Pct(0.95),
                    r->ms.size());
      std::printf("  baseline round trip / bare      %.2fx\n", base_warm.Pct(0.5) / bare.Pct(0.5));
      std::printf("  baseline python / bare python   %.2fx\n", base_py.Pct(0.5) / bare_py.Pct(0.5));
      std::printf("  round trip this / baseline      %.2fx (p50), %.2fx (p95)\n",
                  warm.Pct(0.5) / base_warm.Pct(0.5), warm.Pct(0.95) / base_warm.Pct(0.95));
      std::printf("  first call this - baseline      %+.2f ms (p50)\n",
                  first.Pct(0.5) - base_first.Pct(0.5));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcp_roundtrip_bench: %s\n", e.what());
    std::filesystem::remove_all(state_dir);
    return 1;
  }
  std::filesystem::remove_all(state_dir);
  return status;
}
