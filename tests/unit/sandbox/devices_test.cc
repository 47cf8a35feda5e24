// The cell's own device nodes (devices.h): made where the process may mknod, copies of the
// host's nodes (same device, owner and mode) on inodes of their own; refused with a reason
// elsewhere, leaving nothing behind. Root-only checks say so and skip otherwise.
#include "sandbox/linux/devices.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sandbox/linux/host_probe.h"

namespace mcpcell::sandbox {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "mcpcell-devices-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool CanMakeNodes() { return DeviceNodesUnavailableReason().empty(); }

TEST(CellDeviceNodes, ReasonMatchesPrivilege) {
  const std::string reason = DeviceNodesUnavailableReason();
  if (::geteuid() != 0) {
    EXPECT_NE(reason.find("not root"), std::string::npos) << reason;
  } else {
    // Root in a container without CAP_MKNOD or in a user namespace gets a reason; on a
    // plain host root none.
    if (!reason.empty()) GTEST_LOG_(INFO) << "root, but: " << reason;
  }
}

TEST(CellDeviceNodes, AreCopiesOfTheHostsOnTheirOwnInodes) {
  if (!CanMakeNodes()) GTEST_SKIP() << "cannot mknod here: " << DeviceNodesUnavailableReason();
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.path() + "/dev";
  Status made = MakeCellDeviceNodes(dir);
  ASSERT_TRUE(made.ok()) << made.error().message;
  struct stat d;
  ASSERT_EQ(::stat(dir.c_str(), &d), 0);
  EXPECT_EQ(d.st_mode & 07777, 0711u);
  for (const char* node : kCellDeviceNodes) {
    struct stat host, mine;
    ASSERT_EQ(::stat((std::string("/dev/") + node).c_str(), &host), 0) << node;
    ASSERT_EQ(::lstat((dir + "/" + node).c_str(), &mine), 0) << node;
    EXPECT_TRUE(S_ISCHR(mine.st_mode)) << node;
    EXPECT_EQ(mine.st_rdev, host.st_rdev) << node;
    EXPECT_EQ(mine.st_uid, host.st_uid) << node;
    EXPECT_EQ(mine.st_gid, host.st_gid) << node;
    EXPECT_EQ(mine.st_mode & 07777, host.st_mode & 0777) << node;
    EXPECT_FALSE(mine.st_dev == host.st_dev && mine.st_ino == host.st_ino) << node;
  }
  // They work as the devices they copy.
  int null_fd = ::open((dir + "/null").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  EXPECT_EQ(::write(null_fd, "abc", 3), 3);
  char c = 'x';
  EXPECT_EQ(::read(null_fd, &c, 1), 0);
  int zero_fd = ::open((dir + "/zero").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(zero_fd, 0);
  EXPECT_EQ(::read(zero_fd, &c, 1), 1);
  EXPECT_EQ(c, '\0');
  ::close(zero_fd);
  // A lock on the copy is a lock on the copy only: a second open of the copy conflicts.
  ASSERT_EQ(::flock(null_fd, LOCK_EX | LOCK_NB), 0);
  int again = ::open((dir + "/null").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(again, 0);
  EXPECT_EQ(::flock(again, LOCK_EX | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::close(again);
  ::close(null_fd);
  EXPECT_EQ(MakeCellDeviceNodes(dir).ok(), false) << "an existing dir is not reused";
}

TEST(CellDeviceNodes, RefusedWithoutPrivilegeLeavingNothing) {
  if (CanMakeNodes()) GTEST_SKIP() << "this process may mknod";
  TempDir tmp;
  const std::string dir = tmp.path() + "/dev";
  Status made = MakeCellDeviceNodes(dir);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("mknod"), std::string::npos) << made.error().message;
  EXPECT_FALSE(Exists(dir));
}

// A nodev filesystem (some /tmp, /run) would make the nodes unopenable: refused, nothing
// left. The tmpfs is mounted in a child's own mount namespace; the host sees nothing.
TEST(CellDeviceNodes, RefusedOnANodevFilesystemLeavingNothing) {
  if (!CanMakeNodes()) GTEST_SKIP() << "cannot mknod here: " << DeviceNodesUnavailableReason();
  TempDir tmp;
  const std::string mnt = tmp.path();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) _exit(10);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(11);
    if (::mount("tmpfs", mnt.c_str(), "tmpfs", MS_NODEV | MS_NOSUID, "size=64k") != 0) _exit(12);
    Status made = MakeCellDeviceNodes(mnt + "/dev");
    if (made.ok()) _exit(13);
    if (made.error().message.find("nodev") == std::string::npos) _exit(14);
    if (Exists(mnt + "/dev")) _exit(15);
    ProbeResult probe = ProbeDeviceNodes(mnt);
    if (probe.verdict != ProbeVerdict::kDegraded) _exit(16);
    if (probe.detail.find("nodev") == std::string::npos) _exit(17);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child step failed (see the exit codes above)";
}

TEST(CellDeviceNodes, ProbeMatchesWhatCellsGetAndLeavesNothing) {
  TempDir tmp;
  ProbeResult r = ProbeDeviceNodes(tmp.path());
  EXPECT_EQ(r.verdict == ProbeVerdict::kOk, CanMakeNodes()) << r.detail;
  if (r.verdict != ProbeVerdict::kOk) {
    EXPECT_NE(r.consequence.find("shared with the host"), std::string::npos) << r.consequence;
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "probe left files in " << tmp.path();
}

}  // namespace
}  // namespace mcpcell::sandbox
