// The snapshot_* tools over a fake SnapshotsView: what they pass it (session key, tenant,
// name, id), how they word its results and errors, the arguments they refuse, that they
// hold no cell lease while calling it, and that they exist only with a snapshot store.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/test_client.h"
#include "tools/cell_tools.h"

namespace mcpcell::tools {
namespace {

SnapshotSummary Summary(const std::string& id, const std::string& name) {
  return {.id = id,
          .name = name,
          .created = "2026-12-02T05:00:00.000Z",
          .digest = std::string(64, 'a'),
          .files = 3,
          .stored_bytes = 3 << 20};
}

// Records every call; answers from its fields. Each call checks the calling session holds
// no lease on its cell (the view's Restore ends the cell, which waits for leases).
class FakeSnapshots : public SnapshotsView {
 public:
  explicit FakeSnapshots(sandbox::CellSessionManager* cells) : cells_(cells) {}

  Result<SnapshotCreated> Create(const std::string& key, const std::string& tenant,
                                 const std::string& name) override {
    Record("create " + key + " " + tenant + " [" + name + "]", key);
    if (create_error) return *create_error;
    SnapshotCreated c;
    c.snapshot = Summary(std::string(32, '1'), name);
    c.files_hashed = 2;
    c.new_object_bytes = 2048;
    c.quota_used_bytes = 6 << 20;
    c.quota_bytes = quota;
    c.notes = {"setuid bit removed from root:usr/bin/x"};
    return c;
  }
  Result<std::vector<SnapshotSummary>> List(const std::string& tenant) override {
    Record("list " + tenant, "");
    return listed;
  }
  Result<SnapshotRestored> Restore(const std::string& key, const std::string& tenant,
                                   const std::string& which) override {
    Record("restore " + key + " " + tenant + " " + which, key);
    if (restore_error) return *restore_error;
    return SnapshotRestored{.snapshot = Summary(std::string(32, '2'), "base"),
                            .programs_ended = programs_ended,
                            .notes = {}};
  }
  Status Delete(const std::string& tenant, const std::string& which) override {
    Record("delete " + tenant + " " + which, "");
    if (which == "missing") return Error::Msg("snapshot \"missing\" not found");
    return Ok();
  }

  std::vector<std::string> Calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int leases_seen() {
    std::lock_guard lock(mu_);
    return leases_seen_;
  }

  std::optional<Error> create_error, restore_error;
  uint64_t quota = 10 << 20;
  uint64_t programs_ended = 0;
  std::vector<SnapshotSummary> listed;

 private:
  void Record(const std::string& call, const std::string& key) {
    int leases = 0;
    if (!key.empty()) {
      auto session = cells_->Get(key);
      if (session) leases = (*session)->Info().active_leases;
    }
    std::lock_guard lock(mu_);
    calls_.push_back(call);
    leases_seen_ += leases;
  }
  sandbox::CellSessionManager* cells_;
  std::mutex mu_;
  std::vector<std::string> calls_;
  int leases_seen_ = 0;
};

mcp::ServerOptions Options() {
  mcp::ServerOptions o;
  o.name = "snapshot-tools-test";
  o.version = "1";
  return o;
}

class SnapshotToolsTest : public ::testing::Test {
 protected:
  SnapshotToolsTest() {
    env_.cells = &cells_;
    env_.snapshots = &fake_;
    env_.tenants["acme"] = CellToolsConfig{};
    EXPECT_TRUE(RegisterCellTools(server_, env_));
    client_.Initialize();
  }

  // The tools/call result (the `result` member), failing the test on a JSON-RPC error.
  mcp::Json Call(const std::string& tool, mcp::Json args) {
    mcp::Json r = client_.Request("tools/call", {{"name", tool}, {"arguments", std::move(args)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", mcp::Json::object());
  }
  static std::string Text(const mcp::Json& result) {
    return result["content"][0]["text"].get<std::string>();
  }
  static bool IsError(const mcp::Json& result) { return result.value("isError", false); }

  // No cell is ever made: a tool that tried to lease one would fail.
  sandbox::CellSessionManager cells_{[](const std::string&) -> Result<sandbox::CellSpec> {
                                       return Error::Msg("no cells in this test");
                                     },
                                     {}};
  FakeSnapshots fake_{&cells_};
  ToolEnv env_;
  mcp::Server server_{Options()};
  mcp::MemoryClient client_{server_, 0, "acme"};
};

TEST_F(SnapshotToolsTest, CreatePassesSessionTenantAndNameAndReportsStorage) {
  mcp::Json r = Call("snapshot_create", {{"name", "before-refactor.v2"}});
  ASSERT_FALSE(IsError(r)) << r.dump();
  const std::string key = client_.session()->id();
  EXPECT_EQ(fake_.Calls(),
            std::vector<std::string>{"create " + key + " acme [before-refactor.v2]"});
  EXPECT_NE(Text(r).find("Created snapshot 11111111111111111111111111111111 "
                         "(\"before-refactor.v2\"): 3 files, 2 read now"),
            std::string::npos)
      << Text(r);
  EXPECT_NE(Text(r).find("2048 bytes of storage added"), std::string::npos) << Text(r);
  EXPECT_NE(Text(r).find("6.0 MiB (6291456 bytes) used of 10.0 MiB (10485760 bytes), "
                         "4.0 MiB (4194304 bytes) left"),
            std::string::npos)
      << Text(r);
  EXPECT_NE(Text(r).find("note: setuid bit removed"), std::string::npos);
  const mcp::Json& s = r["structuredContent"];
  EXPECT_EQ(s["snapshot"]["name"], "before-refactor.v2");
  EXPECT_EQ(s["quota_left_bytes"], 4 << 20);
  EXPECT_EQ(s["new_object_bytes"], 2048);
  EXPECT_EQ(fake_.leases_seen(), 0);
}

TEST_F(SnapshotToolsTest, CreateWithoutNameOrQuota) {
  fake_.quota = 0;
  mcp::Json r = Call("snapshot_create", mcp::Json::object());
  ASSERT_FALSE(IsError(r)) << r.dump();
  EXPECT_EQ(fake_.Calls()[0], "create " + client_.session()->id() + " acme []");
  EXPECT_NE(Text(r).find("(no quota)"), std::string::npos) << Text(r);
  EXPECT_FALSE(r["structuredContent"].contains("quota_left_bytes"));
}

TEST_F(SnapshotToolsTest, BadNamesAreRefusedBeforeTheViewWithTheRule) {
  for (const char* bad : {"a/b", "", ".", "..", "sp ace", "é"}) {
    mcp::Json r = Call("snapshot_create", {{"name", bad}});
    EXPECT_TRUE(IsError(r)) << bad;
    EXPECT_NE(Text(r).find("is not a valid snapshot name: it must be 1 to 64 characters of "
                           "[A-Za-z0-9._-]"),
              std::string::npos)
        << Text(r);
  }
  mcp::Json r = Call("snapshot_create", {{"name", std::string(65, 'x')}});
  EXPECT_TRUE(IsError(r));
  EXPECT_TRUE(Call("snapshot_create", {{"name", std::string(64, 'x')}}).value("isError", false) ==
              false);
  EXPECT_EQ(fake_.Calls().size(), 1u);  // only the 64-character name reached the view
}

TEST_F(SnapshotToolsTest, QuotaExceededGetsAHintToDelete) {
  fake_.create_error = Error::Msg("snapshot storage quota exceeded: the tenant's snapshots use 9");
  mcp::Json r = Call("snapshot_create", mcp::Json::object());
  ASSERT_TRUE(IsError(r));
  EXPECT_NE(Text(r).find("snapshot_create failed: snapshot storage quota exceeded"),
            std::string::npos);
  EXPECT_NE(Text(r).find("snapshot_delete"), std::string::npos) << Text(r);
}

TEST_F(SnapshotToolsTest, ListShowsTheTenantsSnapshots) {
  mcp::Json empty = Call("snapshot_list", mcp::Json::object());
  ASSERT_FALSE(IsError(empty));
  EXPECT_NE(Text(empty).find("no snapshots"), std::string::npos);
  EXPECT_EQ(empty["structuredContent"]["count"], 0);
  fake_.listed = {Summary(std::string(32, 'a'), "one"), Summary(std::string(32, 'b'), "")};
  mcp::Json r = Call("snapshot_list", mcp::Json::object());
  ASSERT_FALSE(IsError(r)) << r.dump();
  EXPECT_EQ(fake_.Calls().back(), "list acme");
  EXPECT_NE(Text(r).find("2 snapshots of this tenant, 6.0 MiB (6291456 bytes) stored"),
            std::string::npos)
      << Text(r);
  EXPECT_NE(Text(r).find(std::string(32, 'a') + " (\"one\"): created"), std::string::npos);
  EXPECT_EQ(r["structuredContent"]["snapshots"][1]["id"], std::string(32, 'b'));
  EXPECT_EQ(r["structuredContent"]["total_stored_bytes"], 6 << 20);
}

TEST_F(SnapshotToolsTest, RestoreSaysWhatEndedAndThatFilesAreTheSnapshots) {
  fake_.programs_ended = 2;
  mcp::Json r = Call("snapshot_restore", {{"snapshot", "base"}});
  ASSERT_FALSE(IsError(r)) << r.dump();
  EXPECT_EQ(fake_.Calls(),
            std::vector<std::string>{"restore " + client_.session()->id() + " acme base"});
  EXPECT_NE(Text(r).find("are now the snapshot's"), std::string::npos) << Text(r);
  EXPECT_NE(Text(r).find("Ended 2 running process(es)"), std::string::npos) << Text(r);
  EXPECT_EQ(r["structuredContent"]["programs_ended"], 2);
  fake_.programs_ended = 0;
  EXPECT_NE(Text(Call("snapshot_restore", {{"snapshot", "base"}})).find("No programs were running"),
            std::string::npos);
  EXPECT_EQ(fake_.leases_seen(), 0);
}

TEST_F(SnapshotToolsTest, RestoreErrorsGetHints) {
  fake_.restore_error = Error::Msg("snapshot \"nope\" not found");
  mcp::Json r = Call("snapshot_restore", {{"snapshot", "nope"}});
  ASSERT_TRUE(IsError(r));
  EXPECT_EQ(Text(r),
            "snapshot_restore failed: snapshot \"nope\" not found. snapshot_list shows this "
            "session's tenant's snapshots.");
  fake_.restore_error = Error::Msg(
      "snapshot x is damaged and was not restored: objects/ab: larger than the manifest says");
  r = Call("snapshot_restore", {{"snapshot", "x"}});
  ASSERT_TRUE(IsError(r));
  EXPECT_NE(Text(r).find("damaged, so it was not restored; this session's files are as they were"),
            std::string::npos)
      << Text(r);
}

TEST_F(SnapshotToolsTest, DeleteAndUnknownSnapshot) {
  mcp::Json r = Call("snapshot_delete", {{"snapshot", "one"}});
  ASSERT_FALSE(IsError(r)) << r.dump();
  EXPECT_EQ(r["structuredContent"]["deleted"], "one");
  EXPECT_EQ(fake_.Calls().back(), "delete acme one");
  r = Call("snapshot_delete", {{"snapshot", "missing"}});
  ASSERT_TRUE(IsError(r));
  EXPECT_NE(Text(r).find("not found. snapshot_list shows"), std::string::npos) << Text(r);
}

TEST_F(SnapshotToolsTest, BadArgumentsAreRefusedBeforeTheView) {
  // The server's schema check answers first (JSON-RPC -32602 or an isError result); either
  // way nothing reaches the view.
  const std::vector<std::pair<std::string, mcp::Json>> bad = {
      {"snapshot_restore", mcp::Json::object()},
      {"snapshot_restore", {{"snapshot", 7}}},
      {"snapshot_restore", {{"snapshot", "a"}, {"extra", true}}},
      {"snapshot_delete", mcp::Json::object()},
      {"snapshot_delete", {{"snapshot", ""}}},
      {"snapshot_create", {{"name", 5}}},
      {"snapshot_create", {{"label", "x"}}},
      {"snapshot_list", {{"tenant", "other"}}},
  };
  for (const auto& [tool, args] : bad) {
    mcp::Json r = client_.Request("tools/call", {{"name", tool}, {"arguments", args}});
    const bool refused = r.contains("error") || r["result"].value("isError", false);
    EXPECT_TRUE(refused) << tool << " " << args.dump() << " -> " << r.dump();
  }
  EXPECT_TRUE(fake_.Calls().empty());
}

TEST_F(SnapshotToolsTest, SchemasAnnotationsAndDescriptionsSayWhatSnapshotsAre) {
  mcp::Tool restore = MakeSnapshotRestoreTool(env_);
  mcp::Tool create = MakeSnapshotCreateTool(env_);
  mcp::Tool list = MakeSnapshotListTool(env_);
  EXPECT_EQ(restore.input_schema["required"], mcp::Json::array({"snapshot"}));
  EXPECT_EQ(create.input_schema["additionalProperties"], false);
  EXPECT_EQ(list.annotations["readOnlyHint"], true);
  EXPECT_EQ(restore.annotations["destructiveHint"], true);
  for (const char* d : {"never /run/secrets", "not running programs", "tenant"}) {
    EXPECT_NE(create.description.find(d), std::string::npos) << d;
  }
  EXPECT_NE(restore.description.find("forks it"), std::string::npos);
}

TEST(SnapshotToolsRegistration, OnlyWithASnapshotStoreAndOffReasonSaysSo) {
  ToolEnv env;
  mcp::Server server(Options());
  ASSERT_TRUE(RegisterCellTools(server, env));
  mcp::MemoryClient client(server);
  client.Initialize();
  mcp::Json tools = client.Request("tools/list")["result"]["tools"];
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t["name"]);
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("snapshot_", 0) == 0; }),
            0);
  // The archive tools come last (cell_tools.cc's order), the package tools before them.
  EXPECT_EQ(names.back(), "download_archive");
  EXPECT_EQ(names[names.size() - 3], "npm_install");
  CellToolsConfig config;
  EXPECT_EQ(ToolOffReason(config, "snapshot_restore", /*snapshot_store=*/false),
            "no snapshot store");
  EXPECT_EQ(ToolOffReason(config, "snapshot_restore", /*snapshot_store=*/true), std::nullopt);
  config.enabled_tools = {"run_code"};
  EXPECT_EQ(ToolOffReason(config, "snapshot_list", true), "not in tools.enabled");
  std::vector<std::string> off;
  CellToolsConfig all;
  for (const ToolOff& t : ToolsOff(all, false)) off.push_back(t.tool + ": " + t.reason);
  EXPECT_EQ(off, (std::vector<std::string>{
                     "pip_install: packages.mode = \"disabled\"",
                     "npm_install: packages.mode = \"disabled\"",
                     "snapshot_create: no snapshot store", "snapshot_list: no snapshot store",
                     "snapshot_restore: no snapshot store", "snapshot_delete: no snapshot store"}));
}

TEST_F(SnapshotToolsTest, ListedInOrderAfterThePackageTools) {
  mcp::Json tools = client_.Request("tools/list")["result"]["tools"];
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t["name"]);
  ASSERT_GE(names.size(), 6u);
  // Then only the archive tools.
  EXPECT_EQ(std::vector<std::string>(names.end() - 6, names.end()),
            (std::vector<std::string>{"snapshot_create", "snapshot_list", "snapshot_restore",
                                      "snapshot_delete", "upload_archive", "download_archive"}));
}

}  // namespace
}  // namespace mcpcell::tools
