// filesystem.template against a real template store (sandbox/template_store.h): a bare name
// is pinned to the latest version when the policy is loaded, an exact version is kept, an
// unknown one is a load error naming the key and listing what exists, and the compiled spec
// has the template's rootfs as its whole root.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "policies/compiler.h"
#include "policies/loader.h"
#include "sandbox/template_store.h"

namespace mcpcell::policies {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class LoaderTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-policy-tmpl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    state_ = tmpl;
    fs::create_directories(state_ + "/src/etc");
    std::ofstream(state_ + "/src/etc/os-release") << "ID=t\n";
    for (int i = 0; i < 2; ++i) {
      sandbox::TemplateStore store(state_);
      auto build = store.Begin("tiny");
      ASSERT_TRUE(build.ok()) << build.error().message;
      ASSERT_TRUE(sandbox::FillTemplateRootfs(state_ + "/src", build->rootfs()).ok());
      ASSERT_TRUE(store.Commit(*build, "test", {}).ok());
    }
  }
  void TearDown() override { fs::remove_all(state_); }
  Result<Policy> Load(const std::string& tmpl) {
    return ParsePolicy("[filesystem]\ntemplate = \"" + tmpl + "\"\n", "p.toml",
                       {.state_dir = state_});
  }
  std::string state_;
};

TEST_F(LoaderTemplateTest, ABareNameIsPinnedToTheLatestVersion) {
  auto p = Load("tiny");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->filesystem.template_name, "tiny@2");
  auto exact = Load("tiny@1");
  ASSERT_TRUE(exact.ok()) << exact.error().message;
  EXPECT_EQ(exact->filesystem.template_name, "tiny@1");
}

TEST_F(LoaderTemplateTest, UnknownTemplatesAndVersionsAreLoadErrorsListingWhatExists) {
  auto p = Load("nope");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message,
              HasSubstr("p.toml:2:12: filesystem.template: no template \"nope\""));
  EXPECT_THAT(p.error().message, HasSubstr("known: \"host\", \"tiny\""));
  auto v = Load("tiny@9");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.error().message, HasSubstr("has no version 9; versions: 1, 2"));
}

TEST_F(LoaderTemplateTest, TheCompiledSpecHasTheTemplateAsItsWholeRoot) {
  auto p = Load("tiny@1");
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto spec = CompileCellSpec(*p, "c1", state_, "/unused/host-skeleton");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->rootfs.skeleton_dir, state_ + "/templates/built/tiny/1/rootfs");
  EXPECT_TRUE(spec->rootfs.system_dirs.empty());
  auto host = Load("host");
  ASSERT_TRUE(host.ok());
  auto host_spec = CompileCellSpec(*host, "c2", state_, "/skel");
  ASSERT_TRUE(host_spec.ok()) << host_spec.error().message;
  EXPECT_EQ(host_spec->rootfs.skeleton_dir, "/skel");
  EXPECT_EQ(host_spec->rootfs.system_dirs, std::vector<std::string>{"/usr"});
}

TEST_F(LoaderTemplateTest, CompilingAPinnedVersionThatWasDeletedFails) {
  auto p = Load("tiny@1");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(sandbox::TemplateStore(state_).Delete("tiny@1").ok());
  auto spec = CompileCellSpec(*p, "c1", state_, "/skel");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message,
              HasSubstr("filesystem.template: template \"tiny\" has no version 1"));
}

}  // namespace
}  // namespace mcpcell::policies
