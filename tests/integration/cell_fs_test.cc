// Cell creation boundaries, checked with the probe inside real cells and from the host:
// what the filesystem shows, pid 1, the network, isolation between two cells, and that
// destroy and orphan reaping leave nothing behind. Runs as root (per-cell id ranges) and,
// as a second ctest entry, as an unprivileged uid (single mapping, no cgroup).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "sandbox/linux/hostname.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::Facts;
using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::RunProbe;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using ::testing::Not;

class CellFsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(state_.path().empty()) << "mkdtemp failed"; }

  // One state dir for the whole binary: building the host template takes a moment and
  // every cell of one state dir shares it. Tests leave no cells in it.
  static TempStateDir& SharedState() {
    static TempStateDir state;
    return state;
  }

  std::unique_ptr<Cell> NewCell(CellSpec spec) {
    Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, TestCreateOptions());
    EXPECT_TRUE(cell.ok()) << cell.error().message;
    if (!cell) return nullptr;
    return std::move(cell).value();
  }
  std::unique_ptr<Cell> NewCell() { return NewCell(ProbeSpec(state_)); }

  TempStateDir& state_ = SharedState();
};

std::string ReadHostFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Running: exists and is neither a zombie nor dead (a reaped-late zombie is not running).
bool IsRunning(pid_t pid) {
  std::string stat = ReadHostFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

TEST_F(CellFsTest, HostFilesOutsideTheTemplateAreInvisible) {
  // A file the host has in /tmp, and host paths no cell may see.
  std::string marker = state_.path() + "-host-marker";
  { std::ofstream(marker) << "secret"; }
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  celltest::ProbeRun r = RunProbe(
      *cell, {"exists", marker, "/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private",
              "/etc/machine-id", "/etc/sudoers", "/var/lib/dpkg", "/work", "/sys/kernel",
              "/usr/bin/env", "/etc/ld.so.cache", "/etc/ssl/certs/ca-certificates.crt"});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto facts = Facts(r.out);
  ASSERT_EQ(facts.size(), 13u) << r.out;
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(facts[i].second, "no") << facts[i].first;
  EXPECT_EQ(facts[10].second, "yes") << "the template's /usr is missing";
  EXPECT_EQ(facts[11].second, "yes") << "the loader cache is part of the template";
  EXPECT_EQ(facts[12].second, "yes") << "CA certificates are part of the template";
  ::unlink(marker.c_str());
  // /etc/passwd is synthesized: the sandbox user and nothing of the host's accounts.
  r = RunProbe(*cell, {"cat", "/etc/passwd"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sandbox:x:1000:1000:"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;
}

TEST_F(CellFsTest, TemplateIsReadOnlyAndCellWritesStayInTheCell) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  std::string name = "mcpcell-probe-" + cell->id();
  // The host's /usr belongs to a uid the cell does not map: never writable in a cell.
  for (const std::string dir : {"/usr/bin/", "/usr/lib/"}) {
    celltest::ProbeRun r = RunProbe(*cell, {"write", dir + name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "EACCES\n") << dir;
  }
  // Root server: the cell's / and /etc belong to the cell's root, not the sandbox user.
  // Single mapping (desktop): only the sandbox uid exists, so it owns them; its writes land
  // in the cell's upper and the template stays untouched (checked below).
  const bool single = cell->id_map().single;
  for (const std::string dir : {"/etc/", "/", "/run/"}) {
    celltest::ProbeRun r = RunProbe(*cell, {"write", dir + name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, single ? "ok\n" : "EACCES\n") << dir;
  }
  for (const std::string dir : {"/workspace/", "/tmp/", "/dev/shm/"}) {
    celltest::ProbeRun r = RunProbe(*cell, {"write", dir + name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ok\n") << dir;
  }
  // The probe's bind is read-only even for its owner.
  celltest::ProbeRun r = RunProbe(*cell, {"write", std::string(celltest::kProbeDirInCell) + "/x"});
  EXPECT_THAT(r.out, ::testing::AnyOf("EROFS\n", "EACCES\n"));
  // Nothing reached the host's directories or the shared template.
  struct stat st;
  EXPECT_NE(::stat(("/usr/bin/" + name).c_str(), &st), 0);
  EXPECT_NE(::stat(("/tmp/" + name).c_str(), &st), 0);
  const std::string skeleton = cell->spec().rootfs.skeleton_dir;
  ASSERT_EQ(::stat((skeleton + "/etc").c_str(), &st), 0) << skeleton;
  EXPECT_NE(::stat((skeleton + "/etc/" + name).c_str(), &st), 0);
  EXPECT_NE(::stat((skeleton + "/" + name).c_str(), &st), 0);
  // The workspace write did land in the cell's workspace dir on the host.
  EXPECT_EQ(ReadHostFile(cell->dir() + "/workspace/" + name), "probe\n");
}

TEST_F(CellFsTest, Pid1IsCellInitAndNoHostProcessIsVisible) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  celltest::ProbeRun r = RunProbe(*cell, {"ps"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto facts = Facts(r.out);
  std::map<std::string, std::string> by_pid(facts.begin(), facts.end());
  EXPECT_EQ(by_pid["1"], "mcpcell-init") << r.out;
  // init and the probe itself, nothing else (the host has hundreds).
  EXPECT_EQ(facts.size(), 2u) << r.out;
  EXPECT_GT(cell->init_pid(), 1) << "the host sees init under a host pid";
}

TEST_F(CellFsTest, OnlyLoopbackExistsAndNothingOutsideIsReachable) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  celltest::ProbeRun r = RunProbe(*cell, {"net"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto facts = Facts(r.out);
  ASSERT_EQ(facts.size(), 4u) << r.out;
  EXPECT_EQ(facts[0].first + " " + facts[0].second, "if lo up");
  EXPECT_EQ(facts[1].second, "ENETUNREACH");
  EXPECT_EQ(facts[2].second, "ENETUNREACH");
  EXPECT_EQ(facts[3].first + " " + facts[3].second, "loopback ok");
}

TEST_F(CellFsTest, MountsAreNosuidAndNodevExceptTheDeviceNodes) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  celltest::ProbeRun r = RunProbe(*cell, {"cat", "/proc/self/mountinfo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  int mounts = 0;
  while (std::getline(in, line)) {
    ++mounts;
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options;
    f >> id >> parent >> dev >> root >> point >> options;
    EXPECT_THAT(options, HasSubstr("nosuid")) << line;
    // The six device binds and the private devpts (its ptys must open) keep dev.
    static const char* kNodes[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                   "/dev/urandom", "/dev/tty",  "/dev/pts"};
    bool node = std::find(std::begin(kNodes), std::end(kNodes), point) != std::end(kNodes);
    if (node) {
      EXPECT_THAT(options, Not(HasSubstr("nodev"))) << line;
    } else {
      EXPECT_THAT(options, HasSubstr("nodev")) << line;
    }
    EXPECT_THAT(point, Not(HasSubstr(state_.path()))) << "a host path leaked: " << line;
  }
  EXPECT_GE(mounts, 14) << r.out;
  r = RunProbe(*cell, {"hostname"});
  EXPECT_EQ(r.out, CellHostname(cell->spec()) + "\n");
  r = RunProbe(*cell, {"ids"});
  EXPECT_THAT(r.out, HasSubstr("uid 1000\ngid 1000\n"));
}

TEST_F(CellFsTest, TwoCellsCannotSeeEachOther) {
  auto a = NewCell();
  auto b = NewCell();
  ASSERT_TRUE(a && b);
  ASSERT_EQ(RunProbe(*a, {"write", "/dev/shm/a-shm"}).out, "ok\n");
  ASSERT_EQ(RunProbe(*a, {"write", "/tmp/a-tmp"}).out, "ok\n");
  ASSERT_EQ(RunProbe(*a, {"write", "/workspace/a-ws"}).out, "ok\n");
  ASSERT_EQ(RunProbe(*a, {"sysv-create", "4242"}).out, "ok\n");
  // A long-running process of A holding an abstract socket while B looks; killed at the
  // end, so every check below happens while it provably runs.
  std::atomic<uint64_t> holder_exec{0};
  std::thread holder([&] {
    ExecOptions o;
    o.argv = {celltest::ProbeInCell(), "abstract-listen", "mcpcell-a", "120"};
    o.on_started = [&](uint64_t exec_id, pid_t) { holder_exec = exec_id; };
    (void)a->channel().Exec(o);
  });
  bool listening = false;
  for (int i = 0; i < 250 && !listening; ++i) {
    listening = RunProbe(*a, {"abstract-connect", "mcpcell-a"}).out == "ok\n";
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(listening) << "the holder in A never listened";
  EXPECT_EQ(RunProbe(*b, {"abstract-connect", "mcpcell-a"}).out, "ECONNREFUSED\n");
  // B sees its init and the probe that looks; A sees those and its holder.
  celltest::ProbeRun ps = RunProbe(*b, {"ps"});
  EXPECT_EQ(Facts(ps.out).size(), 2u) << ps.out;
  EXPECT_EQ(Facts(RunProbe(*a, {"ps"}).out).size(), 3u) << "A's holder is not running";
  EXPECT_EQ(RunProbe(*a, {"abstract-connect", "mcpcell-a"}).out, "ok\n");
  ASSERT_NE(holder_exec.load(), 0u);
  EXPECT_TRUE(a->channel().SignalExec(holder_exec, SIGKILL).ok());
  holder.join();
  auto facts = Facts(RunProbe(*b, {"exists", "/dev/shm/a-shm", "/tmp/a-tmp", "/workspace/a-ws",
                                   std::string("/proc/") + std::to_string(a->init_pid())})
                         .out);
  ASSERT_EQ(facts.size(), 4u);
  for (const auto& [path, seen] : facts) EXPECT_EQ(seen, "no") << path;
  EXPECT_EQ(RunProbe(*b, {"sysv-get", "4242"}).out, "ENOENT\n");
  EXPECT_EQ(RunProbe(*a, {"sysv-get", "4242"}).out, "ok\n");
  // Root mode: the two cells are different users on the host.
  if (::geteuid() == 0) {
    EXPECT_NE(a->id_map().host_uid_base, b->id_map().host_uid_base);
  }
}

// From the host: the pid, its namespaces, the cgroup, the cell dir.
struct HostTraces {
  pid_t init_pid = -1;
  std::string net_ns;
  std::vector<std::string> cgroup_paths;
  std::string dir;
};

HostTraces TracesOf(const Cell& cell) {
  HostTraces t;
  t.init_pid = cell.init_pid();
  char buf[128] = {};
  std::string link = "/proc/" + std::to_string(t.init_pid) + "/ns/net";
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n > 0) t.net_ns.assign(buf, static_cast<size_t>(n));
  if (cell.cgroup()) t.cgroup_paths = cell.cgroup()->Paths();
  t.dir = cell.dir();
  return t;
}

void ExpectNoTraces(const HostTraces& t, const std::string& state_dir) {
  EXPECT_FALSE(IsRunning(t.init_pid)) << "cell init still runs";
  // No process on the host is in the cell's network namespace any more.
  ASSERT_FALSE(t.net_ns.empty());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    char buf[128] = {};
    ssize_t n = ::readlink((entry.path().string() + "/ns/net").c_str(), buf, sizeof buf - 1);
    if (n > 0) {
      EXPECT_NE(std::string(buf, static_cast<size_t>(n)), t.net_ns) << "pid " << name;
    }
  }
  for (const std::string& p : t.cgroup_paths) {
    EXPECT_FALSE(std::filesystem::exists(p)) << "cgroup left: " << p;
  }
  EXPECT_FALSE(std::filesystem::exists(t.dir)) << "cell dir left: " << t.dir;
  EXPECT_THAT(ReadHostFile("/proc/self/mountinfo"), Not(HasSubstr(state_dir)));
  if (std::filesystem::exists(state_dir + "/idranges")) {
    EXPECT_TRUE(std::filesystem::is_empty(state_dir + "/idranges")) << "uid range still claimed";
  }
}

// Cell init is in every one of the cell's cgroups by the time Create returns (with v1 it
// moves itself in with the fds of the server's hand-over, sandbox/init/setup.h), and so is
// every process the cell runs.
TEST_F(CellFsTest, InitAndItsProcessesAreInTheCellsCgroup) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  if (!cell->cgroup())
    GTEST_SKIP() << "no cgroup here: " << ::testing::PrintToString(cell->warnings());
  std::thread sleeper([&] { RunProbe(*cell, {"sleep", "30"}); });
  for (const std::string& dir : cell->cgroup()->Paths()) {
    std::string procs;
    for (int i = 0; i < 500; ++i) {  // until the sleeper has started (up to 5 s)
      procs = ReadHostFile(dir + "/cgroup.procs");
      if (std::count(procs.begin(), procs.end(), '\n') >= 2) break;
      ::usleep(10000);
    }
    EXPECT_THAT("\n" + procs, HasSubstr("\n" + std::to_string(cell->init_pid()) + "\n")) << dir;
    EXPECT_GE(std::count(procs.begin(), procs.end(), '\n'), 2) << dir << ": " << procs;
  }
  EXPECT_TRUE(cell->Destroy().ok());
  sleeper.join();
}

TEST_F(CellFsTest, DestroyLeavesNothingBehind) {
  auto cell = NewCell();
  ASSERT_TRUE(cell);
  // Leave a running process and files behind in the cell.
  std::thread runner([&] { RunProbe(*cell, {"sleep", "30"}); });
  ASSERT_EQ(RunProbe(*cell, {"write", "/workspace/x"}).out, "ok\n");
  HostTraces traces = TracesOf(*cell);
  if (::geteuid() == 0) {
    EXPECT_FALSE(traces.cgroup_paths.empty()) << "root mode: cell must have a cgroup";
  } else {
    EXPECT_THAT(cell->warnings(), ::testing::Contains(HasSubstr("limits not enforced")));
  }
  Status s = cell->Destroy();
  EXPECT_TRUE(s.ok()) << s.error().message;
  runner.join();  // its exec fails or is killed: the cell is gone
  ExpectNoTraces(traces, state_.path());
  EXPECT_TRUE(cell->Destroy().ok()) << "Destroy must be idempotent";
}

TEST_F(CellFsTest, OrphansOfACrashedServerAreReaped) {
  // A "server" process creates a cell and dies without destroying it. A grandchild keeps
  // the control socket open, so cell init keeps running, as with a hung predecessor.
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  pid_t server = ::fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    ::close(report[0]);
    Result<std::unique_ptr<Cell>> cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
    if (!cell) _exit(1);
    pid_t pids[2] = {(*cell)->init_pid(), ::fork()};
    if (pids[1] == 0) {
      ::sleep(30);
      _exit(0);
    }
    ssize_t ignored = ::write(report[1], pids, sizeof pids);
    (void)ignored;
    ::kill(::getpid(), SIGKILL);  // crash: no destructor runs
  }
  ::close(report[1]);
  pid_t pids[2] = {-1, -1};
  ASSERT_EQ(::read(report[0], pids, sizeof pids), static_cast<ssize_t>(sizeof pids));
  ::close(report[0]);
  const pid_t init = pids[0];
  struct KillHolder {
    pid_t pid;
    ~KillHolder() { ::kill(pid, SIGKILL); }
  } holder{pids[1]};
  ::waitpid(server, nullptr, 0);
  ASSERT_TRUE(IsRunning(init)) << "the orphan's init should still run";
  std::vector<std::string> cells;
  for (const auto& e : std::filesystem::directory_iterator(state_.path() + "/cells")) {
    cells.push_back(e.path().filename());
  }
  ASSERT_EQ(cells.size(), 1u);

  Result<std::vector<std::string>> reaped = ReapOrphans(state_.path());
  ASSERT_TRUE(reaped.ok()) << reaped.error().message;
  EXPECT_EQ(reaped.value(), cells);
  EXPECT_FALSE(IsRunning(init)) << "orphan init survived reaping";
  EXPECT_TRUE(std::filesystem::is_empty(state_.path() + "/cells"));
  if (::geteuid() == 0) {
    std::string cg = "/sys/fs/cgroup/pids";
    // The cgroup named after the cell is gone from every hierarchy we can see.
    for (const auto& e : std::filesystem::recursive_directory_iterator(
             cg, std::filesystem::directory_options::skip_permission_denied)) {
      EXPECT_NE(e.path().filename().string(), cells[0]) << e.path();
    }
  }
}

TEST_F(CellFsTest, CellsOfAnotherLiveServerAreNotReaped) {
  // Several `mcpcell serve` processes share a state dir (one per stdio client). A server
  // starting up must not take the live cells of another: only cells whose owner is gone.
  pid_t other = ::fork();  // stands in for another running server
  ASSERT_GE(other, 0);
  if (other == 0) {
    ::pause();
    _exit(0);
  }
  struct KillOther {
    pid_t pid;
    void Now() {
      if (pid <= 0) return;  // never kill(-1, ...) or kill(0, ...)
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = 0;
    }
    ~KillOther() { Now(); }
  } kill_other{other};
  Result<std::unique_ptr<Cell>> cell = Cell::Create(ProbeSpec(state_), TestCreateOptions());
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  const std::string owner = (*cell)->dir() + "/owner";
  ASSERT_TRUE(std::filesystem::exists(owner)) << "Create wrote no owner record";
  for (int i = 0; i < 100 && ProcStartTime(other).empty(); ++i) ::usleep(1000);
  {
    std::ofstream out(owner, std::ios::trunc);
    out << other << " " << ProcStartTime(other) << "\n";
  }
  Result<std::vector<std::string>> reaped = ReapOrphans(state_.path());
  ASSERT_TRUE(reaped.ok()) << reaped.error().message;
  EXPECT_TRUE(reaped->empty()) << "reaped a live server's cell";
  EXPECT_TRUE((*cell)->alive());
  EXPECT_TRUE((*cell)->channel().alive());
  // Its uid/gid range stays claimed (as root), or a cell made here next would share its
  // host uids.
  const int slot = (*cell)->id_map().slot;
  if (slot >= 0) {
    EXPECT_TRUE(std::filesystem::is_symlink(state_.path() + "/idranges/" + std::to_string(slot)))
        << "released a live cell's id range claim";
  }

  // Once the owner is gone, the same cell is an orphan.
  kill_other.Now();
  reaped = ReapOrphans(state_.path());
  ASSERT_TRUE(reaped.ok()) << reaped.error().message;
  EXPECT_EQ(reaped->size(), 1u);
  EXPECT_FALSE((*cell)->alive());
}

TEST_F(CellFsTest, BadSpecsAndMissingInitFailWithoutLeftovers) {
  CellSpec spec = ProbeSpec(state_);
  spec.mounts.push_back(CellMount{"/etc", "/proc/x", false});
  Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_FALSE(cell.ok());
  EXPECT_THAT(cell.error().message, HasSubstr("mounts[1].cell_path"));
  spec = ProbeSpec(state_);
  spec.id = "../escape";
  cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_FALSE(cell.ok());
  EXPECT_THAT(cell.error().message, HasSubstr("id:"));
  spec = ProbeSpec(state_);
  CellCreateOptions options = TestCreateOptions();
  options.init_path = "/nonexistent/mcpcell-init";
  cell = Cell::Create(spec, options);
  ASSERT_FALSE(cell.ok());
  EXPECT_THAT(cell.error().message, HasSubstr("/nonexistent/mcpcell-init"));
  EXPECT_THAT(cell.error().message, HasSubstr("ENOENT"));
  EXPECT_TRUE(std::filesystem::is_empty(state_.path() + "/cells"));
}

}  // namespace
}  // namespace mcpcell::sandbox
