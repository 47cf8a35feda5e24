// Cells over snapshot layers (CellSpec::layers, issue 28) and the host's view of a live
// cell's writable state (Cell::WritableLayers). The test builds layer directories the way
// the snapshot store keeps them: canonical ownership (on disk, the id inside the cell),
// whiteouts as char 0/0, opaque directories with user.overlay.opaque=y. Needs a root
// server (idmapped mounts); as the unprivileged variant it checks the clear refusal.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "sandbox/linux/hostname.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::ProbeSpec;
using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

std::string ReadHostFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Put(const std::string& path, const std::string& data, uid_t uid, mode_t mode) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << data;
  ASSERT_EQ(::chown(path.c_str(), uid, uid), 0) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

void Dir(const std::string& path, uid_t uid, mode_t mode) {
  fs::create_directories(path);
  ASSERT_EQ(::chown(path.c_str(), uid, uid), 0) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

// Every entry under `root`: type, mode, owner, device number, opaque xattr and content.
// Equal before and after means the cells changed nothing of the layer.
std::string TreeFingerprint(const std::string& root) {
  std::map<std::string, std::string> entries;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    std::ostringstream line;
    line << std::oct << st.st_mode << std::dec << ' ' << st.st_uid << ':' << st.st_gid << ' '
         << st.st_rdev << ' ' << st.st_nlink;
    char xattr[16] = {};
    if (::lgetxattr(e.path().c_str(), "user.overlay.opaque", xattr, sizeof xattr - 1) > 0) {
      line << " opaque=" << xattr;
    }
    if (S_ISREG(st.st_mode)) line << ' ' << ReadHostFile(e.path());
    entries[e.path().string().substr(root.size())] = line.str();
  }
  std::string out;
  for (const auto& [path, line] : entries) out += path + " " + line + "\n";
  return out;
}

// A minimal capture, as the snapshot store does it: copies `from` (an upper) to `to` with
// canonical ownership (host id - base), whiteouts, symlinks and opaque xattrs kept.
void CaptureCanonical(const std::string& from, const std::string& to, uint32_t uid_base,
                      uint32_t gid_base) {
  struct stat st;
  ASSERT_EQ(::lstat(from.c_str(), &st), 0) << from;
  if (S_ISDIR(st.st_mode)) {
    ASSERT_EQ(::mkdir(to.c_str(), 0700), 0) << to;
    for (const auto& e : fs::directory_iterator(from)) {
      CaptureCanonical(e.path(), to + "/" + e.path().filename().string(), uid_base, gid_base);
    }
    char xattr[4] = {};
    if (::lgetxattr(from.c_str(), "user.overlay.opaque", xattr, sizeof xattr) == 1) {
      ASSERT_EQ(::setxattr(to.c_str(), "user.overlay.opaque", xattr, 1, 0), 0);
    }
  } else if (S_ISREG(st.st_mode)) {
    fs::copy_file(from, to);
  } else if (S_ISLNK(st.st_mode)) {
    fs::create_symlink(fs::read_symlink(from), to);
  } else {
    ASSERT_EQ(::mknod(to.c_str(), st.st_mode, st.st_rdev), 0) << to;
  }
  ASSERT_EQ(::lchown(to.c_str(), st.st_uid - uid_base, st.st_gid - gid_base), 0) << to;
  if (!S_ISLNK(st.st_mode)) {
    ASSERT_EQ(::chmod(to.c_str(), st.st_mode & 07777), 0) << to;
  }
}

class LayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty()) << "mkdtemp failed";
    if (::geteuid() != 0) return;
    snap_ = state_.path() + "/snap-" + std::to_string(++serial_);
    // "/": a file of the sandbox user, one of root, a whiteout over the template's
    // nsswitch.conf and an opaque /etc/alternatives (the template's has entries).
    Dir(snap_ + "/root/etc", 0, 0755);
    Put(snap_ + "/root/etc/snapfile", "from the snapshot\n", 1000, 0640);
    Put(snap_ + "/root/etc/rootonly", "root's\n", 0, 0600);
    ASSERT_EQ(::mknod((snap_ + "/root/etc/nsswitch.conf").c_str(), S_IFCHR | 0, makedev(0, 0)), 0);
    Dir(snap_ + "/root/etc/alternatives", 0, 0755);
    ASSERT_EQ(
        ::setxattr((snap_ + "/root/etc/alternatives").c_str(), "user.overlay.opaque", "y", 1, 0),
        0);
    Put(snap_ + "/root/etc/alternatives/mine", "mine\n", 0, 0644);
    Dir(snap_ + "/usr/local/share/snap", 1000, 0755);
    Put(snap_ + "/usr/local/share/snap/data.txt", "usr data\n", 1000, 0644);
    Dir(snap_ + "/workspace/proj", 1000, 0755);
    Put(snap_ + "/workspace/proj/main.py", "print(1)\n", 1000, 0644);
    ASSERT_EQ(::link((snap_ + "/workspace/proj/main.py").c_str(),
                     (snap_ + "/workspace/proj/same.py").c_str()),
              0);
  }

  CellSpec LayeredSpec() {
    CellSpec spec = ProbeSpec(state_);
    spec.layers = {
        {"/", snap_ + "/root"}, {"/usr", snap_ + "/usr"}, {"/workspace", snap_ + "/workspace"}};
    return spec;
  }

  std::unique_ptr<Cell> NewCell(const CellSpec& spec) {
    Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, TestCreateOptions());
    EXPECT_TRUE(cell.ok()) << cell.error().message;
    if (!cell) return nullptr;
    return std::move(cell).value();
  }

  static std::string Sh(Cell& cell, const std::string& script) {
    celltest::ProbeRun r = RunInCell(cell, {"/bin/sh", "-c", script});
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.exit_code, 0) << script << "\n" << r.err;
    return r.out;
  }

  static TempStateDir& SharedState() {
    static TempStateDir state;
    return state;
  }
  TempStateDir& state_ = SharedState();
  std::string snap_;
  static inline int serial_ = 0;
};

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "snapshot layers need a root server"

TEST_F(LayersTest, ACellSeesTheLayersFilesWithTheirOwnersAndModes) {
  REQUIRE_ROOT();
  auto cell = NewCell(LayeredSpec());
  ASSERT_TRUE(cell);
  EXPECT_EQ(Sh(*cell,
               "stat -c '%n %u %g %a' /etc/snapfile /etc/rootonly "
               "/usr/local/share/snap/data.txt /workspace/proj/main.py /workspace"),
            "/etc/snapfile 1000 1000 640\n/etc/rootonly 0 0 600\n"
            "/usr/local/share/snap/data.txt 1000 1000 644\n"
            "/workspace/proj/main.py 1000 1000 644\n/workspace 1000 1000 755\n");
  EXPECT_EQ(Sh(*cell, "cat /etc/snapfile /usr/local/share/snap/data.txt /workspace/proj/same.py"),
            "from the snapshot\nusr data\nprint(1)\n");
  // The whiteout hides the template's file; the opaque dir hides the template's entries.
  EXPECT_EQ(Sh(*cell, "test -e /etc/nsswitch.conf && echo present || echo absent"), "absent\n");
  ASSERT_FALSE(fs::is_empty(cell->spec().rootfs.skeleton_dir + "/etc/alternatives"));
  EXPECT_EQ(Sh(*cell, "ls -A /etc/alternatives"), "mine\n");
  // The template's other files and the cell's own /etc are still there.
  EXPECT_EQ(Sh(*cell, "test -e /etc/resolv.conf && cat /etc/hostname"),
            CellHostname(cell->spec()) + "\n");
  // Root's 0600 file stays root's: the sandbox user cannot read it.
  celltest::ProbeRun r = RunInCell(*cell, {"/bin/cat", "/etc/rootonly"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Permission denied"));
}

TEST_F(LayersTest, ACellModifiesAndDeletesLayerFilesWithoutChangingTheLayers) {
  REQUIRE_ROOT();
  const std::string before = TreeFingerprint(snap_);
  ASSERT_THAT(before, HasSubstr("main.py"));
  auto cell = NewCell(LayeredSpec());
  ASSERT_TRUE(cell);
  Sh(*cell,
     "echo more >> /etc/snapfile && rm /workspace/proj/main.py && "
     "echo new > /usr/local/share/snap/data.txt && echo x > /workspace/proj/same.py && "
     "mkdir /workspace/proj/sub && rm -r /usr/local/share/snap/data.txt");
  EXPECT_EQ(Sh(*cell,
               "cat /etc/snapfile; ls /workspace/proj; cat /workspace/proj/same.py; "
               "ls -A /usr/local/share/snap"),
            "from the snapshot\nmore\nsame.py\nsub\nx\n");
  EXPECT_EQ(TreeFingerprint(snap_), before);
  ASSERT_TRUE(cell->Destroy().ok());
  EXPECT_EQ(TreeFingerprint(snap_), before);
}

TEST_F(LayersTest, AWorkspaceOverLayersKeepsItsSizeLimit) {
  REQUIRE_ROOT();
  CellSpec spec = LayeredSpec();
  spec.tmpfs.workspace_bytes = 2 << 20;
  auto cell = NewCell(spec);
  ASSERT_TRUE(cell);
  celltest::ProbeRun r =
      RunInCell(*cell, {"/bin/sh", "-c", "head -c 4194304 /dev/zero > /workspace/big; echo $?"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NE(r.out, "0\n");
  EXPECT_THAT(r.err, HasSubstr("No space left on device"));
  EXPECT_EQ(Sh(*cell, "cat /workspace/proj/main.py"), "print(1)\n");
}

TEST_F(LayersTest, TwoCellsOverTheSameLayersDoNotSeeEachOthersChanges) {
  REQUIRE_ROOT();
  auto a = NewCell(LayeredSpec());
  auto b = NewCell(LayeredSpec());
  ASSERT_TRUE(a && b);
  Sh(*a, "echo a >> /etc/snapfile && rm /workspace/proj/main.py && echo a > /workspace/a");
  EXPECT_EQ(Sh(*b, "cat /etc/snapfile; ls /workspace/proj; ls /workspace"),
            "from the snapshot\nmain.py\nsame.py\nproj\n");
  EXPECT_EQ(Sh(*a, "cat /etc/snapfile; ls /workspace"), "from the snapshot\na\na\nproj\n");
}

TEST_F(LayersTest, WritableLayersShowWhatTheCellWroteAndDeleted) {
  REQUIRE_ROOT();
  // /var of this layer belongs to the sandbox user, so it may add to and delete from the
  // template's /var (not /etc: cell init writes the cell's /etc files into the upper, whose
  // /etc is then root's); /usr/local/share/snap is the user's too.
  Dir(snap_ + "/own/var", 1000, 0755);
  CellSpec spec = LayeredSpec();
  spec.layers.insert(spec.layers.begin(), CellLayer{"/", snap_ + "/own"});
  auto cell = NewCell(spec);
  ASSERT_TRUE(cell);
  Sh(*cell,
     "echo x > /var/x && echo y > /usr/local/share/snap/y && echo z > /workspace/z && "
     "rm /var/tmp /workspace/proj/main.py");
  Result<CellWritableLayers> layers = cell->WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  ASSERT_FALSE(layers->single_mapping);
  EXPECT_EQ(layers->uid_base, cell->id_map().host_uid_base);
  EXPECT_EQ(ReadHostFile(layers->root_upper + "/var/x"), "x\n");
  struct stat st;
  ASSERT_EQ(::lstat((layers->root_upper + "/var/x").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid - layers->uid_base, 1000u);
  EXPECT_EQ(st.st_gid - layers->gid_base, 1000u);
  ASSERT_EQ(::lstat((layers->root_upper + "/var/tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) << std::oct << st.st_mode;
  ASSERT_EQ(layers->system_uppers.size(), 1u);
  EXPECT_EQ(layers->system_uppers[0].first, "/usr");
  EXPECT_EQ(ReadHostFile(layers->system_uppers[0].second + "/local/share/snap/y"), "y\n");
  ASSERT_TRUE(layers->workspace_is_upper);
  EXPECT_EQ(ReadHostFile(layers->workspace + "/z"), "z\n");
  ASSERT_EQ(::lstat((layers->workspace + "/proj/main.py").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  // Nothing the cell did not write is in the uppers.
  EXPECT_FALSE(fs::exists(layers->workspace + "/proj/same.py"));
  EXPECT_FALSE(fs::exists(layers->root_upper + "/etc/snapfile"));
  ASSERT_TRUE(cell->Destroy().ok());
  EXPECT_FALSE(cell->WritableLayers().ok());
}

TEST_F(LayersTest, ADirectoryRemadeOverALayersOneIsOpaqueInTheUpper) {
  REQUIRE_ROOT();
  auto cell = NewCell(LayeredSpec());
  ASSERT_TRUE(cell);
  Sh(*cell, "rm -r /workspace/proj && mkdir /workspace/proj && echo n > /workspace/proj/new");
  EXPECT_EQ(Sh(*cell, "ls -A /workspace/proj"), "new\n");
  Result<CellWritableLayers> layers = cell->WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  char opaque[4] = {};
  ASSERT_EQ(::lgetxattr((layers->workspace + "/proj").c_str(), "user.overlay.opaque", opaque,
                        sizeof opaque),
            1)
      << "the kernel's tmpfs may lack user xattrs (before 6.6)";
  EXPECT_EQ(opaque[0], 'y');
  EXPECT_EQ(ReadHostFile(layers->workspace + "/proj/new"), "n\n");
  EXPECT_FALSE(fs::exists(layers->workspace + "/proj/main.py"));
}

TEST_F(LayersTest, ACapturedUpperRestoredAsALayerGivesBackTheCellsFiles) {
  REQUIRE_ROOT();
  // Cell 1 over the snapshot changes things; its uppers, captured with canonical owners,
  // become the top layers of cell 2 (a snapshot of a snapshot: restore and fork).
  Dir(snap_ + "/own/var", 1000, 0755);
  CellSpec spec = LayeredSpec();
  spec.layers.insert(spec.layers.begin(), CellLayer{"/", snap_ + "/own"});
  auto first = NewCell(spec);
  ASSERT_TRUE(first);
  Sh(*first,
     "echo v > /var/v && rm /var/tmp && echo more >> /etc/snapfile && ln -s v /var/link && "
     "rm /workspace/proj/main.py && chmod 600 /workspace/proj/same.py");
  Result<CellWritableLayers> layers = first->WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  const std::string captured = snap_ + "/captured";
  ASSERT_EQ(::mkdir(captured.c_str(), 0755), 0);
  CaptureCanonical(layers->root_upper, captured + "/root", layers->uid_base, layers->gid_base);
  CaptureCanonical(layers->workspace, captured + "/ws", layers->uid_base, layers->gid_base);
  ASSERT_TRUE(first->Destroy().ok());

  CellSpec restored = spec;
  restored.id = GenerateCellId();
  restored.layers.insert(restored.layers.begin(), CellLayer{"/", captured + "/root"});
  restored.layers.insert(restored.layers.begin(), CellLayer{"/workspace", captured + "/ws"});
  auto second = NewCell(restored);
  ASSERT_TRUE(second);
  EXPECT_EQ(Sh(*second,
               "cat /var/v /etc/snapfile; readlink /var/link; ls /workspace/proj; "
               "stat -c '%u %a' /var/v /workspace/proj/same.py; "
               "test -e /var/tmp || echo no-var-tmp"),
            "v\nfrom the snapshot\nmore\nv\nsame.py\n1000 644\n1000 600\nno-var-tmp\n");
  // The restored cell's own identity wins over the captured /etc files.
  EXPECT_EQ(Sh(*second, "cat /etc/hostname"), CellHostname(second->spec()) + "\n");
}

TEST_F(LayersTest, WritableLayersOfACellWithoutLayersNameItsUpperAndWorkspace) {
  auto cell = NewCell(ProbeSpec(state_));
  ASSERT_TRUE(cell);
  Sh(*cell, "echo w > /workspace/w");
  Result<CellWritableLayers> layers = cell->WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  EXPECT_FALSE(layers->workspace_is_upper);
  EXPECT_EQ(layers->workspace, cell->dir() + "/workspace");
  EXPECT_EQ(ReadHostFile(layers->workspace + "/w"), "w\n");
  // Cell init writes the cell's /etc/hostname into the root's upper.
  EXPECT_EQ(ReadHostFile(layers->root_upper + "/etc/hostname"), CellHostname(cell->spec()) + "\n");
}

TEST_F(LayersTest, WritableLayersReachASizedTmpfsWorkspaceInsideTheCell) {
  CellSpec spec = ProbeSpec(state_);
  spec.tmpfs.workspace_bytes = 8 << 20;
  auto cell = NewCell(spec);
  ASSERT_TRUE(cell);
  Sh(*cell, "echo t > /workspace/t");
  Result<CellWritableLayers> layers = cell->WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  EXPECT_FALSE(layers->workspace_is_upper);
  EXPECT_EQ(ReadHostFile(layers->workspace + "/t"), "t\n");
  EXPECT_FALSE(fs::exists(cell->dir() + "/workspace"));
}

// The fd numbers cell init holds (as root, from the host: init is not dumpable).
std::string InitFds(const Cell& cell) {
  std::vector<int> fds;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(cell.init_pid()) + "/fd"))
    fds.push_back(std::stoi(e.path().filename().string()));
  std::sort(fds.begin(), fds.end());
  std::string out;
  for (int fd : fds) out += std::to_string(fd) + " ";
  return out;
}

TEST_F(LayersTest, AParkedCellTakesNoRequestUntilUnparkedOverTheLayers) {
  REQUIRE_ROOT();
  const std::string before = TreeFingerprint(snap_);
  Result<std::unique_ptr<Cell>> parked = Cell::CreateParked(ProbeSpec(state_), TestCreateOptions());
  ASSERT_TRUE(parked.ok()) << parked.error().message;
  Cell& cell = **parked;
  EXPECT_TRUE(cell.parked());
  EXPECT_FALSE(cell.usable());
  ExecOptions run_true;
  run_true.argv = {"/bin/true"};
  Result<ExecResult> early = cell.Exec(run_true);
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.error().message, HasSubstr("is parked"));

  const CellSpec layered = LayeredSpec();
  Status unparked = cell.Unpark(layered.layers);
  ASSERT_TRUE(unparked.ok()) << unparked.error().message;
  EXPECT_FALSE(cell.parked());
  EXPECT_TRUE(cell.usable());
  EXPECT_EQ(cell.spec().layers.size(), 3u);
  EXPECT_EQ(Sh(cell, "cat /etc/snapfile /usr/local/share/snap/data.txt /workspace/proj/main.py"),
            "from the snapshot\nusr data\nprint(1)\n");
  EXPECT_EQ(Sh(cell, "test -e /etc/nsswitch.conf && echo present || echo absent"), "absent\n");
  Sh(cell, "echo changed > /workspace/proj/main.py");
  EXPECT_EQ(TreeFingerprint(snap_), before);
  // Its writable layers are where a made cell's are: a snapshot of it works the same.
  Result<CellWritableLayers> layers = cell.WritableLayers();
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  EXPECT_TRUE(layers->workspace_is_upper);
  EXPECT_EQ(ReadHostFile(layers->workspace + "/proj/main.py"), "changed\n");
  // A second Unpark is refused; the cell keeps working.
  Status again = cell.Unpark({});
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("is not parked"));
  EXPECT_EQ(Sh(cell, "cat /workspace/proj/main.py"), "changed\n");
  ASSERT_TRUE(cell.Destroy().ok());
  EXPECT_FALSE(fs::exists(cell.dir()));
}

TEST_F(LayersTest, AnUnparkedCellHoldsTheSameFdsAsAMadeOneAndLeaksNoneToPrograms) {
  REQUIRE_ROOT();
  const CellSpec layered = LayeredSpec();
  auto made = NewCell(layered);
  ASSERT_TRUE(made);
  Result<std::unique_ptr<Cell>> parked = Cell::CreateParked(ProbeSpec(state_), TestCreateOptions());
  ASSERT_TRUE(parked.ok()) << parked.error().message;
  ASSERT_TRUE((*parked)->Unpark(layered.layers).ok());
  // Programs see only 0-3; and once each cell has served a request, init's control loop
  // (which opens its signalfd after reporting ready) is running in both.
  EXPECT_EQ(Sh(**parked, "ls /proc/self/fd"), "0\n1\n2\n3\n");
  EXPECT_EQ(Sh(*made, "ls /proc/self/fd"), "0\n1\n2\n3\n");
  // Init sends an exec's exit on the exec's event socket and closes that socket just after,
  // so a fd may linger for a moment after Sh returns: wait (bounded) for both to settle.
  std::string parked_fds = InitFds(**parked), made_fds = InitFds(*made);
  for (int i = 0; i < 200 && parked_fds != made_fds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    parked_fds = InitFds(**parked);
    made_fds = InitFds(*made);
  }
  EXPECT_EQ(parked_fds, made_fds);
  EXPECT_EQ(Sh(**parked, "hostname"), CellHostname((*parked)->spec()) + "\n");
}

TEST_F(LayersTest, AParkedCellRefusesLayersThatAreNotDirectoriesAndStaysUnusable) {
  REQUIRE_ROOT();
  Result<std::unique_ptr<Cell>> parked = Cell::CreateParked(ProbeSpec(state_), TestCreateOptions());
  ASSERT_TRUE(parked.ok()) << parked.error().message;
  Status bad = (*parked)->Unpark({{"/", state_.path() + "/no-such-layer"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("no-such-layer"));
  EXPECT_FALSE((*parked)->usable());
  EXPECT_TRUE((*parked)->Destroy().ok());
}

TEST_F(LayersTest, AnUnprivilegedServerRefusesLayersWithTheReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "checks the single-mapping refusal";
  CellSpec spec = ProbeSpec(state_);
  spec.layers = {{"/", state_.path()}};
  Result<std::unique_ptr<Cell>> cell = Cell::Create(spec, TestCreateOptions());
  ASSERT_FALSE(cell.ok());
  EXPECT_THAT(cell.error().message, HasSubstr("snapshot layers need a server running as root"));
}

}  // namespace
}  // namespace mcpcell::sandbox
