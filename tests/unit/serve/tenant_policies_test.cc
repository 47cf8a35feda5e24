// Per-tenant policies of the HTTP server: resolution (errors name the tenant and the
// policy), the ToolEnv lookup by tenant, and the cells profile each tenant gets.
#include "serve/tenant_policies.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "policies/compiler.h"
#include "policies/loader.h"

namespace mcpcell::serve {
namespace {

using tools::CellToolsConfig;
using tools::ToolEnv;

class TenantPoliciesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-tenant-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_dir_ = dir_ + "/state";
    std::filesystem::create_directories(state_dir_ + "/skeleton");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  HttpConfig Config(std::map<std::string, std::string> tenant_policies) {
    HttpConfig config;
    for (const auto& [name, policy] : tenant_policies) {
      TenantConfig t;
      t.quotas.name = name;
      t.policy = policy;
      config.tenants[name] = t;
    }
    return config;
  }
  policies::Policy ServerPolicy() {
    auto p = policies::ResolvePolicy("default", {state_dir_});
    EXPECT_TRUE(p.ok());
    p->name = "server-own";  // as if composed from --policy and its flags
    p->limits.memory_bytes = 3ull << 30;
    return *p;
  }

  std::string dir_, state_dir_;
};

TEST_F(TenantPoliciesTest, ResolvesEachTenantAsWrittenAndDefaultsToTheServers) {
  std::string bob = Write("bob.toml", R"(name = "bob-policy"
[limits]
memory = "256MiB"
[time]
exec_max = "30s"
exec_default = "10s"
session_idle = "2m"
[tools]
enabled = ["run_code", "session_info"]
)");
  auto resolved =
      ResolveTenantPolicies(Config({{"alice", "offline-strict"}, {"bob", bob}, {"carol", ""}}),
                            ServerPolicy(), {}, state_dir_);
  ASSERT_TRUE(resolved.ok()) << resolved.error().message;
  EXPECT_EQ(resolved->at("alice").name, "offline-strict");
  EXPECT_EQ(resolved->at("bob").name, "bob-policy");
  EXPECT_EQ(resolved->at("bob").limits.memory_bytes, 256ull << 20);  // no server flags on top
  EXPECT_EQ(resolved->at("carol").name, "server-own");               // no policy key
  EXPECT_EQ(resolved->at("carol").limits.memory_bytes, 3ull << 30);

  CellToolsConfig c = ToolsConfigFromPolicy(resolved->at("bob"));
  EXPECT_EQ(c.policy_name, "bob-policy");
  EXPECT_EQ(c.max_timeout, std::chrono::seconds(30));
  EXPECT_EQ(c.default_timeout, std::chrono::seconds(10));
  EXPECT_EQ(c.enabled_tools, (std::set<std::string>{"run_code", "session_info"}));
  // No [tools] toolset: "core", so the archive and snapshot tools are off; the archive
  // limits are the defaults.
  EXPECT_EQ(c.toolset, "core");
  EXPECT_TRUE(c.InToolset("read_file"));
  EXPECT_FALSE(c.InToolset("upload_archive"));
  EXPECT_FALSE(c.Enables("read_file"));  // in the toolset, not in tools.enabled
  EXPECT_EQ(c.archive_bytes, 1ull << 30);
  EXPECT_EQ(c.archive_ratio, 200u);
}

TEST_F(TenantPoliciesTest, AnUnknownProfileNamesTheTenantAndThePolicy) {
  auto r = ResolveTenantPolicies(Config({{"alice", "default"}, {"bob", "no-such-profile"}}),
                                 ServerPolicy(), {}, state_dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("tenant \"bob\": policy \"no-such-profile\": ", 0), 0u)
      << r.error().message;
}

TEST_F(TenantPoliciesTest, APolicyFileThatFailsItsChecksNamesTenantFileAndKey) {
  std::string bad = Write("bad.toml", "[limits]\nmemroy = \"1GiB\"\n");
  auto r = ResolveTenantPolicies(Config({{"bob", bad}}), ServerPolicy(), {}, state_dir_);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("tenant \"bob\": policy \"" + bad + "\""), std::string::npos) << m;
  EXPECT_NE(m.find("limits.memroy: unknown key"), std::string::npos) << m;

  std::string home = Write("home.toml",
                           "[[filesystem.mounts]]\nsource = \"/etc\"\n"
                           "target = \"/x\"\n");
  r = ResolveTenantPolicies(Config({{"eve", home}}), ServerPolicy(), {}, state_dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tenant \"eve\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("/etc"), std::string::npos) << r.error().message;
}

TEST_F(TenantPoliciesTest, ToolEnvLooksUpTheTenantsConfigAndFailsClosed) {
  ToolEnv env;
  env.config.policy_name = "server-own";
  CellToolsConfig bob;
  bob.policy_name = "bob-policy";
  bob.enabled_tools = {"run_code"};
  env.tenants["bob"] = bob;
  env.tenants["alice"] = CellToolsConfig{};  // every tool

  ASSERT_NE(env.ConfigFor(""), nullptr);
  EXPECT_EQ(env.ConfigFor("")->policy_name, "server-own");
  ASSERT_NE(env.ConfigFor("bob"), nullptr);
  EXPECT_EQ(env.ConfigFor("bob")->policy_name, "bob-policy");
  EXPECT_EQ(env.ConfigFor("mallory"), nullptr);

  EXPECT_TRUE(env.ToolEnabled("", "run_command"));
  EXPECT_TRUE(env.ToolEnabled("alice", "run_command"));
  EXPECT_TRUE(env.ToolEnabled("bob", "run_code"));
  EXPECT_FALSE(env.ToolEnabled("bob", "run_command"));
  EXPECT_FALSE(env.ToolEnabled("mallory", "run_code"));
  EXPECT_EQ(env.CellProfile(""), "");
  EXPECT_EQ(env.CellProfile("bob"), "bob");
  EXPECT_EQ(env.AllConfigs().size(), 3u);
}

TEST_F(TenantPoliciesTest, InstallGivesEachTenantItsCellsProfileAndToolsConfig) {
  std::string bob = Write("bob.toml", "name = \"bob-policy\"\n[time]\nsession_idle = \"2m\"\n");
  auto resolved = ResolveTenantPolicies(Config({{"alice", "default"}, {"bob", bob}}),
                                        ServerPolicy(), {}, state_dir_);
  ASSERT_TRUE(resolved.ok()) << resolved.error().message;
  sandbox::CellSessionManager cells(
      PolicySpecFactory(ServerPolicy(), state_dir_, state_dir_ + "/skeleton"), {});
  ToolEnv env;
  env.cells = &cells;
  auto st = InstallTenantProfiles(*resolved, state_dir_, state_dir_ + "/skeleton", cells, env);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(env.tenants.at("bob").policy_name, "bob-policy");
  EXPECT_EQ(env.tenants.at("alice").policy_name, "default");

  auto session = cells.Get("s1", "bob");
  ASSERT_TRUE(session.ok()) << session.error().message;
  EXPECT_EQ((*session)->profile(), "bob");
  auto idle = (*session)->Info().idle_left;  // bob's idle time, not the manager's 15 min
  EXPECT_GT(idle, std::chrono::seconds(100));
  EXPECT_LE(idle, std::chrono::minutes(2));
  auto other = cells.Get("s1", "alice");  // a session never changes tenant
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("profile \"bob\""), std::string::npos);
  EXPECT_FALSE(cells.Get("s2", "mallory").ok());
  auto plain = cells.Get("s3");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->profile(), "");

  // Installing twice is refused (a tenant's profile is registered once).
  EXPECT_FALSE(
      InstallTenantProfiles(*resolved, state_dir_, state_dir_ + "/skeleton", cells, env).ok());
}

TEST_F(TenantPoliciesTest, TenantsGetNoneOfTheServersHostDirectoriesUnlessTheConfigSaysSo) {
  const std::string out = dir_ + "/out";
  const std::string ws = dir_ + "/ws";
  const std::string src = dir_ + "/src";
  std::filesystem::create_directories(src);
  policies::PolicyOverrides host_dirs{
      .mounts = {src + ":/src"}, .output_dir = out, .workspace_dir = ws};
  std::string own = Write("own.toml", "name = \"own\"\n");
  HttpConfig config = Config({{"plain", ""}, {"inherits", ""}, {"own-policy", own}});
  config.tenants["inherits"].inherit_server_mounts = true;
  auto r = ResolveTenantPolicies(config, ServerPolicy(), host_dirs, state_dir_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const policies::Policy& plain = r->at("plain");
  EXPECT_EQ(plain.name, "server-own");
  EXPECT_EQ(plain.limits.memory_bytes, 3ull << 30);  // the server's limits still apply
  EXPECT_TRUE(plain.filesystem.mounts.empty());
  EXPECT_EQ(plain.filesystem.workspace, policies::WorkspaceMode::kEphemeral);
  EXPECT_TRUE(r->at("own-policy").filesystem.mounts.empty());
  const policies::Policy& inherits = r->at("inherits");
  ASSERT_EQ(inherits.filesystem.mounts.size(), 2u);
  EXPECT_EQ(inherits.filesystem.mounts[0].target, "/src");
  EXPECT_EQ(inherits.filesystem.mounts[1].target, "/output");
  EXPECT_EQ(inherits.filesystem.workspace_dir, ws);
}

TEST_F(TenantPoliciesTest, EachTenantOwnsItsNamedWorkspaces) {
  std::string named = Write("named.toml", "[filesystem]\nworkspace = \"persistent:proj\"\n");
  auto r = ResolveTenantPolicies(Config({{"alice", named}, {"bob", named}}), ServerPolicy(), {},
                                 state_dir_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->at("alice").filesystem.workspace_owner, "alice");
  EXPECT_EQ(r->at("bob").filesystem.workspace_owner, "bob");
  auto alice =
      policies::CompileCellSpec(r->at("alice"), "c1", state_dir_, state_dir_ + "/skeleton");
  auto bob = policies::CompileCellSpec(r->at("bob"), "c2", state_dir_, state_dir_ + "/skeleton");
  ASSERT_TRUE(alice.ok()) << alice.error().message;
  ASSERT_TRUE(bob.ok()) << bob.error().message;
  EXPECT_EQ(alice->workspace_host_dir, state_dir_ + "/workspaces/alice/proj");
  EXPECT_EQ(bob->workspace_host_dir, state_dir_ + "/workspaces/bob/proj");
  auto bad = ResolveTenantPolicies(Config({{"a b", named}}), ServerPolicy(), {}, state_dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tenant \"a b\""), std::string::npos) << bad.error().message;
}

TEST_F(TenantPoliciesTest, TheFactoryLocksANamedWorkspaceOneCellAtATime) {
  std::string named = Write("named.toml", "[filesystem]\nworkspace = \"persistent:proj\"\n");
  auto r = ResolveTenantPolicies(Config({{"alice", named}}), ServerPolicy(), {}, state_dir_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  WorkspaceLeases leases(state_dir_);
  auto factory = PolicySpecFactory(r->at("alice"), state_dir_, state_dir_ + "/skeleton", &leases);
  auto first = factory("c1");
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(first->workspace_host_dir));
  auto second = factory("c2");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("workspace \"proj\" of tenant \"alice\" is in use"),
            std::string::npos)
      << second.error().message;
  leases.Release("c1");
  EXPECT_TRUE(factory("c2").ok());
}

TEST(HttpConfigInheritTest, InheritServerMountsIsOffUnlessSetAndMustBeABoolean) {
  const std::string tenant =
      "[[tenant]]\nname = \"a\"\ntoken_sha256 = [\"" + std::string(64, 'a') + "\"]\n";
  std::string error;
  auto off = ParseHttpConfig(tenant, "http.toml", error);
  ASSERT_TRUE(off) << error;
  EXPECT_FALSE(off->tenants.at("a").inherit_server_mounts);
  auto on = ParseHttpConfig(tenant + "inherit_server_mounts = true\n", "http.toml", error);
  ASSERT_TRUE(on) << error;
  EXPECT_TRUE(on->tenants.at("a").inherit_server_mounts);
  EXPECT_FALSE(ParseHttpConfig(tenant + "inherit_server_mounts = \"yes\"\n", "http.toml", error));
  EXPECT_NE(error.find("tenant \"a\": inherit_server_mounts must be true or false"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace mcpcell::serve
