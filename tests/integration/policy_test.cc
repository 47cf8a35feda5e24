// Policies in real cells: every cell here is built from a profile through the loader, the
// flag composition and the compiler (the same path `mcpcell serve` takes). Checks:
// read-only mounts fail writes with EROFS, the output directory receives files on the host
// with sane ownership, persistent workspaces outlive the cell and come back, ephemeral ones
// are gone, dangerous mounts are refused (loader and, behind it, ValidateCellSpec), and the
// profile's limits are what the cell gets.
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "policies/compiler.h"
#include "policies/loader.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox::celltest {
namespace {

namespace fs = std::filesystem;
using policies::ApplyOverrides;
using policies::CompileCellSpec;
using policies::ParsePolicy;
using policies::Policy;
using policies::PolicyOverrides;
using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PolicyCells : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    char tmpl[] = "/tmp/mcpcell-pol-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    host_ = tmpl;
    // Unprivileged runs (setpriv to 65534) must be able to reach their own dirs.
    ::chmod(host_.c_str(), 0755);
    fs::create_directories(host_ + "/project");
    std::ofstream(host_ + "/project/hello.txt") << "hello from the host\n";
    // Writable by anyone: only the read-only mount may stop the cell's writes.
    ::chmod((host_ + "/project").c_str(), 0777);
    ::chmod((host_ + "/project/hello.txt").c_str(), 0666);
  }
  void TearDown() override { fs::remove_all(host_); }

  // Profile text -> loader -> flags -> compiler -> a live cell with the probe mounted.
  std::unique_ptr<Cell> CellFrom(const std::string& profile, const PolicyOverrides& flags = {}) {
    auto policy = ParsePolicy(profile, "test.toml", {state_.path()});
    EXPECT_TRUE(policy) << policy.error().message;
    if (!policy) return nullptr;
    auto composed = ApplyOverrides(*policy, flags, state_.path());
    EXPECT_TRUE(composed) << composed.error().message;
    if (!composed) return nullptr;
    composed->filesystem.mounts.push_back({ProbeHostDir(), kProbeDirInCell, false});
    auto spec = CompileCellSpec(*composed, GenerateCellId(), state_.path(), "");
    EXPECT_TRUE(spec) << spec.error().message;
    if (!spec) return nullptr;
    auto cell = Cell::Create(*spec, TestCreateOptions());
    EXPECT_TRUE(cell) << cell.error().message;
    return cell ? std::move(*cell) : nullptr;
  }

  ProbeRun Sh(Cell& cell, const std::string& script) {
    return RunInCell(cell, {"/bin/sh", "-c", script});
  }

  TempStateDir state_;
  std::string host_;
};

// The laptop case: --mount ~/project:/workspace/project:ro --output ~/agent-out.
TEST_F(PolicyCells, ReadOnlyMountAndOutputDirectory) {
  PolicyOverrides flags;
  flags.mounts = {host_ + "/project:/workspace/project:ro"};
  flags.output_dir = host_ + "/agent-out";
  auto cell = CellFrom("", flags);
  ASSERT_TRUE(cell);

  ProbeRun read = Sh(*cell, "cat /workspace/project/hello.txt");
  ASSERT_TRUE(read.ok) << read.error;
  EXPECT_EQ(read.out, "hello from the host\n");
  // Writes into the read-only mount fail with EROFS, new files and existing ones alike.
  ProbeRun w1 = RunProbe(*cell, {"write", "/workspace/project/new.txt"});
  EXPECT_EQ(w1.out, "EROFS\n") << w1.err;
  ProbeRun w2 = RunProbe(*cell, {"write", "/workspace/project/hello.txt"});
  EXPECT_EQ(w2.out, "EROFS\n") << w2.err;
  ProbeRun opts = Sh(*cell, "grep ' /workspace/project ' /proc/self/mountinfo");
  EXPECT_THAT(opts.out, HasSubstr("ro,nosuid,nodev"));
  EXPECT_EQ(Slurp(host_ + "/project/hello.txt"), "hello from the host\n");
  EXPECT_FALSE(fs::exists(host_ + "/project/new.txt"));

  // The output directory is writable and the file shows up on the host.
  ProbeRun out =
      Sh(*cell, "echo result > /output/report.txt && grep ' /output ' /proc/self/mountinfo");
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("rw,nosuid,nodev"));
  std::string host_file = host_ + "/agent-out/report.txt";
  EXPECT_EQ(Slurp(host_file), "result\n");
  struct stat st;
  ASSERT_EQ(::stat(host_file.c_str(), &st), 0);
  if (cell->id_map().single) {
    // Unprivileged (desktop): the sandbox user is the server's user on the host.
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_gid, ::getegid());
  } else {
    // Root: the cell's own host uid (its id range + the sandbox uid), never root.
    EXPECT_EQ(st.st_uid, cell->id_map().host_uid_base + cell->spec().sandbox_uid);
    EXPECT_NE(st.st_uid, 0u);
  }
  ASSERT_TRUE(cell->Destroy());
  EXPECT_EQ(Slurp(host_file), "result\n");  // the output outlives the cell
  EXPECT_TRUE(fs::exists(host_ + "/project/hello.txt"));
}

TEST_F(PolicyCells, PersistentWorkspaceComesBack) {
  std::string ws = host_ + "/ws";
  std::string profile =
      "[filesystem]\nworkspace = \"persistent\"\nworkspace_dir = \"" + ws + "\"\n";
  {
    auto cell = CellFrom(profile);
    ASSERT_TRUE(cell);
    ProbeRun w = Sh(*cell, "echo kept > /workspace/notes.txt && mkdir /workspace/d && pwd");
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_EQ(w.out, "/workspace\n");
    ASSERT_TRUE(cell->Destroy());
  }
  EXPECT_EQ(Slurp(ws + "/notes.txt"), "kept\n");  // survived the cell on the host
  // A cell holding the first id range, so that (as root) the next cell gets another range:
  // it must still own, and so be able to change, what the earlier cell left.
  auto holder = CellFrom("");
  ASSERT_TRUE(holder);
  auto again = CellFrom(profile);
  ASSERT_TRUE(again);
  ProbeRun r = Sh(*again,
                  "cat /workspace/notes.txt && echo more >> /workspace/notes.txt && "
                  "touch /workspace/d/new && echo wrote");
  EXPECT_EQ(r.out, "kept\nwrote\n") << r.err;
  EXPECT_EQ(Slurp(ws + "/notes.txt"), "kept\nmore\n");
  ASSERT_TRUE(again->Destroy());
  ASSERT_TRUE(holder->Destroy());
}

TEST_F(PolicyCells, EphemeralWorkspaceIsGoneAfterTheCell) {
  // An ephemeral workspace lives in a tmpfs inside the cell sized by limits.disk: it has a
  // real disk limit, never touches the host's disk, and dies with the cell.
  auto cell = CellFrom("[filesystem]\nworkspace = \"ephemeral\"\n[limits]\ndisk = \"64MiB\"\n");
  ASSERT_TRUE(cell);
  ProbeRun w = Sh(*cell, "echo temp > /workspace/t.txt && cat /workspace/t.txt");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(w.out, "temp\n");
  ProbeRun df = Sh(*cell, "stat -f -c '%T %b %S' /workspace");
  ASSERT_EQ(df.exit_code, 0) << df.err;
  EXPECT_EQ(df.out, "tmpfs 16384 4096\n") << "the workspace should be a 64 MiB tmpfs";
  ProbeRun fill = Sh(*cell, "head -c 80000000 /dev/zero > /workspace/big; echo rc=$?");
  EXPECT_NE(fill.out.find("rc=1"), std::string::npos) << fill.out << fill.err;
  EXPECT_NE(fill.err.find("No space left on device"), std::string::npos) << fill.err;
  EXPECT_FALSE(fs::exists(cell->dir() + "/workspace")) << "no host directory for a tmpfs workspace";
  ASSERT_TRUE(cell->Destroy());
  EXPECT_FALSE(fs::exists(cell->dir()));
}

TEST_F(PolicyCells, DangerousMountsAreRefused) {
  std::string link = host_ + "/project/innocent";
  ASSERT_EQ(::symlink("/etc", link.c_str()), 0);
  struct Case {
    std::string source, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"/", "it is the host's root filesystem"},
           {"/proc", "it is or is under /proc"},
           {"/etc", "it is or is under /etc"},
           {"/var/run/docker.sock", "container runtime socket"},
           {state_.path(), "server's state directory"},
           {link, "resolves to \"/etc\""},
       }) {
    auto p = ParsePolicy("[[filesystem.mounts]]\nsource = \"" + c.source + "\"\ntarget = \"/x\"\n",
                         "bad.toml", {state_.path()});
    ASSERT_FALSE(p) << c.source;
    EXPECT_THAT(p.error().message, HasSubstr("bad.toml:2:10: filesystem.mounts[0].source: "));
    EXPECT_THAT(p.error().message, HasSubstr(c.expect)) << c.source;
  }
  // Defence in depth: a spec built without the loader is refused by the mechanism too.
  CellSpec spec = ProbeSpec(state_);
  spec.mounts.push_back(CellMount{link, "/x", false});
  auto cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_FALSE(cell);
  EXPECT_THAT(cell.error().message, HasSubstr("is a host system path"));
  // ... and a socket (what a container runtime's API is), wherever it lives.
  std::string sock_dir = host_ + "/sock";
  fs::create_directories(sock_dir);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::string sock = sock_dir + "/api.sock";
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  CellSpec sock_spec = ProbeSpec(state_);
  sock_spec.mounts.push_back(CellMount{sock, "/x.sock", false});
  auto sock_cell = Cell::Create(sock_spec, TestCreateOptions());
  ::close(fd);
  ASSERT_FALSE(sock_cell);
  EXPECT_THAT(sock_cell.error().message, HasSubstr("is a socket"));
  auto sock_policy = ParsePolicy(
      "[[filesystem.mounts]]\nsource = \"" + sock + "\"\ntarget = \"/x.sock\"\n", "s.toml");
  ASSERT_FALSE(sock_policy);
  EXPECT_THAT(sock_policy.error().message, HasSubstr("it is a socket"));
}

TEST_F(PolicyCells, ProfileLimitsAreEnforced) {
  auto cell = CellFrom(
      "[limits]\nmemory = \"96MiB\"\npids = 40\nopen_files = 77\ndisk = \"24MiB\"\n"
      "tmp = \"8MiB\"\nmax_file_size = \"4MiB\"\n");
  ASSERT_TRUE(cell);
  ProbeRun nofile = Sh(*cell, "ulimit -n");
  EXPECT_EQ(nofile.out, "77\n");
  // /tmp is 8MiB: writing 12MiB fails with ENOSPC (the file size rlimit is 4MiB there, so
  // write 3MiB files).
  ProbeRun tmp = Sh(*cell,
                    "for i in 1 2 3 4; do dd if=/dev/zero of=/tmp/f$i bs=1M count=3 2>/dev/null "
                    "|| { echo full at $i; exit 0; }; done; echo not full");
  EXPECT_EQ(tmp.out, "full at 3\n") << tmp.err;
  // The writable layers of the root are a tmpfs of `disk` bytes; the overlay reports it.
  ProbeRun disk = Sh(*cell, "echo $(( $(stat -f -c '%b * %S' /) ))");
  EXPECT_EQ(disk.out, std::to_string(24ull << 20) + "\n") << disk.err;
  // A file larger than max_file_size is cut by RLIMIT_FSIZE.
  ProbeRun fsize = Sh(*cell,
                      "dd if=/dev/zero of=/workspace/big bs=1M count=6 2>&1; "
                      "stat -c %s /workspace/big");
  EXPECT_THAT(fsize.out, HasSubstr("4194304")) << fsize.out;
  if (cell->cgroup()) {
    EXPECT_EQ(cell->cgroup()->limits().memory_max_bytes, 96ull << 20);
    EXPECT_EQ(cell->cgroup()->limits().pids_max, 40u);
    // The cgroup's pid limit is real: 60 sleepers cannot all start.
    (void)Sh(*cell,
             "n=0; for i in $(seq 60); do sleep 5 >/dev/null 2>&1 & done 2>/dev/null; "
             "echo started");
    auto usage = cell->Usage();
    ASSERT_TRUE(usage) << usage.error().message;
    EXPECT_LE(usage->pids_current, 40u);
  } else {
    ASSERT_FALSE(cell->warnings().empty());
    EXPECT_THAT(cell->warnings()[0], HasSubstr("limits not enforced"));
  }
  ASSERT_TRUE(cell->Destroy());
}

TEST_F(PolicyCells, EveryShippedProfileMakesACell) {
  for (const std::string& name : policies::ShippedPolicyNames()) {
    auto policy = policies::ResolvePolicy(name, {state_.path()});
    ASSERT_TRUE(policy) << policy.error().message;
    auto spec = CompileCellSpec(*policy, GenerateCellId(), state_.path(), "");
    ASSERT_TRUE(spec) << spec.error().message;
    auto cell = Cell::Create(*spec, TestCreateOptions());
    ASSERT_TRUE(cell) << name << ": " << cell.error().message;
    ProbeRun r = RunInCell(**cell, {"/bin/sh", "-c", "echo $MCPCELL_POLICY; ulimit -n"});
    EXPECT_EQ(r.out, name + "\n" + std::to_string(policy->limits.open_files) + "\n") << name;
    ASSERT_TRUE((*cell)->Destroy());
  }
}

// The commands: `mcpcell policy check|show` and `mcpcell serve`'s policy flags.
struct CommandRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CommandRun RunMcpcell(const std::string& args) {
  CommandRun r;
  std::string cmd = std::string(MCPCELL_BIN) + " " + args + " </dev/null 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST_F(PolicyCells, PolicyCommands) {
  std::string bad = host_ + "/bad.toml";
  std::ofstream(bad) << "[limits]\nmemory = \"lots\"\n";
  CommandRun check_bad = RunMcpcell("policy check " + bad);
  EXPECT_EQ(check_bad.status, 1);
  EXPECT_EQ(check_bad.output, "mcpcell policy check: " + bad +
                                  ":2:10: limits.memory: expected a size like \"512MiB\", got "
                                  "\"lots\"\n");
  std::string good = host_ + "/good.toml";
  std::ofstream(good) << "[limits]\nmemory = \"300MiB\"\n[[filesystem.mounts]]\nsource = \"" +
                             host_ + "/project\"\ntarget = \"/workspace/p\"\n";
  CommandRun check_good = RunMcpcell("policy check --state-dir " + state_.path() + " " + good);
  EXPECT_EQ(check_good.status, 0) << check_good.output;
  EXPECT_THAT(check_good.output, HasSubstr("limits.memory_max_bytes: 314572800 (300MiB)"));
  EXPECT_THAT(check_good.output,
              HasSubstr("mount: " + host_ + "/project -> /workspace/p (ro,nosuid,nodev)"));
  CommandRun show = RunMcpcell("policy show offline-strict");
  EXPECT_EQ(show.status, 0);
  EXPECT_THAT(show.output, HasSubstr("memory = \"256MiB\""));
  EXPECT_THAT(show.output, HasSubstr("enabled = [\"run_code\""));
  CommandRun serve = RunMcpcell("serve --state-dir " + state_.path() + " --mount /etc:/e");
  EXPECT_EQ(serve.status, 2);
  EXPECT_THAT(serve.output,
              HasSubstr("--mount /etc:/e: refusing to mount \"/etc\": it is or is under /etc"));
  CommandRun serve_bad = RunMcpcell("serve --state-dir " + state_.path() + " --policy " + bad);
  EXPECT_EQ(serve_bad.status, 2);
  EXPECT_THAT(serve_bad.output, HasSubstr(":2:10: limits.memory: expected a size"));
}

}  // namespace
}  // namespace mcpcell::sandbox::celltest
