// The compiler: every shipped profile compiles to a valid spec carrying its values; the
// serve flags compose into a profile with the loader's checks.
#include "policies/compiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "policies/loader.h"

namespace mcpcell::policies {
namespace {

class Compiler : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/policy-compile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_ = dir_ + "/state";
    std::filesystem::create_directories(state_);
    std::filesystem::create_directories(dir_ + "/project");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, state_;
};

TEST_F(Compiler, EveryShippedProfileCompiles) {
  ASSERT_EQ(ShippedPolicyNames().size(), 3u);
  for (const std::string& name : ShippedPolicyNames()) {
    auto p = ResolvePolicy(name, {state_});
    ASSERT_TRUE(p) << name << ": " << p.error().message;
    auto spec = CompileCellSpec(*p, "c1", state_, "");
    ASSERT_TRUE(spec) << name << ": " << spec.error().message;
    EXPECT_EQ(spec->limits.memory_max_bytes, p->limits.memory_bytes) << name;
    EXPECT_EQ(spec->limits.pids_max, p->limits.pids) << name;
    EXPECT_EQ(spec->limits.cpu_millicores, p->limits.cpu_millicores) << name;
    EXPECT_EQ(spec->tmpfs.root_upper_bytes, p->limits.disk_bytes) << name;
    EXPECT_EQ(spec->rlimits.nofile, p->limits.open_files) << name;
    EXPECT_TRUE(spec->seccomp);
    EXPECT_TRUE(spec->workspace_host_dir.empty());
    // The printed policy is itself a valid profile that loads to the same values.
    auto again = ParsePolicy(DescribePolicy(*p), name + ".toml", {state_});
    ASSERT_TRUE(again) << again.error().message << "\n" << DescribePolicy(*p);
    EXPECT_EQ(again->limits.memory_bytes, p->limits.memory_bytes);
    EXPECT_EQ(again->limits.cpu_millicores, p->limits.cpu_millicores);
    EXPECT_EQ(again->time.exec_max, p->time.exec_max);
    EXPECT_EQ(again->network.allow, p->network.allow);
    EXPECT_EQ(again->network.max_connections, p->network.max_connections);
    EXPECT_EQ(again->network.egress_allowed, p->network.egress_allowed);
    EXPECT_EQ(again->tools.enabled, p->tools.enabled);
    EXPECT_EQ(again->packages.allow_direct_registry_access,
              p->packages.allow_direct_registry_access);
  }
}

// `mcpcell policy show` prints the opt-in, so a profile that needs it loads again from
// what was printed (without it the printed allowlist would be refused).
TEST_F(Compiler, DescribedPolicyKeepsDirectRegistryAccess) {
  auto p = ResolvePolicy("dev", {state_});
  ASSERT_TRUE(p);
  p->network.allow.push_back("pypi.org:443");
  p->packages.allow_direct_registry_access = true;
  const std::string text = DescribePolicy(*p);
  EXPECT_NE(text.find("\nallow_direct_registry_access = true\n"), std::string::npos) << text;
  auto again = ParsePolicy(text, "described.toml", {state_});
  ASSERT_TRUE(again) << again.error().message << "\n" << text;
  EXPECT_TRUE(again->packages.allow_direct_registry_access);
  EXPECT_EQ(again->network.allow, p->network.allow);

  p->packages.allow_direct_registry_access = false;
  auto refused = ParsePolicy(DescribePolicy(*p), "described.toml", {state_});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("\"pypi.org:443\" reaches pypi.org"), std::string::npos)
      << refused.error().message;
}

// Found by fuzz_policy: a description with a newline or other control characters printed
// as a TOML string that did not load again. It is escaped now.
TEST_F(Compiler, DescribedPolicyWithControlCharactersLoadsAgain) {
  auto p = ResolvePolicy("default", {state_});
  ASSERT_TRUE(p);
  p->description = "two\nlines\tand a \x01 bell \"quoted\" \\ back";
  const std::string text = DescribePolicy(*p);
  auto again = ParsePolicy(text, "described.toml", {state_});
  ASSERT_TRUE(again) << again.error().message << "\n" << text;
  EXPECT_EQ(again->description, p->description);
}

TEST_F(Compiler, FlagsComposeIntoTheProfile) {
  auto p = ResolvePolicy("default", {state_});
  ASSERT_TRUE(p);
  PolicyOverrides o;
  o.mounts = {dir_ + "/project:/workspace/project:ro"};
  o.output_dir = dir_ + "/out";
  o.workspace_dir = dir_ + "/ws";
  o.memory_bytes = 300ull << 20;
  auto composed = ApplyOverrides(*p, o, state_);
  ASSERT_TRUE(composed) << composed.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/out"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/ws"));
  auto spec = CompileCellSpec(*composed, "c2", state_, "");
  ASSERT_TRUE(spec) << spec.error().message;
  ASSERT_EQ(spec->mounts.size(), 2u);
  EXPECT_EQ(spec->mounts[0].cell_path, "/workspace/project");
  EXPECT_FALSE(spec->mounts[0].writable);
  EXPECT_EQ(spec->mounts[1].host_path, dir_ + "/out");
  EXPECT_EQ(spec->mounts[1].cell_path, kOutputCellPath);
  EXPECT_TRUE(spec->mounts[1].writable);
  EXPECT_EQ(spec->workspace_host_dir, dir_ + "/ws");
  EXPECT_EQ(spec->limits.memory_max_bytes, 300ull << 20);
}

bool HasEnv(const sandbox::CellSpec& spec, const std::string& var) {
  return std::find(spec.env.begin(), spec.env.end(), var) != spec.env.end();
}

// Every cell, whatever its policy, gets the proxy's listener and the variables that make
// curl, git, Python, pip and npm use it; loopback bypasses it.
TEST_F(Compiler, EveryCellGetsTheEgressProxyAndItsVariables) {
  for (const std::string& name : ShippedPolicyNames()) {
    auto p = ResolvePolicy(name, {state_});
    ASSERT_TRUE(p) << name;
    auto spec = CompileCellSpec(*p, "c3", state_, "");
    ASSERT_TRUE(spec) << name << ": " << spec.error().message;
    EXPECT_EQ(spec->egress_proxy_port, 3128) << name;
    for (const char* var : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                            "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"}) {
      EXPECT_TRUE(HasEnv(*spec, std::string(var) + "=http://127.0.0.1:3128")) << name << " " << var;
    }
    for (const char* var : {"no_proxy", "NO_PROXY", "npm_config_noproxy"}) {
      EXPECT_TRUE(HasEnv(*spec, std::string(var) + "=localhost,127.0.0.1,::1"))
          << name << " " << var;
    }
    EXPECT_NE(DescribeCellSpec(*spec).find("egress_proxy_port: 3128"), std::string::npos);
  }
}

TEST_F(Compiler, CellEgressCarriesTheAllowlistAndLimits) {
  auto def = ResolvePolicy("default", {state_});
  ASSERT_TRUE(def);
  auto denied = CompileCellEgress(*def);
  ASSERT_TRUE(denied) << denied.error().message;
  EXPECT_TRUE(denied->allowlist.empty());  // egress = "deny": the proxy refuses everything
  EXPECT_EQ(denied->max_connections, 32u);
  EXPECT_NE(NetworkSummary(*def).find("refuses every request"), std::string::npos);

  auto dev = ResolvePolicy("dev", {state_});
  ASSERT_TRUE(dev);
  auto allowed = CompileCellEgress(*dev);
  ASSERT_TRUE(allowed) << allowed.error().message;
  EXPECT_EQ(allowed->allowlist.entries().size(), dev->network.allow.size());
  EXPECT_NE(allowed->allowlist.Match("crates.io", 443), nullptr);
  EXPECT_EQ(allowed->allowlist.Match("crates.io", 80), nullptr);  // the entry says :443
  EXPECT_EQ(allowed->allowlist.Match("evil.example", 443), nullptr);
  EXPECT_NE(NetworkSummary(*dev).find("crates.io:443"), std::string::npos);

  Policy custom = *dev;
  custom.network.allow = {"*.wild.test:8443", "allowed.test"};
  custom.network.max_connections = 3;
  auto c = CompileCellEgress(custom);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->max_connections, 3u);
  EXPECT_NE(c->allowlist.Match("a.wild.test", 8443), nullptr);
  EXPECT_EQ(c->allowlist.Match("wild.test", 8443), nullptr);
  EXPECT_EQ(c->allowlist.Match("a.wild.test", 443), nullptr);
  EXPECT_NE(c->allowlist.Match("allowed.test", 80), nullptr);
  EXPECT_NE(NetworkSummary(custom).find("at most 3 connections"), std::string::npos);

  // A policy built in code (not through the loader) is still checked.
  custom.network.allow = {"bad host"};
  auto bad = CompileCellEgress(custom);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("network.allow entry \"bad host\""), std::string::npos)
      << bad.error().message;
}

TEST_F(Compiler, BadFlagsAreRefusedWithTheFlag) {
  auto p = ResolvePolicy("default", {state_});
  ASSERT_TRUE(p);
  auto err = [&](PolicyOverrides o) {
    auto r = ApplyOverrides(*p, o, state_);
    return r ? std::string("(ok)") : r.error().message;
  };
  EXPECT_EQ(err({.mounts = {"/etc:/e"}}),
            "--mount /etc:/e: refusing to mount \"/etc\": it is or is under /etc");
  EXPECT_EQ(err({.mounts = {dir_ + "/project:/p:rx"}}),
            "--mount " + dir_ + "/project:/p:rx: mode must be \"ro\" or \"rw\", got \"rx\"");
  EXPECT_EQ(err({.mounts = {"nocolon"}}), "--mount nocolon: expected SRC:DST[:ro|rw]");
  EXPECT_EQ(err({.mounts = {dir_ + "/project:/proc"}}),
            "--mount " + dir_ + "/project:/proc: \"/proc\" is under /proc");
  EXPECT_NE(err({.output_dir = state_ + "/out"}).find("server's state directory"),
            std::string::npos);
  EXPECT_NE(err({.workspace_dir = "/root/ws"}).find("refusing to mount"), std::string::npos);
  EXPECT_EQ(err({.exec_default = std::chrono::seconds(900)}),
            "the default exec timeout (15m) is longer than the maximum (10m)");
}

}  // namespace
// --no-seccomp (run, pool) is an override like the others; unset keeps the policy's.
TEST_F(Compiler, SeccompOverrideTurnsTheFilterOffAndIsPrinted) {
  auto p = ResolvePolicy("default", {state_});
  ASSERT_TRUE(p) << p.error().message;
  auto kept = ApplyOverrides(*p, PolicyOverrides{}, state_);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE(kept->isolation.seccomp);
  auto off = ApplyOverrides(*p, PolicyOverrides{.seccomp = false}, state_);
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_FALSE(off->isolation.seccomp);
  auto spec = CompileCellSpec(*off, "c1", state_, "");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_FALSE(spec->seccomp);
  EXPECT_NE(DescribeCellSpec(*spec).find("seccomp: off"), std::string::npos);
  EXPECT_NE(DescribeCellSpec(*spec).find("tmpfs.workspace_bytes: 1073741824"), std::string::npos);
}

}  // namespace mcpcell::policies
