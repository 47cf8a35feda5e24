// `mcpcell run` as a user runs it: the real binary, a fresh cell per command in a temp
// state dir, stdio passed through, the command's exit status (or 128+signal, 124 on
// timeout, 127 when not found) as its own, the timings breakdown, and nothing left behind
// in the state dir or the mount table afterwards.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd_passing.h"

#ifndef MCPCELL_BIN
#error "MCPCELL_BIN must name the mcpcell executable"
#endif

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

struct Outcome {
  int status = -1;  // exit status of mcpcell
  std::string out, err;
};

// A started program: its pid and the parent's ends of its stdin, stdout and stderr.
struct Started {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
};

// Forks and execs argv (argv[0] a path) with its stdio on fresh pipes.
// `pending_signal`: the program starts with that signal blocked and already pending (both
// survive execve), as if it had come at the very start.
Started Start(std::vector<std::string> args, int pending_signal = 0) {
  int in[2], out[2], err[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC) | pipe2(out, O_CLOEXEC) | pipe2(err, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    if (pending_signal != 0) {
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, pending_signal);
      sigprocmask(SIG_BLOCK, &one, nullptr);
      kill(getpid(), pending_signal);  // process-directed, as from a terminal or supervisor
    }
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(99);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  return {pid, in[1], out[0], err[0]};
}

// Reads a started program's stdout and stderr to their ends (closing them), then waits for
// it: its output and status (1000+N when signal N killed it). Its stdin is the caller's.
Outcome Collect(const Started& child) {
  Outcome o;
  pollfd fds[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0 && poll(fds, 2, 60000) > 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? o.out : o.err).append(buf, n);
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  EXPECT_EQ(waitpid(child.pid, &status, 0), child.pid);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  return o;
}

// Runs argv (argv[0] a path) with `input` on its stdin; collects its status and output.
Outcome RunProgram(std::vector<std::string> args, const std::string& input = "") {
  Started child = Start(std::move(args));
  ssize_t ignored = write(child.in, input.data(), input.size());
  (void)ignored;
  close(child.in);
  return Collect(child);
}

// Runs `mcpcell run --state-dir <state> <args...>` with `input` on its stdin.
Outcome RunMcpcell(const std::string& state, std::vector<std::string> args,
                   const std::string& input = "") {
  args.insert(args.begin(), {MCPCELL_BIN, "run", "--state-dir", state});
  return RunProgram(args, input);
}

// The pool key of `profile`'s cells in `state` (run_pool::PoolKey): the spec `mcpcell policy
// check` prints, after its first line.
std::string PolicyCheckSpec(const std::string& state, const std::string& profile = "default") {
  Outcome check = RunProgram({MCPCELL_BIN, "policy", "check", profile, "--state-dir", state});
  EXPECT_EQ(check.status, 0) << check.err;
  const size_t first = check.out.find('\n');
  return first == std::string::npos ? "" : check.out.substr(first + 1);
}

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-run-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_ = tmpl;
  }
  void TearDown() override {
    // Nothing of any cell may remain: no cell dir, no mount under the state dir.
    std::error_code ec;
    const auto cells = state_ + "/cells";
    if (std::filesystem::exists(cells)) {
      EXPECT_TRUE(std::filesystem::is_empty(cells)) << "a cell dir survived mcpcell run";
    }
    std::ifstream mountinfo("/proc/self/mountinfo");
    std::string line;
    while (std::getline(mountinfo, line)) {
      EXPECT_THAT(line, ::testing::Not(HasSubstr(state_ + "/cells/"))) << "leftover mount";
    }
    std::filesystem::remove_all(state_, ec);
  }
  Outcome Run(std::vector<std::string> args, const std::string& input = "") {
    return RunMcpcell(state_, std::move(args), input);
  }
  std::string state_;
};

TEST_F(RunTest, ExitStatusAndStdioPassThrough) {
  Outcome o = Run({"--", "/bin/sh", "-c", "cat; echo to-err >&2; exit 7"}, "from stdin\n");
  EXPECT_EQ(o.status, 7) << o.err;
  EXPECT_EQ(o.out, "from stdin\n");
  EXPECT_THAT(o.err, ::testing::EndsWith("to-err\n"));
  // Unprivileged, what is not enforced is said on stderr, never skipped silently.
  if (geteuid() != 0) {
    EXPECT_THAT(o.err, HasSubstr("warning: limits not enforced"));
  }
  o = Run({"--", "/bin/sh", "-c", "id -un; pwd; hostname"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, ::testing::StartsWith("sandbox\n/workspace\ncell-"));
}

TEST_F(RunTest, SignalsTimeoutsAndMissingCommands) {
  EXPECT_EQ(Run({"--", "/bin/sh", "-c", "kill -9 $$"}).status, 128 + 9);
  const auto start = std::chrono::steady_clock::now();
  Outcome t = Run({"--timeout", "0.5", "--", "/bin/sh", "-c", "sleep 100 & sleep 100"});
  EXPECT_EQ(t.status, 124);
  EXPECT_THAT(t.err, HasSubstr("timed out"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  Outcome missing = Run({"--", "no-such-command"});
  EXPECT_EQ(missing.status, 127);
  EXPECT_THAT(missing.err, HasSubstr("not found in PATH"));
  Outcome bad = Run({"--memory", "lots", "--", "/bin/true"});
  EXPECT_EQ(bad.status, 125);
  EXPECT_THAT(bad.err, HasSubstr("--memory"));
  bad = Run({"--disk", "0", "--", "/bin/true"});
  EXPECT_EQ(bad.status, 125);
  EXPECT_THAT(bad.err, HasSubstr("--disk"));
}

// A terminal's SIGINT or a supervisor's SIGTERM reaches only `mcpcell run` (the command
// runs in cell init's session): it is forwarded to the command's process group, and the
// run ends with the command's 128+N.
TEST_F(RunTest, SignalsToTheRunReachTheCommand) {
  for (int sig : {SIGTERM, SIGINT}) {
    Started run = Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c",
                         "echo ready; exec sleep 100"});
    close(run.in);
    std::string out;
    char buf[64];
    pollfd pfd = {run.out, POLLIN, 0};
    while (out.find("ready\n") == std::string::npos && poll(&pfd, 1, 30000) > 0) {
      ssize_t n = read(run.out, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ASSERT_EQ(out, "ready\n") << "the command did not start";
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(run.pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(run.pid, &status, 0), run.pid);
    EXPECT_LT(std::chrono::steady_clock::now() - sent, 10s) << "not forwarded: waited for sleep";
    ASSERT_TRUE(WIFEXITED(status)) << "mcpcell run itself died of signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    close(run.out);
    close(run.err);
  }
}

// A signal that comes while the cell is being made (before the command could start) ends
// the run without starting the command: started and signalled at once, it would run for
// a moment (and a command that ignores SIGINT would run on).
TEST_F(RunTest, ASignalBeforeTheCommandStartsMeansItNeverRuns) {
  const std::string host_ws = state_ + "-early";
  std::filesystem::create_directories(host_ws);
  ::chmod(host_ws.c_str(), 0777);
  Started run = Start({MCPCELL_BIN, "run", "--state-dir", state_, "--workspace", host_ws, "--",
                       "/bin/sh", "-c", "touch /workspace/ran"},
                      SIGTERM);
  close(run.in);
  std::string err;
  char buf[256];
  ssize_t n;
  while ((n = read(run.err, buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(n));
  int status = 0;
  ASSERT_EQ(waitpid(run.pid, &status, 0), run.pid);
  ASSERT_TRUE(WIFEXITED(status)) << "mcpcell run itself died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << err;
  EXPECT_THAT(err, HasSubstr("SIGTERM before the command started; it was not run"));
  EXPECT_FALSE(std::filesystem::exists(host_ws + "/ran")) << "the command ran";
  close(run.out);
  close(run.err);
  std::filesystem::remove_all(host_ws);
}

TEST_F(RunTest, TimingsListEveryStep) {
  Outcome o = Run({"--timings", "--", "/bin/true"});
  ASSERT_EQ(o.status, 0) << o.err;
  for (const char* step : {"clone", "id_maps", "rootfs", "pivot_root", "seccomp_compile", "ready",
                           "create total", "exec", "destroy"}) {
    EXPECT_THAT(o.err, HasSubstr(step)) << o.err;
  }
}

// The fresh workspace is a tmpfs of --disk's size, not a directory of the host.
TEST_F(RunTest, TheFreshWorkspaceIsASizedTmpfs) {
  Outcome o = Run({"--disk", "8M", "--", "/bin/sh", "-c",
                   "stat -f -c '%T %b %S' /workspace; ls -a /workspace | wc -l; "
                   "head -c 9000000 /dev/zero > /workspace/big; echo rc=$?"});
  EXPECT_EQ(o.status, 0) << o.err;
  std::istringstream lines(o.out);
  std::string type, blocks, size, entries, rc;
  lines >> type >> blocks >> size >> entries >> rc;
  EXPECT_EQ(type, "tmpfs") << o.out;
  EXPECT_EQ(std::stoull(blocks) * std::stoull(size), 8ull << 20) << o.out;
  EXPECT_EQ(entries, "2") << "a fresh workspace is empty: " << o.out;
  EXPECT_EQ(rc, "rc=1") << "writing past --disk fails (ENOSPC): " << o.out << o.err;
  EXPECT_THAT(o.err, HasSubstr("No space left on device"));
  // With a host directory, that directory is the workspace.
  const std::string host_ws = state_ + "-ws";
  std::filesystem::create_directories(host_ws);
  ::chmod(host_ws.c_str(), 0777);
  o = Run({"--workspace", host_ws, "--", "/bin/sh", "-c", "echo hi > /workspace/f"});
  EXPECT_EQ(o.status, 0) << o.err;
  std::ifstream f(host_ws + "/f");
  std::string word;
  f >> word;
  EXPECT_EQ(word, "hi");
  std::filesystem::remove_all(host_ws);
}

TEST_F(RunTest, EachRunGetsAFreshCell) {
  ASSERT_EQ(Run({"--", "/bin/sh", "-c", "echo x > /tmp/mark; echo y > /workspace/mark"}).status, 0);
  Outcome o = Run({"--", "/bin/sh", "-c", "ls /tmp /workspace"});
  EXPECT_EQ(o.status, 0);
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("mark")));
}

// One executable has every command.
TEST(RunCommandLineTest, HelpListsEveryCommand) {
  Outcome help = RunProgram({MCPCELL_BIN, "--help"});
  ASSERT_EQ(help.status, 0) << help.err;
  for (const char* command : {"run", "pool", "doctor", "serve", "policy"}) {
    EXPECT_THAT(help.out, HasSubstr(std::string("\n  ") + command + " ")) << help.out;
  }
  Outcome serve = RunProgram({MCPCELL_BIN, "serve", "--help"});
  EXPECT_EQ(serve.status, 0) << serve.err;
  EXPECT_THAT(serve.out, HasSubstr("--http"));
  Outcome bad = RunProgram({MCPCELL_BIN, "policy", "check", "/nonexistent/p.toml"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("mcpcell policy check: "));
  EXPECT_THAT(bad.err, HasSubstr("/nonexistent/p.toml"));
}

// ---- mcpcell pool: cells made ahead for `mcpcell run` (run_pool/server.h) ----

// Reads `fd` until `want` has arrived or 30 s passed.
std::string ReadUntil(int fd, const std::string& want) {
  std::string got;
  char buf[256];
  pollfd pfd = {fd, POLLIN, 0};
  while (got.find(want) == std::string::npos && poll(&pfd, 1, 30000) > 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// One raw frame to the pool on `socket` (with `fds` attached), and its first answer; ""
// when it closed without one.
std::string PoolExchange(const std::string& socket, const std::string& frame,
                         std::vector<int> fds = {}) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed: " + std::string(strerror(errno));
  }
  std::string reply;
  auto sent = mcpcell::SendWithFds(
      fd, std::span(reinterpret_cast<const uint8_t*>(frame.data()), frame.size()), fds,
      "the pool socket");
  if (sent.ok()) {
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) reply.assign(buf, static_cast<size_t>(n));
    // The answer is JSON: its strings' \" read as " for the matchers.
    for (size_t at = 0; (at = reply.find("\\\"", at)) != std::string::npos; ++at)
      reply.erase(at, 1);
  } else {
    reply = "send failed: " + sent.error().message;
  }
  close(fd);
  return reply;
}

// A `mcpcell pool --size 1` of the test's own, in the fixture's temp state dir.
class PoolRunTest : public RunTest {
 protected:
  void SetUp() override {
    RunTest::SetUp();
    socket_ = state_ + "/pool.sock";
    std::vector<std::string> args = {MCPCELL_BIN, "pool", "--state-dir", state_, "--size", "1"};
    for (std::string& a : PoolArgs()) args.push_back(std::move(a));
    pool_ = Start(args);
    close(pool_.in);
    WaitUntilReady(1);
  }
  void TearDown() override {
    if (pool_.pid > 0) StopPool();
    RunTest::TearDown();  // no cell dir, no mount left
  }
  // Stops the pool (SIGTERM); it must exit 0, its socket gone.
  void StopPool() {
    ASSERT_EQ(kill(pool_.pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pool_.pid, &status, 0), pool_.pid);
    pool_log_ += ReadUntil(pool_.err, "\x01");  // the rest, to its end
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << pool_log_;
    EXPECT_FALSE(std::filesystem::exists(socket_)) << "the pool left its socket";
    close(pool_.out);
    close(pool_.err);
    pool_.pid = -1;
  }
  // More arguments for `mcpcell pool`.
  virtual std::vector<std::string> PoolArgs() { return {}; }
  std::string Status() { return PoolExchange(socket_, R"({"op":"status"})"); }
  // Waits until the pool has `ready` cells ready and, when `served` >= 0, has served that
  // many runs (a run's cell is destroyed before it counts).
  void WaitUntilReady(int ready, int served = -1) {
    const std::string want = "\"ready\":" + std::to_string(ready);
    const std::string want_served = "\"served\":" + std::to_string(served);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::string s;
    while (std::chrono::steady_clock::now() < deadline) {
      s = Status();
      if (s.find(want) != std::string::npos &&
          (served < 0 || s.find(want_served) != std::string::npos))
        return;
      usleep(10000);
    }
    FAIL() << "the pool never reached " << want << " " << want_served << ": " << s;
  }
  // Cell dirs under the state dir now.
  size_t CellDirs() {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(state_ + "/cells")) {
      (void)e;
      ++n;
    }
    return n;
  }
  std::string socket_;
  Started pool_;
  std::string pool_log_;
};

TEST_F(PoolRunTest, ARunTakesAReadyCellWithItsStdioAndStatus) {
  Outcome o = Run({"--timings", "-e", "GREETING=hello", "--", "/bin/sh", "-c",
                   "cat; echo to-err >&2; id -un; pwd; echo \"$GREETING\"; exit 7"},
                  "from stdin\n");
  EXPECT_EQ(o.status, 7) << o.err;
  EXPECT_EQ(o.out, "from stdin\nsandbox\n/workspace\nhello\n");
  EXPECT_THAT(o.err, HasSubstr("to-err\n"));
  EXPECT_THAT(o.err, HasSubstr("was made ahead by the pool on " + socket_)) << o.err;
  EXPECT_THAT(o.err, ::testing::Not(HasSubstr("create total"))) << "made its own cell";
  // The run's cell destroyed, one made in its place: one cell dir, the ready one.
  WaitUntilReady(1, 1);
  EXPECT_EQ(CellDirs(), 1u);
}

// A pooled run takes a ready cell whatever else it asks for (--timings here); the pool's
// cells are the default policy's, as `mcpcell policy check default` prints them.
TEST_F(PoolRunTest, APooledRunTakesAReadyCellWithOrWithoutOtherOptions) {
  EXPECT_THAT(Status(), HasSubstr("\"cell\":" + nlohmann::json(PolicyCheckSpec(state_)).dump()));
  for (const bool timings : {false, true}) {
    std::vector<std::string> args = {MCPCELL_BIN, "run", "--state-dir", state_};
    if (timings) args.push_back("--timings");
    for (const char* a : {"--", "/bin/sh", "-c", "echo up; read x; true"}) args.push_back(a);
    Started run = Start(args);
    ASSERT_EQ(ReadUntil(run.out, "up\n"), "up\n");
    char exe[4096] = {};
    ASSERT_GT(readlink(("/proc/" + std::to_string(run.pid) + "/exe").c_str(), exe, sizeof exe - 1),
              0);
    EXPECT_THAT(exe, ::testing::EndsWith("/mcpcell"));
    close(run.in);
    Outcome o = Collect(run);
    EXPECT_EQ(o.status, 0) << o.err;
    if (timings) {
      EXPECT_THAT(o.err, HasSubstr("was made ahead by the pool")) << o.err;
    }
  }
  WaitUntilReady(1, 2);
}

// Without --warm the pool starts python3 once in every cell it makes, when there is one.
TEST_F(PoolRunTest, ThePoolSaysWhichWarmUpItRuns) {
  ASSERT_EQ(Run({"--", "/bin/true"}).status, 0);
  WaitUntilReady(1, 1);
  StopPool();
  const bool python =
      access("/usr/bin/python3", X_OK) == 0 || access("/usr/local/bin/python3", X_OK) == 0;
  EXPECT_THAT(pool_log_, HasSubstr(python ? "warm-up: python3 -c pass\n" : "warm-up: none\n"))
      << pool_log_;
  EXPECT_THAT(pool_log_, ::testing::Not(HasSubstr("exited"))) << "the warm-up failed";
}

// --warm: each command runs once, in order, in every cell before it is handed out (what it
// leaves is there for the run); one that fails is logged once, and cells are still used.
class WarmedPoolRunTest : public PoolRunTest {
 protected:
  std::vector<std::string> PoolArgs() override {
    return {"--warm", "echo one >> /tmp/warmed", "--warm", "echo two >> /tmp/warmed; exit 3"};
  }
};

TEST_F(WarmedPoolRunTest, EveryCellRunsTheWarmUpsOnceAndAFailingOneIsLoggedOnce) {
  for (int i = 0; i < 2; ++i) {
    Outcome o = Run({"--timings", "--", "/bin/cat", "/tmp/warmed"});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "one\ntwo\n") << "run " << i;
    EXPECT_THAT(o.err, HasSubstr("was made ahead by the pool")) << o.err;
  }
  WaitUntilReady(1, 2);  // three cells made, each warmed
  StopPool();
  const std::string failed = "warm-up \"echo two >> /tmp/warmed; exit 3\" exited 3";
  size_t count = 0;
  for (size_t at = pool_log_.find(failed); at != std::string::npos;
       at = pool_log_.find(failed, at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << pool_log_;
  EXPECT_THAT(pool_log_, HasSubstr("warm-up: echo one >> /tmp/warmed; echo two")) << pool_log_;
}

TEST_F(RunTest, PoolWarmUpOptionsAreChecked) {
  Outcome both =
      RunProgram({MCPCELL_BIN, "pool", "--state-dir", state_, "--warm", "true", "--no-warm"});
  EXPECT_NE(both.status, 0);
  EXPECT_THAT(both.err, HasSubstr("--no-warm")) << both.err;
  Outcome empty = RunProgram({MCPCELL_BIN, "pool", "--state-dir", state_, "--warm", ""});
  EXPECT_EQ(empty.status, 1);
  EXPECT_THAT(empty.err, HasSubstr("--warm: an empty command")) << empty.err;
  EXPECT_FALSE(std::filesystem::exists(state_ + "/pool.sock"));
}

TEST_F(PoolRunTest, EveryRunGetsAFreshCellAndMissingCommandsAreNamed) {
  ASSERT_EQ(Run({"--", "/bin/sh", "-c", "echo x > /tmp/mark; echo y > /workspace/mark"}).status, 0);
  Outcome o = Run({"--", "/bin/sh", "-c", "ls /tmp /workspace"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("mark")));
  Outcome missing = Run({"--", "no-such-command"});
  EXPECT_EQ(missing.status, 127);
  EXPECT_THAT(missing.err, HasSubstr("not found in PATH"));
  Outcome t = Run({"--timeout", "0.5", "--", "/bin/sh", "-c", "sleep 100 & sleep 100"});
  EXPECT_EQ(t.status, 124);
  EXPECT_THAT(t.err, HasSubstr("timed out"));
  WaitUntilReady(1, 4);
}

// A run whose cell options are not the pool's, or that names a host workspace, makes its
// own cell and says why with --timings.
TEST_F(PoolRunTest, OtherCellOptionsMakeACellOfTheirOwn) {
  Outcome o = Run({"--timings", "--memory", "256M", "--", "/bin/true"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("not using the pool: this pool makes cells of another spec: the "
                               "run wants \"limits.memory_max_bytes: 268435456 (256MiB)\", the "
                               "pool's cells have \"limits.memory_max_bytes: 1073741824 (1GiB)\""));
  EXPECT_THAT(o.err, HasSubstr("create total"));
  o = Run({"--timings", "--no-pool", "--", "/bin/true"});
  EXPECT_THAT(o.err, HasSubstr("create total"));
  EXPECT_THAT(Status(), HasSubstr("\"served\":0"));
}

TEST_F(PoolRunTest, SignalsReachTheCommandAndARunThatDiesHasItsCommandKilled) {
  Started run = Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c",
                       "trap 'exit 42' TERM; echo ready; sleep 100 & wait"});
  close(run.in);
  ASSERT_EQ(ReadUntil(run.out, "ready\n"), "ready\n");
  ASSERT_EQ(kill(run.pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(run.pid, &status, 0), run.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << status;
  close(run.out);
  close(run.err);
  WaitUntilReady(1, 1);

  // A run killed outright (SIGKILL, nothing forwarded): the pool sees its connection close
  // and kills the command; the cell goes, a fresh one takes its place.
  run = Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c",
               "echo ready; exec sleep 100.25"});
  close(run.in);
  ASSERT_EQ(ReadUntil(run.out, "ready\n"), "ready\n");
  ASSERT_EQ(kill(run.pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(run.pid, &status, 0), run.pid);
  close(run.out);
  close(run.err);
  WaitUntilReady(1, 2);
  EXPECT_EQ(CellDirs(), 1u);
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(e.path() / "cmdline");
    std::string text;
    std::getline(cmdline, text);
    EXPECT_THAT(text, ::testing::Not(HasSubstr("100.25"))) << "the command outlived its run";
  }
}

// As with a cell of its own: a signal before the command could start means it never runs,
// and the pool is not even asked.
TEST_F(PoolRunTest, ASignalBeforeTheCommandStartsMeansItNeverRuns) {
  Started run =
      Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c", "echo ran"}, SIGINT);
  close(run.in);
  Outcome o = Collect(run);
  EXPECT_EQ(o.status, 128 + SIGINT) << "1000+N: mcpcell run died of signal N; " << o.err;
  EXPECT_THAT(o.err, HasSubstr("SIGINT before the command started; it was not run"));
  EXPECT_EQ(o.out, "");
  EXPECT_THAT(Status(), HasSubstr("\"served\":0"));
}

// A listening socket at `path` where a test plays the pool by hand; -1 on failure.
int ListenAsAStandInPool(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, 4) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// A signal that comes while the pool has the request, and then the pool does not start the
// command (it could not make a cell): the run must not go on to start it in a cell of its
// own. A stand-in pool on the socket takes the request, waits for the signal to reach
// the run, and declines.
TEST_F(RunTest, ASignalWhileThePoolDeclinesMeansTheCommandNeverRuns) {
  const int listener = ListenAsAStandInPool(state_ + "/pool.sock");
  ASSERT_GE(listener, 0);
  Started run =
      Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c", "echo ran"});
  close(run.in);
  pollfd pfd = {listener, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 30000), 1) << "the run never connected";
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  char request[8192];
  ASSERT_GT(recv(conn, request, sizeof request, 0), 0) << "no request";
  ASSERT_EQ(kill(run.pid, SIGINT), 0);
  usleep(200 * 1000);  // the run reads it from its signalfd meanwhile
  const std::string decline = R"({"event":"error","message":"no cell","errno":11,"fallback":true})";
  ASSERT_GT(send(conn, decline.data(), decline.size(), MSG_NOSIGNAL), 0);
  Outcome o = Collect(run);
  EXPECT_EQ(o.status, 128 + SIGINT) << "1000+N: mcpcell run died of signal N; " << o.err;
  EXPECT_THAT(o.err, HasSubstr("SIGINT before the command started; it was not run"));
  EXPECT_EQ(o.out, "") << "the command ran in a cell of the run's own";
  close(conn);
  close(listener);
}

// `mcpcell run` is the pool's client (run_pool/client.h, PoolClient): the request it sends
// is checked field by field (strings that need escaping included), and it follows whatever
// the pool answers: an exit, a timeout, a bad frame, a decline (then it makes a cell of its
// own and the command runs there).
TEST_F(RunTest, TheRunSpeaksThePoolProtocol) {
  const int listener = ListenAsAStandInPool(state_ + "/pool.sock");
  ASSERT_GE(listener, 0);
  const std::vector<std::string> command = {"/bin/sh", "-c", "printf '%s|' \"$0\" 'x\"y\\z'",
                                            "caf\xc3\xa9\n\t\x01"};
  // Runs `mcpcell run` against the stand-in, which answers with `frames`; returns the run's
  // outcome and the request it sent.
  auto exchange = [&](const std::vector<std::string>& frames, std::vector<std::string> options) {
    std::vector<std::string> args = {MCPCELL_BIN, "run", "--state-dir", state_};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    Started run = Start(args);
    close(run.in);
    pollfd pfd = {listener, POLLIN, 0};
    EXPECT_EQ(poll(&pfd, 1, 30000), 1) << "the run never connected";
    int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    std::string request(200000, '\0');
    ssize_t n = recv(conn, request.data(), request.size(), 0);
    request.resize(n > 0 ? static_cast<size_t>(n) : 0);
    for (const std::string& f : frames) EXPECT_GT(send(conn, f.data(), f.size(), MSG_NOSIGNAL), 0);
    close(conn);
    return std::make_pair(Collect(run), request);
  };
  const std::string started = R"({"event":"started","cell":"wstandin"})";

  auto [ran, request] = exchange(
      {started,
       R"({"event":"exited","exit_code":3,"signaled":false,"signo":0,"timed_out":false,"oom_killed":false})"},
      {"-e", "A=1", "--env=B=two words", "--cwd", "/tmp", "--timeout", "2.5"});
  EXPECT_EQ(ran.status, 3) << ran.err;
  auto req = nlohmann::json::parse(request, nullptr, false);
  ASSERT_FALSE(req.is_discarded()) << request;
  EXPECT_EQ(req["op"], "exec");
  EXPECT_EQ(req["cell"], PolicyCheckSpec(state_));
  EXPECT_EQ(req["argv"], command);
  std::vector<std::string> env = req["env"];
  ASSERT_GE(env.size(), 2u) << request;
  EXPECT_EQ(std::vector<std::string>(env.end() - 2, env.end()),
            (std::vector<std::string>{"A=1", "B=two words"}));
  EXPECT_EQ(req["cwd"], "/tmp");
  EXPECT_EQ(req["timeout_ms"], 2500);
  EXPECT_EQ(req["stdio"], (std::vector<bool>{true, true, true}));

  auto [timed_out, r2] = exchange(
      {started,
       R"({"event":"exited","exit_code":0,"signaled":true,"signo":9,"timed_out":true,"oom_killed":true})"},
      {"--timeout", "2.5"});
  EXPECT_EQ(timed_out.status, 124);
  EXPECT_THAT(timed_out.err, HasSubstr("timed out after 2.5 s, killed"));
  EXPECT_THAT(timed_out.err, HasSubstr("the cell ran out of memory (OOM kill)"));

  auto [bad, r3] = exchange({started, R"({"event":"exited","exit_code":300,"signo":0})"}, {});
  EXPECT_EQ(bad.status, 125);
  EXPECT_THAT(bad.err, HasSubstr("the pool sent a bad exit: \"exit_code\" is out of range"));

  auto [failed, r4] =
      exchange({R"({"event":"error","message":"no such file","errno":2,"fallback":false})"}, {});
  EXPECT_EQ(failed.status, 127);
  EXPECT_THAT(failed.err, HasSubstr("mcpcell run: no such file"));

  auto [gone, r5] = exchange({started}, {});
  EXPECT_EQ(gone.status, 125);
  EXPECT_THAT(gone.err, HasSubstr("the pool closed the connection before the command ended"));

  // Declined, or the pool went away before it started the command: the command runs in a
  // cell the run makes (the stand-in is not asked again).
  auto [closed, r7] = exchange({}, {});
  EXPECT_EQ(closed.status, 0) << closed.err;
  EXPECT_EQ(closed.out, "caf\xc3\xa9\n\t\x01|x\"y\\z|");
  EXPECT_THAT(closed.err, ::testing::Not(HasSubstr("pool"))) << "quiet without --pool";
  auto [declined, r6] =
      exchange({R"({"event":"error","message":"no cell","errno":11,"fallback":true})"}, {});
  EXPECT_EQ(declined.status, 0) << declined.err;
  EXPECT_EQ(declined.out, "caf\xc3\xa9\n\t\x01|x\"y\\z|");
  close(listener);
}

// Whatever a peer sends, the pool answers with an error that names the problem, keeps no
// fd it was given, and serves the next run.
TEST_F(PoolRunTest, BadRequestsGetAClearErrorAndThePoolServesOn) {
  std::string key = nlohmann::json(PolicyCheckSpec(state_)).dump().substr(1);
  ASSERT_EQ(key.back(), '"');
  key.pop_back();
  struct Case {
    std::string frame, error;
  } cases[] = {
      {"not json", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"op":"frobnicate"})", "unknown op \"frobnicate\""},
      {R"({"op":42})", "\"op\" must be a string"},
      {R"({"op":"exec"})", "\"cell\" is missing"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":[],"stdio":[false,false,false]})",
       "\"argv\" must name a command"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":[1],"stdio":[false,false,false]})",
       "\"argv\" must hold strings only"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":["a\u0000b"],"stdio":[false,false,false]})",
       "NUL"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":["true"],"stdio":[true,false,false]})",
       "\"stdio\" flags 1 fds but 0 came with the request"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":["true"],"stdio":[false,false]})",
       "\"stdio\" must be an array of three booleans"},
      {R"({"op":"exec","cell":")" + key +
           R"(","argv":["true"],"stdio":[false,false,false],"timeout_ms":-1})",
       "\"timeout_ms\" must be in 0.."},
      {R"({"op":"exec","cell":")" + key +
           R"(","argv":["true"],"stdio":[false,false,false],"env":["NOEQUALS"]})",
       "is not KEY=VALUE"},
      {R"({"op":"exec","cell":")" + key + R"(","argv":["true"],"stdio":[false,false,false],"x":1})",
       "unknown field \"x\""},
      {R"({"op":"exec","cell":"disk=1","argv":["true"],"stdio":[false,false,false]})",
       "this pool makes cells of"},
      {std::string(200 * 1024, ' '), "above"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(PoolExchange(socket_, c.frame), HasSubstr(c.error)) << c.frame.substr(0, 120);
  }
  // An fd sent with a bad request is not kept: the pipe's read end sees EOF once ours is
  // closed, so the pool holds no copy of its write end.
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  EXPECT_THAT(
      PoolExchange(socket_, R"({"op":"exec","cell":"x","argv":[],"stdio":[false,true,false]})",
                   {p[1]}),
      HasSubstr("\"argv\" must name a command"));
  close(p[1]);
  pollfd pfd = {p[0], POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1) << "the pool kept the fd of a bad request";
  char byte;
  EXPECT_EQ(read(p[0], &byte, 1), 0);
  close(p[0]);
  // More fds than stdio has: refused, all of them closed.
  EXPECT_THAT(PoolExchange(socket_, R"({"op":"status"})", {0, 1, 2, 0}), HasSubstr("fds"));
  // A peer that connects and goes, and the next run is served as if nothing happened.
  EXPECT_EQ(PoolExchange(socket_, ""), "") << "an empty frame closes the connection";
  Outcome o = Run({"--", "/bin/sh", "-c", "echo fine"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "fine\n");
  WaitUntilReady(1, 1);
}

// The socket is the pool user's: mode 0600, and a peer of another uid is refused even
// when the mode lets it connect.
TEST_F(PoolRunTest, ARunOfAnotherUserIsRefused) {
  struct stat st;
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  ASSERT_EQ(chmod(socket_.c_str(), 0666), 0);
  ASSERT_EQ(chmod(state_.c_str(), 0755), 0);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork();
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(1);
    std::string reply = PoolExchange(socket_, R"({"op":"status"})");
    ssize_t ignored = write(p[1], reply.data(), reply.size());
    (void)ignored;
    _exit(0);
  }
  close(p[1]);
  std::string reply = ReadUntil(p[0], "\x01");
  close(p[0]);
  int status;
  waitpid(child, &status, 0);
  EXPECT_THAT(reply, HasSubstr("refused: this pool serves uid 0 only, and the run is uid 65534"));
}

// Stopping the pool kills the commands of its runs and destroys every cell; a second pool
// on a live socket is refused.
TEST_F(PoolRunTest, AStoppedPoolLeavesNothingAndASecondOneIsRefused) {
  Outcome second = RunProgram({MCPCELL_BIN, "pool", "--state-dir", state_});
  EXPECT_EQ(second.status, 1);
  EXPECT_THAT(second.err, HasSubstr("a pool already listens on " + socket_));
  Started run = Start({MCPCELL_BIN, "run", "--state-dir", state_, "--", "/bin/sh", "-c",
                       "echo ready; exec sleep 100"});
  close(run.in);
  ASSERT_EQ(ReadUntil(run.out, "ready\n"), "ready\n");
  StopPool();
  int status = 0;
  ASSERT_EQ(waitpid(run.pid, &status, 0), run.pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL) << "the command was killed with its cell";
  close(run.out);
  close(run.err);
  // With the pool gone (no socket), runs make their own cells again.
  Outcome o = Run({"--timings", "--", "/bin/true"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("create total"));
}

// ---- the run's policy: --policy and the cell flags, compiled by the policy compiler ----

// A profile file in `dir`: name "small", a few limits of its own.
std::string WriteSmallProfile(const std::string& dir) {
  const std::string file = dir + "-small.toml";
  std::ofstream(file) << "name = \"small\"\n[limits]\nmemory = \"512MiB\"\ntmp = \"32MiB\"\n"
                         "open_files = 77\n";
  return file;
}

// Without flags a run cell is the default policy's (its rlimits, /tmp size, seccomp); a
// profile file and the flags change exactly what they name.
TEST_F(RunTest, TheCellIsThePolicysWithTheFlagsAsOverrides) {
  const std::string probe =
      "echo $MCPCELL_POLICY; ulimit -n; grep '^Seccomp:' /proc/self/status | tr -d '\\t '; "
      "stat -f -c '%b %S' /tmp; stat -f -c '%b %S' /workspace";
  auto sizes = [](std::istringstream& in) {
    uint64_t blocks = 0, size = 0;
    in >> blocks >> size;
    return blocks * size;
  };
  Outcome o = Run({"--no-pool", "--", "/bin/sh", "-c", probe});
  ASSERT_EQ(o.status, 0) << o.err;
  std::istringstream lines(o.out);
  std::string name, nofile, seccomp;
  lines >> name >> nofile >> seccomp;
  EXPECT_EQ(name, "default");
  EXPECT_EQ(nofile, "1024");
  EXPECT_EQ(seccomp, "Seccomp:2");
  EXPECT_EQ(sizes(lines), 256ull << 20) << "/tmp: " << o.out;
  EXPECT_EQ(sizes(lines), 1ull << 30) << "/workspace: " << o.out;

  const std::string profile = WriteSmallProfile(state_);
  o = Run({"--no-pool", "--policy", profile, "--no-seccomp", "--disk", "16M", "--", "/bin/sh", "-c",
           probe});
  std::filesystem::remove(profile);
  ASSERT_EQ(o.status, 0) << o.err;
  std::istringstream small(o.out);
  small >> name >> nofile >> seccomp;
  EXPECT_EQ(name, "small");
  EXPECT_EQ(nofile, "77");
  EXPECT_EQ(seccomp, "Seccomp:0");
  EXPECT_EQ(sizes(small), 32ull << 20) << "/tmp: " << o.out;
  EXPECT_EQ(sizes(small), 16ull << 20) << "/workspace: " << o.out;

  Outcome missing = Run({"--policy", "no-such-profile", "--", "/bin/true"});
  EXPECT_EQ(missing.status, 125);
  EXPECT_THAT(missing.err, HasSubstr("mcpcell run: --policy no-such-profile: "));
  Outcome bad = Run({"--pids", "many", "--", "/bin/true"});
  EXPECT_EQ(bad.status, 125);
  EXPECT_THAT(bad.err, HasSubstr("--pids: \"many\" is not a whole number"));
}

// run and pool start no egress proxy: the proxy's port in the cell refuses at once.
TEST_F(RunTest, NothingListensOnTheProxyPort) {
  if (access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "needs curl in the template";
  Outcome o = Run(
      {"--no-pool", "--", "/bin/sh", "-c", "curl -sS -m 20 http://example.com/ 2>&1; echo rc=$?"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("rc=7")) << "curl: (7) couldn't connect: " << o.out;
}

// A policy that needs the egress proxy or the package service (only `mcpcell serve` runs
// them) is refused at start, naming the policy, the key and what to do.
TEST_F(RunTest, PoliciesThatNeedServeAreRefused) {
  Outcome o = Run({"--policy", "dev", "--", "/bin/sh", "-c", "echo ran"});
  EXPECT_EQ(o.status, 125);
  EXPECT_EQ(o.out, "");
  EXPECT_THAT(o.err, HasSubstr("mcpcell run: policy \"dev\" (<builtin:dev>) allows egress through "
                               "the proxy ([network] egress = \"allowlist\"), which only `mcpcell "
                               "serve` runs; use a policy with egress = \"deny\""));
  const std::string file = state_ + "-packages.toml";
  std::ofstream(file)
      << "name = \"pkgs\"\n[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\n";
  o = Run({"--policy", file, "--", "/bin/true"});
  EXPECT_EQ(o.status, 125);
  EXPECT_THAT(o.err, HasSubstr("policy \"pkgs\" (" + file +
                               ") installs packages through the package service ([packages] "
                               "mode = \"online\"), which only `mcpcell serve` runs; use a policy "
                               "with mode = \"disabled\""));
  Outcome pool = RunProgram({MCPCELL_BIN, "pool", "--state-dir", state_, "--policy", "dev"});
  EXPECT_EQ(pool.status, 1);
  EXPECT_THAT(pool.err, HasSubstr("mcpcell pool: policy \"dev\""));
  std::filesystem::remove(file);
}

// A pool of a profile file: a run of the same policy gets its cell, one of another policy
// (another compiled spec) makes its own and says where the specs differ.
class PolicyPoolRunTest : public PoolRunTest {
 protected:
  std::vector<std::string> PoolArgs() override {
    profile_ = WriteSmallProfile(state_);
    return {"--policy", profile_};
  }
  void TearDown() override {
    PoolRunTest::TearDown();
    std::filesystem::remove(profile_);
  }
  std::string profile_;
};

TEST_F(PolicyPoolRunTest, ARunOfThePoolsPolicyTakesItsCellsAndAnotherMakesItsOwn) {
  EXPECT_THAT(Status(),
              HasSubstr("\"cell\":" + nlohmann::json(PolicyCheckSpec(state_, profile_)).dump()));
  Outcome o = Run({"--timings", "--policy", profile_, "--", "/bin/sh", "-c", "ulimit -n"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "77\n");
  EXPECT_THAT(o.err, HasSubstr("was made ahead by the pool")) << o.err;
  WaitUntilReady(1, 1);
  if (access("/usr/bin/curl", X_OK) == 0) {
    // No egress proxy here either: the pooled cell's proxy port refuses at once.
    o = Run({"--policy", profile_, "--", "/bin/sh", "-c",
             "curl -sS -m 20 http://a.example/; echo rc=$?"});
    EXPECT_THAT(o.out, HasSubstr("rc=7")) << o.out << o.err;
    WaitUntilReady(1, 2);
  }
  o = Run({"--timings", "--", "/bin/sh", "-c", "ulimit -n"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "1024\n");
  EXPECT_THAT(o.err, HasSubstr("not using the pool: this pool makes cells of another spec"));
  EXPECT_THAT(o.err, HasSubstr("create total"));
  // The same policy with a flag that changes the cell: another spec too.
  o = Run({"--timings", "--policy", profile_, "--pids", "64", "--", "/bin/true"});
  EXPECT_THAT(o.err, HasSubstr("the run wants \"limits.pids_max: 64\""));
  EXPECT_THAT(Status(),
              HasSubstr(access("/usr/bin/curl", X_OK) == 0 ? "\"served\":2" : "\"served\":1"));
}

}  // namespace
