#include "policies/mount_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace mcpcell::policies {
namespace {

class MountCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/policy-mount-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/project");
    std::filesystem::create_directories(dir_ + "/state");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

std::string Refusal(const std::string& source, const std::string& state = "") {
  Status s = CheckMountSource(source, state);
  return s ? "" : s.error().message;
}

TEST_F(MountCheck, AllowsAProjectDirectory) {
  EXPECT_EQ(Refusal(dir_ + "/project", dir_ + "/state"), "");
}

TEST_F(MountCheck, RefusesSystemDirectories) {
  EXPECT_NE(Refusal("/").find("host's root filesystem"), std::string::npos);
  for (const char* d :
       {"/proc", "/sys", "/dev", "/boot", "/root", "/etc", "/etc/ssl", "/proc/self", "/dev/shm"}) {
    std::string why = Refusal(d);
    EXPECT_NE(why.find("refusing to mount"), std::string::npos) << d << ": " << why;
  }
  EXPECT_NE(Refusal("/home").find("/home"), std::string::npos);
  EXPECT_NE(Refusal("/home/alice").find("whole home directory"), std::string::npos);
  EXPECT_NE(Refusal("/etc/../etc").find("\"..\""), std::string::npos);
  EXPECT_NE(Refusal("relative/dir").find("not an absolute path"), std::string::npos);
}

TEST_F(MountCheck, RefusesRuntimeSocketsAndTheirDirectories) {
  for (const char* d : {"/var/run/docker.sock", "/run/docker.sock", "/run/containerd",
                        "/run/containerd/containerd.sock", "/run/podman/podman.sock",
                        "/var/run/crio/crio.sock", "/run", "/var/run", "/var"}) {
    EXPECT_NE(Refusal(d).find("container runtime"), std::string::npos) << d << ": " << Refusal(d);
  }
  std::string sock = dir_ + "/project/docker.sock";
  EXPECT_NE(Refusal(sock).find("container runtime socket"), std::string::npos);
}

TEST_F(MountCheck, RefusesTheStateDirectoryInsideAndAround) {
  std::string state = dir_ + "/state";
  EXPECT_NE(Refusal(state, state).find("state directory"), std::string::npos);
  std::filesystem::create_directories(state + "/cells");
  EXPECT_NE(Refusal(state + "/cells", state).find("state directory"), std::string::npos);
  EXPECT_NE(Refusal(dir_, state).find("state directory"), std::string::npos);
}

TEST_F(MountCheck, RefusesSymlinksIntoDangerousPlaces) {
  std::string link = dir_ + "/project/innocent";
  ASSERT_EQ(::symlink("/etc", link.c_str()), 0);
  std::string why = Refusal(link);
  EXPECT_NE(why.find("resolves to \"/etc\""), std::string::npos) << why;
  std::string to_state = dir_ + "/project/st";
  ASSERT_EQ(::symlink((dir_ + "/state").c_str(), to_state.c_str()), 0);
  EXPECT_NE(Refusal(to_state, dir_ + "/state").find("state directory"), std::string::npos);
}

TEST_F(MountCheck, MissingSourceNamesTheSyscall) {
  std::string why = Refusal(dir_ + "/nope");
  EXPECT_NE(why.find("stat(\"" + dir_ + "/nope\"): ENOENT"), std::string::npos) << why;
}

TEST(MountTarget, Rules) {
  EXPECT_TRUE(CheckMountTarget("/data"));
  EXPECT_TRUE(CheckMountTarget("/workspace/project"));
  for (const char* bad : {"/", "/workspace", "/proc", "/proc/x", "/sys", "/dev/shm", "data",
                          "/a/../b", "/a/", "/a//b"}) {
    EXPECT_FALSE(CheckMountTarget(bad)) << bad;
  }
}

}  // namespace
}  // namespace mcpcell::policies
