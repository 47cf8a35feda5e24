// Named workspaces in a policy: `filesystem.workspace = "persistent:NAME"` (the name's
// grammar, no workspace_dir with it), `workspace_busy`, `[time] workspace_retention`, what
// the compiler makes of them (the owner's directory under the state dir) and policy show.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "policies/compiler.h"
#include "policies/loader.h"
#include "policies/workspace_name.h"

namespace mcpcell::policies {
namespace {

using std::chrono::seconds;

std::string ErrorOf(const std::string& text) {
  auto p = ParsePolicy(text, "p.toml");
  return p ? "(loaded)" : p.error().message;
}

TEST(LoaderWorkspace, ReadsANamedWorkspaceAndItsBusyRule) {
  auto p = ParsePolicy(
      "[filesystem]\nworkspace = \"persistent:proj-1.x_y\"\nworkspace_busy = \"wait\"\n"
      "[time]\nworkspace_retention = \"7d\"\n",
      "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filesystem.workspace, WorkspaceMode::kPersistent);
  EXPECT_EQ(p->filesystem.workspace_name, "proj-1.x_y");
  EXPECT_TRUE(p->filesystem.workspace_dir.empty());
  EXPECT_EQ(p->filesystem.workspace_busy, WorkspaceBusy::kWait);
  EXPECT_EQ(p->time.workspace_retention, seconds(7 * 86400));
}

TEST(LoaderWorkspace, DefaultsRefuseABusyWorkspaceAndKeepThirtyDays) {
  auto p = ParsePolicy("", "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filesystem.workspace_busy, WorkspaceBusy::kRefuse);
  EXPECT_EQ(p->time.workspace_retention, seconds(30 * 86400));
  EXPECT_TRUE(p->filesystem.workspace_name.empty());
}

TEST(LoaderWorkspace, BadNamesAreRefusedQuotingTheName) {
  for (const char* bad : {"persistent:", "persistent:a/b", "persistent:..", "persistent:.hidden",
                          "persistent:sp ace"}) {
    std::string e = ErrorOf(std::string("[filesystem]\nworkspace = \"") + bad + "\"\n");
    EXPECT_NE(e.find("filesystem.workspace"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("is not a workspace name"), std::string::npos) << bad << ": " << e;
  }
  std::string long_name(65, 'a');
  EXPECT_NE(ErrorOf("[filesystem]\nworkspace = \"persistent:" + long_name + "\"\n")
                .find("1-64 characters"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[filesystem]\nworkspace = \"shared\"\n").find("persistent:NAME"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[filesystem]\nworkspace_busy = \"queue\"\n").find("workspace_busy"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[time]\nworkspace_retention = \"1s\"\n").find("workspace_retention"),
            std::string::npos);
}

TEST(LoaderWorkspace, ANamedWorkspaceTakesNoHostDirectory) {
  std::string e =
      ErrorOf("[filesystem]\nworkspace = \"persistent:proj\"\nworkspace_dir = \"/srv/ws\"\n");
  EXPECT_NE(e.find("filesystem.workspace_dir"), std::string::npos) << e;
  EXPECT_NE(e.find("state directory"), std::string::npos) << e;
  // The operator's own host directory keeps working.
  auto p = ParsePolicy("[filesystem]\nworkspace = \"persistent\"\nworkspace_dir = \"/srv/ws\"\n",
                       "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filesystem.workspace_dir, "/srv/ws");
  EXPECT_NE(ErrorOf("[filesystem]\nworkspace = \"persistent\"\n").find("persistent:NAME"),
            std::string::npos);
}

TEST(LoaderWorkspace, TheCompilerPutsItUnderItsOwnersDirectory) {
  Policy p;
  p.filesystem.workspace = WorkspaceMode::kPersistent;
  p.filesystem.workspace_name = "proj";
  p.filesystem.workspace_owner = "alice";
  EXPECT_EQ(NamedWorkspaceDir("/var/lib/mcpcell", "alice", "proj"),
            "/var/lib/mcpcell/workspaces/alice/proj");
  EXPECT_EQ(NamedWorkspaceDir("/var/lib/mcpcell", "", "proj"),
            "/var/lib/mcpcell/workspaces/_/proj");
  // ApplyOverrides makes nothing for a named workspace (it is made under its lock).
  auto applied = ApplyOverrides(p, {}, "/nonexistent-state");
  ASSERT_TRUE(applied) << applied.error().message;
  EXPECT_EQ(applied->filesystem.workspace_name, "proj");
}

TEST(LoaderWorkspace, TheWorkspaceFlagReplacesANamedWorkspace) {
  Policy p;
  p.filesystem.workspace = WorkspaceMode::kPersistent;
  p.filesystem.workspace_name = "proj";
  char tmpl[] = "/tmp/mcpcell-ws-flag-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  auto applied = ApplyOverrides(p, {.workspace_dir = std::string(tmpl)}, "/nonexistent-state");
  ASSERT_TRUE(applied) << applied.error().message;
  EXPECT_TRUE(applied->filesystem.workspace_name.empty());
  EXPECT_EQ(applied->filesystem.workspace_dir, tmpl);
  ::rmdir(tmpl);
}

TEST(LoaderWorkspace, PolicyShowRoundTrips) {
  Policy p;
  p.filesystem.workspace = WorkspaceMode::kPersistent;
  p.filesystem.workspace_name = "proj";
  p.filesystem.workspace_busy = WorkspaceBusy::kWait;
  p.time.workspace_retention = seconds(2 * 86400);
  auto back = ParsePolicy(DescribePolicy(p), "shown.toml");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->filesystem.workspace_name, "proj");
  EXPECT_EQ(back->filesystem.workspace_busy, WorkspaceBusy::kWait);
  EXPECT_EQ(back->time.workspace_retention, seconds(2 * 86400));
}

}  // namespace
}  // namespace mcpcell::policies
