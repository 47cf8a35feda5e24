// The cell of `mcpcell run` and `mcpcell pool`: flags become overrides of the policy with
// errors that name the flag, policies that need `mcpcell serve` are refused naming the key,
// and the pool key tells apart exactly the specs that differ.
#include "run_pool/cell_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "policies/loader.h"

namespace mcpcell::run_pool {
namespace {

class CellPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/run-pool-policy-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    flags_.state_dir = dir_ + "/state";
    std::filesystem::create_directories(flags_.state_dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Profile(const std::string& text) {
    const std::string file = dir_ + "/p" + std::to_string(++files_) + ".toml";
    std::ofstream(file) << text;
    return file;
  }
  std::string dir_;
  int files_ = 0;
  CellFlags flags_;
};

TEST_F(CellPolicy, WithoutFlagsTheCellIsTheDefaultPolicys) {
  auto p = ResolveCellPolicy(flags_);
  ASSERT_TRUE(p) << p.error().message;
  auto shipped = policies::ResolvePolicy("default", {flags_.state_dir});
  ASSERT_TRUE(shipped);
  EXPECT_EQ(p->name, "default");
  EXPECT_EQ(DescribePolicy(*p), DescribePolicy(*shipped));
}

TEST_F(CellPolicy, FlagsOverrideWhatTheyName) {
  flags_.disk = "1G";  // the short form of the command line
  flags_.memory = "512MiB";
  flags_.pids = "0";  // no limit, as before
  flags_.cpu = "1500";
  flags_.no_seccomp = true;
  flags_.workspace = dir_ + "/ws";
  auto p = ResolveCellPolicy(flags_);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->limits.disk_bytes, 1ull << 30);
  EXPECT_EQ(p->limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(p->limits.pids, 0u);
  EXPECT_EQ(p->limits.cpu_millicores, 1500u);
  EXPECT_FALSE(p->isolation.seccomp);
  EXPECT_EQ(p->filesystem.workspace, policies::WorkspaceMode::kPersistent);
  EXPECT_EQ(p->filesystem.workspace_dir, dir_ + "/ws");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/ws"));
  EXPECT_EQ(p->limits.open_files, 1024u) << "what no flag names is the policy's";
}

TEST_F(CellPolicy, BadFlagsAreNamed) {
  const struct {
    std::string CellFlags::*field;
    std::string value, error;
  } cases[] = {
      {&CellFlags::disk, "big", "--disk: \"big\" is not a size like 512M or 1GiB"},
      {&CellFlags::disk, "0", "--disk: \"0\" is not a size"},
      {&CellFlags::memory, "1.5G", "--memory: \"1.5G\" is not a size"},
      {&CellFlags::pids, "-1", "--pids: \"-1\" is not a whole number from 0 to 4194304"},
      {&CellFlags::cpu, "2k", "--cpu: \"2k\" is not a whole number"},
      {&CellFlags::policy, "nope", "--policy nope: "},
  };
  for (const auto& c : cases) {
    CellFlags f = flags_;
    f.*c.field = c.value;
    auto p = ResolveCellPolicy(f);
    ASSERT_FALSE(p) << c.value;
    EXPECT_NE(p.error().message.find(c.error), std::string::npos) << p.error().message;
  }
}

TEST_F(CellPolicy, PoliciesThatNeedServeAreRefusedNamingTheKey) {
  flags_.policy = "dev";
  auto dev = ResolveCellPolicy(flags_);
  ASSERT_FALSE(dev);
  EXPECT_EQ(dev.error().message,
            "policy \"dev\" (<builtin:dev>) allows egress through the proxy ([network] egress = "
            "\"allowlist\"), which only `mcpcell serve` runs; use a policy with egress = \"deny\"");
  flags_.policy = Profile(
      "name = \"offline\"\n[packages]\nmode = \"offline\"\n"
      "registries = [\"npm\"]\nnpm_offline_dir = \"" +
      dir_ + "\"\n");
  auto offline = ResolveCellPolicy(flags_);
  ASSERT_FALSE(offline);
  EXPECT_NE(offline.error().message.find("([packages] mode = \"offline\")"), std::string::npos)
      << offline.error().message;
  flags_.policy = "offline-strict";
  EXPECT_TRUE(ResolveCellPolicy(flags_));
}

// The pool key of the cell `f` asks for in `state_dir`, or the error's text.
std::string KeyOf(const CellFlags& f, const std::string& state_dir) {
  auto p = ResolveCellPolicy(f);
  if (!p) return "error: " + p.error().message;
  auto key = PoolKey(*p, state_dir);
  return key ? *key : "error: " + key.error().message;
}

TEST_F(CellPolicy, ThePoolKeyIsTheCompiledSpecAndTellsApartWhatDiffers) {
  auto base = ResolveCellPolicy(flags_);
  ASSERT_TRUE(base);
  auto key = PoolKey(*base, flags_.state_dir);
  ASSERT_TRUE(key) << key.error().message;
  auto spec = policies::CompileCellSpec(*base, "any-id", flags_.state_dir, "");
  ASSERT_TRUE(spec);
  EXPECT_EQ(*key, policies::DescribeCellSpec(*spec)) << "the cell id is not part of it";
  EXPECT_EQ(KeyOf(flags_, flags_.state_dir), *key);
  // The same values under another name: MCPCELL_POLICY differs, so the spec does.
  flags_.policy = Profile("name = \"other\"\n");
  const std::string renamed = KeyOf(flags_, flags_.state_dir);
  EXPECT_EQ(renamed.rfind("error", 0), std::string::npos) << renamed;
  EXPECT_NE(renamed, *key);
  flags_.policy = "default";
  for (auto set : {+[](CellFlags& f) { f.disk = "2G"; }, +[](CellFlags& f) { f.memory = "2G"; },
                   +[](CellFlags& f) { f.pids = "64"; }, +[](CellFlags& f) { f.cpu = "500"; },
                   +[](CellFlags& f) { f.no_seccomp = true; }}) {
    CellFlags f = flags_;
    set(f);
    const std::string other = KeyOf(f, f.state_dir);
    EXPECT_EQ(other.rfind("error", 0), std::string::npos) << other;
    EXPECT_NE(other, *key);
  }
  // A flag that repeats the policy's value changes nothing.
  CellFlags same = flags_;
  same.memory = "1G";
  EXPECT_EQ(KeyOf(same, same.state_dir), *key);
  // Another state dir, another cell.
  EXPECT_NE(KeyOf(flags_, dir_ + "/other-state"), *key);
}

}  // namespace
}  // namespace mcpcell::run_pool
