// Exec inside real cells through CellChannel: results (exit code, signal, CPU, memory),
// env/cwd/stdin, streaming, bounded output with a program that writes gigabytes, timeouts
// and cancellation that kill the whole process group, concurrent execs, and the death of
// cell init turning every call into an error instead of a hang.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class ExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    auto cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
    ASSERT_TRUE(cell.ok()) << cell.error().message;
    cell_ = std::move(cell).value();
  }
  void TearDown() override {
    if (cell_) {
      EXPECT_TRUE(cell_->Destroy().ok());
    }
  }
  CellChannel& channel() { return cell_->channel(); }
  Result<ExecResult> Sh(const std::string& script, std::chrono::milliseconds timeout = 30s) {
    ExecOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.timeout = timeout;
    return channel().Exec(o);
  }
  // Number of processes named `comm` in the cell, counted from inside.
  int CountProcesses(const std::string& comm) {
    auto r = Sh("n=0; for f in /proc/[0-9]*/comm; do [ \"$(cat $f 2>/dev/null)\" = " + comm +
                " ] && n=$((n+1)); done; echo $n");
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::atoi(r->out.data.c_str()) : -1;
  }

  TempStateDir state_;
  std::unique_ptr<Cell> cell_;
};

uint64_t SelfRssBytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

TEST_F(ExecTest, ExitCodeAndBothStreams) {
  auto r = Sh("echo out; echo err >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->signaled);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out.data, "out\n");
  EXPECT_EQ(r->err.data, "err\n");
  EXPECT_FALSE(r->timed_out);
  EXPECT_GT(r->wall_time.count(), 0);
}

TEST_F(ExecTest, KilledBySignalIsReportedAsSignal) {
  auto r = Sh("kill -TERM $$");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signo, SIGTERM);
}

TEST_F(ExecTest, EnvCwdAndStdin) {
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "echo $FOO $HOME; pwd; cat; echo $PATH"};
  o.env = {"FOO=bar", "PATH=/usr/bin:/bin"};
  o.cwd = "/tmp";
  o.stdin_data = "from stdin\n";
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->out.data, "bar /workspace\n/tmp\nfrom stdin\n/usr/bin:/bin\n");
  // Default cwd is the workspace; PATH search finds a bare name.
  ExecOptions bare;
  bare.argv = {"pwd"};
  r = channel().Exec(bare);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->out.data, "/workspace\n");
}

// More stdin than a pipe holds, to a program that echoes it: the server must write stdin
// without blocking and read the output in between, or it waits on cat while cat waits on
// it to read.
TEST_F(ExecTest, StdinLargerThanAPipeIsFedWhileItsEchoIsRead) {
  std::string input;
  for (int i = 0; input.size() < (2u << 20); ++i) input += "line " + std::to_string(i) + "\n";
  ExecOptions o;
  o.argv = {"/bin/cat"};
  o.stdin_data = input;
  o.keep_bytes = 4 << 20;
  o.timeout = 20s;
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out.total, input.size());
  EXPECT_TRUE(r->out.data == input);
}

TEST_F(ExecTest, OwnProcessGroupSandboxUserNoPrivileges) {
  auto r =
      Sh("echo $$ $(cut -d' ' -f5 /proc/$$/stat) $(id -u) $(id -g); "
         "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/$$/status");
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::istringstream in(r->out.data);
  std::string pid, pgid, uid, gid;
  in >> pid >> pgid >> uid >> gid;
  EXPECT_EQ(pid, pgid) << "the exec leads its own process group";
  EXPECT_EQ(uid, "1000");
  EXPECT_EQ(gid, "1000");
  for (const char* line : {"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
                           "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
                           "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"}) {
    EXPECT_THAT(r->out.data, HasSubstr(line));
  }
  // Only stdin, stdout and stderr are inherited (the control socket and pipes of init
  // never reach the program). fd 3 is the directory ls opens itself.
  r = Sh("ls /proc/self/fd");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.data, "0\n1\n2\n3\n");
}

TEST_F(ExecTest, StartFailuresAreErrorsNamingTheCause) {
  ExecOptions o;
  o.argv = {"/nonexistent/program"};
  auto r = channel().Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, ENOENT);
  EXPECT_THAT(r.error().message, HasSubstr("execve(\"/nonexistent/program\")"));
  o.argv = {"no-such-command-anywhere"};
  r = channel().Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("not found in PATH"));
  o.argv = {"/bin/true"};
  o.cwd = "/does/not/exist";
  r = channel().Exec(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("chdir(\"/does/not/exist\")"));
  o.cwd = "relative";
  EXPECT_THAT(channel().Exec(o).error().message, HasSubstr("cwd: must be an absolute path"));
  o.cwd = "";
  o.env = {"NOEQUALS"};
  EXPECT_THAT(channel().Exec(o).error().message, HasSubstr("env[0]: not KEY=VALUE"));
  o.argv = {};
  EXPECT_THAT(channel().Exec(o).error().message, HasSubstr("argv is empty"));
  // The cell keeps serving after every refusal.
  EXPECT_EQ(Sh("echo alive").value().out.data, "alive\n");
}

TEST_F(ExecTest, TimeoutKillsTheWholeProcessGroup) {
  const auto start = Clock::now();
  auto r = Sh("sleep 1000 & sleep 1000 & (sleep 1000; echo never) & echo started; wait", 700ms);
  const auto took = Clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signo, SIGKILL);
  EXPECT_EQ(r->out.data, "started\n");
  EXPECT_LT(took, 5s);
  EXPECT_GE(took, 700ms);
  EXPECT_EQ(CountProcesses("sleep"), 0) << "background members of the group survived";
}

TEST_F(ExecTest, ABackgroundChildHoldingStdoutDoesNotHangTheExec) {
  // The leader exits; a daemon it left keeps the stdout pipe open. The exec returns once
  // output goes quiet instead of waiting for the daemon, which keeps running in the cell.
  const auto start = Clock::now();
  auto r = Sh("sleep 100 & echo hi");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out.data, "hi\n");
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(CountProcesses("sleep"), 1);
}

TEST_F(ExecTest, InitKeepsNoCopyOfTheProgramsStdio) {
  // Cell init closes its copies of an exec's stdin, stdout and stderr once the program has
  // started (the server keeps its own copies of the pipes it made, until ExecExited): a
  // program that closes its output and runs on lets a caller's fd hang up at once, as it
  // would outside a cell. Init holding it would keep `mcpcell run`'s output open, say,
  // until the program is reaped.
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd read_end(p[0]);
  std::atomic<int> write_end{p[1]};
  std::stop_source stop;
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "exec >&- 2>&-; sleep 30"};
  o.stdout_fd = p[1];
  o.stderr_fd = p[1];
  o.timeout = 60s;
  o.stop = stop.get_token();
  // Init has its copy once the program started: ours must go, or EOF never comes.
  o.on_started = [&](uint64_t, pid_t) { ::close(write_end.exchange(-1)); };
  auto exec = std::async(std::launch::async, [&] { return channel().Exec(o); });
  char byte;
  ssize_t n;
  while ((n = ::read(read_end.get(), &byte, 1)) < 0 && errno == EINTR) {
  }
  EXPECT_EQ(n, 0);  // EOF
  auto stats = channel().Stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->running_execs, 1u) << "EOF came only when the program ended: init held a copy";
  stop.request_stop();
  auto r = exec.get();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cancelled);
  if (int fd = write_end.exchange(-1); fd >= 0) ::close(fd);  // the exec failed to start
}

TEST_F(ExecTest, OrphansAreReapedByCellInit) {
  // Grandchildren outlive their parent, are reparented to pid 1 and must not stay zombies.
  ASSERT_TRUE(Sh("for i in 1 2 3 4 5; do (sleep 0.1 &) ; done").ok());
  std::this_thread::sleep_for(500ms);
  auto r = Sh("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->out.data, "0\n") << "zombies left in the cell";
  auto stats = channel().Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->children_reaped, 6u);  // the orphans too, not only the exec leaders
}

TEST_F(ExecTest, StopTokenCancelsAndSignalExecReachesTheGroup) {
  std::stop_source stop;
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 1000"};
  o.stop = stop.get_token();
  o.on_started = [&](uint64_t, pid_t) { stop.request_stop(); };
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->signo, SIGKILL);

  std::promise<uint64_t> id;
  ExecOptions t;
  t.argv = {"/bin/sh", "-c", "trap 'echo got-term; exit 42' TERM; while :; do sleep 0.05; done"};
  t.on_started = [&](uint64_t exec_id, pid_t) { id.set_value(exec_id); };
  auto running = std::async(std::launch::async, [&] { return channel().Exec(t); });
  uint64_t exec_id = id.get_future().get();
  std::this_thread::sleep_for(200ms);  // let the shell install its trap
  ASSERT_TRUE(channel().SignalExec(exec_id, SIGTERM).ok());
  auto done = running.get();
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->exit_code, 42);
  EXPECT_EQ(done->out.data, "got-term\n");
  EXPECT_EQ(channel().SignalExec(exec_id, SIGTERM).error().err, ESRCH);  // not running any more
  EXPECT_THAT(channel().SignalExec(exec_id, 999).error().message, HasSubstr("not a signal number"));
}

TEST_F(ExecTest, OutputIsStreamedAsItComes) {
  ExecOptions o;
  o.argv = {"/bin/sh", "-c", "echo first; sleep 1; echo second"};
  const auto start = Clock::now();
  std::vector<std::pair<std::string, Clock::duration>> chunks;
  o.on_output = [&](OutputStream s, std::string_view data) {
    EXPECT_EQ(s, OutputStream::kStdout);
    chunks.emplace_back(std::string(data), Clock::now() - start);
  };
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].first, "first\n");
  EXPECT_LT(chunks[0].second, 800ms) << "the first line waited for the program to end";
  EXPECT_GE(chunks[1].second, 900ms);
  EXPECT_EQ(r->out.data, "first\nsecond\n");
}

TEST_F(ExecTest, GigabytesOfOutputKeepServerMemoryBounded) {
  const uint64_t rss_before = SelfRssBytes();
  uint64_t streamed = 0;
  ExecOptions o;
  o.argv = {"/usr/bin/head", "-c", "2G", "/dev/zero"};
  o.keep_bytes = 4096;
  o.on_output = [&](OutputStream, std::string_view d) { streamed += d.size(); };
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out.total, 2ull << 30);
  EXPECT_EQ(streamed, 2ull << 30);
  EXPECT_EQ(r->out.data.size(), 4096u);
  EXPECT_TRUE(r->out.truncated());
  EXPECT_LT(SelfRssBytes(), rss_before + (64ull << 20)) << "server memory grew with the output";
}

TEST_F(ExecTest, CpuTimeAndPeakMemoryAreReported) {
  ExecOptions o;
  o.argv = {"/usr/bin/python3", "-c",
            "b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "n = 0\nfor i in range(3000000): n += i\n"};
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->exit_code, 0) << r->err.data;
  EXPECT_GT(r->peak_memory_bytes, 100ull << 20);
  EXPECT_GT(r->user_cpu.count() + r->system_cpu.count(), 50000);
  EXPECT_GE(r->wall_time, r->user_cpu / 2);
}

TEST_F(ExecTest, ConcurrentExecsGetTheirOwnResults) {
  std::vector<std::future<Result<ExecResult>>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(std::async(std::launch::async, [this, i] {
      return Sh("sleep 0.2; echo run-" + std::to_string(i) + "; exit " + std::to_string(i));
    }));
  }
  for (int i = 0; i < 8; ++i) {
    auto r = runs[i].get();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->out.data, "run-" + std::to_string(i) + "\n");
    EXPECT_EQ(r->exit_code, i);
  }
  auto stats = channel().Stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->running_execs, 0u);
  EXPECT_GE(stats->children_reaped, 8u);
}

TEST_F(ExecTest, OomKillIsReported) {
  if (!cell_->Usage().ok()) GTEST_SKIP() << "no cgroup here: " << cell_->Usage().error().message;
  cell_.reset();
  CellSpec spec = ProbeSpec(state_);
  spec.limits.memory_max_bytes = 64ull << 20;
  auto cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  cell_ = std::move(cell).value();
  ExecOptions o;
  o.argv = {"/usr/bin/python3", "-c",
            "b = bytearray(512 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"};
  auto r = channel().Exec(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signo, SIGKILL);
  EXPECT_TRUE(r->oom_killed);
  EXPECT_EQ(Sh("echo still-here").value().out.data, "still-here\n");  // the cell survives
}

TEST_F(ExecTest, DeathOfCellInitFailsCallsInsteadOfHanging) {
  std::promise<void> started;
  ExecOptions o;
  o.argv = {"/bin/sleep", "1000"};
  o.on_started = [&](uint64_t, pid_t) { started.set_value(); };
  auto running = std::async(std::launch::async, [&] { return channel().Exec(o); });
  started.get_future().wait();
  ASSERT_EQ(::kill(cell_->init_pid(), SIGKILL), 0);
  auto status = running.wait_for(10s);
  ASSERT_EQ(status, std::future_status::ready) << "Exec hung after cell init died";
  auto r = running.get();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("cell init is gone"));
  EXPECT_FALSE(channel().alive());
  const auto t0 = Clock::now();
  EXPECT_FALSE(channel().ReadFile("/etc/passwd", 1000).ok());
  EXPECT_FALSE(Sh("true").ok());
  EXPECT_LT(Clock::now() - t0, 1s);
}

// The egress proxy's door: init listens on 127.0.0.1:<port> inside the cell's network
// namespace and hands the socket to the server, which accepts there (egress/ serves it).
TEST(EgressListener, InitHandsTheServerAListenerInsideTheCell) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  CellSpec spec = ProbeSpec(state);
  spec.egress_proxy_port = 3128;
  auto cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  const int listener = (*cell)->TakeEgressListener();
  ASSERT_GE(listener, 0);
  EXPECT_EQ((*cell)->TakeEgressListener(), -1) << "ownership passes once";
  std::string got;
  std::thread server([&] {
    int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[16];
    ssize_t n = ::read(c, buf, sizeof buf);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
    (void)!::write(c, "pong", 4);
    ::close(c);
  });
  auto r = celltest::RunInCell(**cell, {"/usr/bin/python3", "-c",
                                        "import socket\n"
                                        "s = socket.create_connection(('127.0.0.1', 3128))\n"
                                        "s.sendall(b'ping')\n"
                                        "print(s.recv(16).decode())\n"
                                        "t = socket.socket()\n"
                                        "try:\n"
                                        "    t.bind(('127.0.0.1', 3128)); print('bound')\n"
                                        "except OSError as e:\n"
                                        "    print('bind', e.errno)\n"});
  server.join();
  ::close(listener);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(got, "ping");
  EXPECT_EQ(r.out, "pong\nbind " + std::to_string(EADDRINUSE) + "\n") << r.err;
  EXPECT_TRUE((*cell)->Destroy().ok());
}

TEST(EgressListener, NoneUnlessTheSpecAsks) {
  TempStateDir state;
  ASSERT_FALSE(state.path().empty());
  auto cell = Cell::Create(ProbeSpec(state), TestCreateOptions());
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  EXPECT_EQ((*cell)->TakeEgressListener(), -1);
  auto r = celltest::RunInCell(**cell, {"/usr/bin/python3", "-c",
                                        "import socket\n"
                                        "try:\n"
                                        "    socket.create_connection(('127.0.0.1', 3128))\n"
                                        "except OSError as e:\n"
                                        "    print('refused', e.errno)\n"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "refused " + std::to_string(ECONNREFUSED) + "\n") << r.err;
  EXPECT_TRUE((*cell)->Destroy().ok());
}
}  // namespace
}  // namespace mcpcell::sandbox
