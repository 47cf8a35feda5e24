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
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// Runs argv (argv[0] a path) with `input` on its stdin; collects its status and output.
Outcome RunProgram(std::vector<std::string> args, const std::string& input = "") {
  Started child = Start(std::move(args));
  ssize_t ignored = write(child.in, input.data(), input.size());
  (void)ignored;
  close(child.in);
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
  int status;
  waitpid(child.pid, &status, 0);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  return o;
}

// Runs `mcpcell run --state-dir <state> <args...>` with `input` on its stdin.
Outcome RunMcpcell(const std::string& state, std::vector<std::string> args,
                   const std::string& input = "") {
  args.insert(args.begin(), {MCPCELL_BIN, "run", "--state-dir", state});
  return RunProgram(args, input);
}

// mcpcell-server, installed next to mcpcell (tools/command.h).
std::string ServerBin() {
  std::string bin = MCPCELL_BIN;
  return bin.substr(0, bin.rfind('/') + 1) + "mcpcell-server";
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
TEST_F(RunTest, SignalsToTheFrontReachTheCommand) {
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

// The front delegates the commands it does not link to mcpcell-server (tools/command.h):
// both list the same commands with the same summaries, whichever answers --help.
TEST(RunFrontTest, HelpListsEveryCommand) {
  Outcome front = RunProgram({MCPCELL_BIN, "--help"});
  Outcome server = RunProgram({ServerBin(), "--help"});
  ASSERT_EQ(front.status, 0) << front.err;
  ASSERT_EQ(server.status, 0) << server.err;
  // The same text but for the usage line, which names argv[0].
  auto without_usage = [](std::string text) {
    const size_t at = text.find("\nUsage: ");
    if (at != std::string::npos) text.erase(at, text.find('\n', at + 1) - at);
    return text;
  };
  EXPECT_EQ(without_usage(front.out), without_usage(server.out));
  for (const char* command : {"run", "doctor", "serve", "policy"}) {
    EXPECT_THAT(front.out, HasSubstr(std::string("\n  ") + command + " ")) << front.out;
  }
}

TEST(RunFrontTest, DelegatedCommandsRunInTheServer) {
  Outcome serve = RunProgram({MCPCELL_BIN, "serve", "--help"});
  EXPECT_EQ(serve.status, 0) << serve.err;
  EXPECT_THAT(serve.out, HasSubstr("--http")) << "serve's own options, from mcpcell-server";
  Outcome policy = RunProgram({MCPCELL_BIN, "policy", "show", "default"});
  EXPECT_EQ(policy.status, 0) << policy.err;
  EXPECT_THAT(policy.out, HasSubstr("# shipped profiles:"));
  // Exit statuses and errors come through unchanged.
  Outcome bad = RunProgram({MCPCELL_BIN, "policy", "check", "/nonexistent/p.toml"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("mcpcell policy check: "));
  EXPECT_THAT(bad.err, HasSubstr("/nonexistent/p.toml"));
}

TEST(RunFrontTest, AMissingServerIsNamed) {
  char tmpl[] = "/tmp/mcpcell-front-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::copy_file(MCPCELL_BIN, dir + "/mcpcell");
  Outcome o = RunProgram({dir + "/mcpcell", "serve"});
  EXPECT_EQ(o.status, 127);
  EXPECT_THAT(o.err, HasSubstr("mcpcell serve: this command runs in mcpcell-server"));
  EXPECT_THAT(o.err, HasSubstr(dir + "/mcpcell-server"));
  // Its own commands need nothing else (the cell init it then looks for is another matter).
  Outcome version = RunProgram({dir + "/mcpcell", "--version"});
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("mcpcell 0.1.0"));
  std::filesystem::remove_all(dir);
}

// What `mcpcell run` maps while its command runs: none of the HTTP stack (cpp-httplib,
// OpenSSL, brotli, toml++), whose loading cost every run ~5 ms before main.
TEST_F(RunTest, TheFrontLoadsNoHttpStack) {
  std::vector<std::string> args = {MCPCELL_BIN, "run",     "--state-dir", state_,
                                   "--",        "/bin/sh", "-c",          "echo up; read x; true"};
  Started child = Start(std::move(args));
  pid_t pid = child.pid;
  char buf[8] = {};
  ASSERT_EQ(read(child.out, buf, 3), 3) << "the command never started";
  EXPECT_STREQ(buf, "up\n");
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream text;
  text << maps.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("/mcpcell")) << "not the maps of mcpcell";
  for (const char* lib : {"httplib", "libssl", "libcrypto", "brotli", "tomlplusplus"}) {
    EXPECT_THAT(text.str(), ::testing::Not(HasSubstr(lib))) << text.str();
  }
  close(child.in);  // `read x` ends
  close(child.out);
  int status = 0;
  waitpid(pid, &status, 0);
  close(child.err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
