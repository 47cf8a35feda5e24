// ServeAudit, the server's side of the audit trail: one writer per state dir (the second
// is told why), the proxy's and the package service's events as trail records, HTTP close
// reasons mapped to session.end's, sessions a killed server left open ended by the
// next one, and cell.destroy written after the cell's destruction with its cleanup result
// (the cell session manager's hooks in order, with fake cells).
#include "serve/serve_audit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "audit/query.h"
#include "audit/trail_files.h"
#include "audit/verify.h"
#include "mcp/server.h"
#include "mcp/test_client.h"
#include "sandbox/cell_session.h"
#include "tools/egress_view.h"

namespace mcpcell::serve {
namespace {

// A cell that only exists and is destroyed with a given report; every request is refused.
class FakeCell final : public sandbox::CellInstance {
 public:
  FakeCell(std::string id, sandbox::DestroyReport report, std::vector<std::string>* log)
      : id_(std::move(id)), report_(std::move(report)), log_(log) {}
  const std::string& id() const override { return id_; }
  const sandbox::CellSpec& spec() const override { return spec_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  bool usable() const override { return true; }
  Result<sandbox::CgroupUsage> Usage() const override {
    sandbox::CgroupUsage u;
    u.cpu_usage_ns = 2'000'000'000;
    u.pids_current = 1;
    return u;
  }
  int TakeEgressListener() override { return -1; }
  Status Destroy() override {
    log_->push_back("Destroy " + id_);
    destroyed_ = true;
    return report_.result;
  }
  std::optional<sandbox::DestroyReport> last_destroy_report() const override {
    if (!destroyed_) return std::nullopt;
    return report_;
  }
  Result<sandbox::ExecResult> Exec(const sandbox::ExecOptions&) override { return Fake(); }
  Status SignalExec(uint64_t, int) override { return Fake(); }
  Result<sandbox::control::StatsReply> Stats() override { return Fake(); }
  Result<std::string> ReadFile(const std::string&, uint64_t) override { return Fake(); }
  Result<sandbox::FileWindow> ReadFileRange(const std::string&, uint64_t, uint64_t) override {
    return Fake();
  }
  Status WriteFile(const std::string&, std::string_view, uint32_t) override { return Fake(); }
  Status WriteFileAt(const std::string&, uint64_t, std::string_view, bool, uint32_t) override {
    return Fake();
  }
  Status AppendFile(const std::string&, std::string_view, uint32_t) override { return Fake(); }
  Status WriteNewFile(const std::string&, std::string_view, uint32_t) override { return Fake(); }
  Result<std::vector<sandbox::control::DirEntry>> ListDir(const std::string&, size_t) override {
    return Fake();
  }
  Result<sandbox::control::FileStat> Stat(const std::string&, bool) override { return Fake(); }
  Status Mkdir(const std::string&, uint32_t, bool) override { return Fake(); }
  Status Remove(const std::string&, bool) override { return Fake(); }
  Status Rename(const std::string&, const std::string&, bool) override { return Fake(); }

 private:
  static Error Fake() { return Error::Msg("fake cell"); }
  std::string id_;
  sandbox::DestroyReport report_;
  bool destroyed_ = false;
  std::vector<std::string>* log_;
  sandbox::CellSpec spec_;
  std::vector<std::string> warnings_;
};

// Makes FakeCells named after their spec's id; every second one leaves its cgroup behind
// (a process in it), the others are removed whole.
class FakeBackend final : public sandbox::CellBackend {
 public:
  explicit FakeBackend(std::vector<std::string>* log) : log_(log) {}
  Result<std::unique_ptr<sandbox::CellInstance>> Create(
      const sandbox::CellSpec& spec) const override {
    sandbox::DestroyReport report;
    report.processes_killed = 3;
    report.init_reaped = true;
    report.namespaces_gone = {"pid", "mount", "net", "ipc", "uts"};
    report.dirs_removed = {"/state/cells/" + spec.id + "/workspace", "/state/cells/" + spec.id};
    report.id_range_released = true;
    if (++made_ % 2 == 0) {
      report.left.push_back({"cgroup", "1 process left in cgroup"});
      report.result = Error::Msg("destroy cell " + spec.id + ": cgroup: 1 process left in cgroup");
    } else {
      report.cgroup_removed = {"/sys/fs/cgroup/mcpcell/" + spec.id};
    }
    return std::unique_ptr<sandbox::CellInstance>(new FakeCell(spec.id, report, log_));
  }

 private:
  std::vector<std::string>* log_;
  mutable std::atomic<int> made_{0};
};

// A manager of FakeCells whose hooks are serve's (serve.cc's MakeCells) plus a log of
// their order. The log is only read once no session is left open.
struct FakeCells {
  std::vector<std::string> log;
  std::unique_ptr<sandbox::CellSessionManager> manager;

  FakeCells(ServeAudit& audit, std::chrono::milliseconds max_lifetime) {
    sandbox::CellSessionOptions o;
    o.max_lifetime = max_lifetime;
    o.backend = std::make_shared<FakeBackend>(&log);
    manager = std::make_unique<sandbox::CellSessionManager>(
        [](const std::string& id) -> Result<sandbox::CellSpec> {
          sandbox::CellSpec spec;
          spec.id = id;
          return spec;
        },
        o);
    sandbox::CellHooks hooks;
    hooks.on_bound = [this, &audit](sandbox::CellInstance& cell, const std::string& key,
                                    const std::string& profile) {
      log.push_back("on_bound " + cell.id());
      audit.CellBound(cell, key, profile);
      return Ok();
    };
    hooks.on_destroying = [this, &audit](sandbox::CellInstance& cell) {
      log.push_back("on_destroying " + cell.id());
      audit.CellDestroying(cell);
    };
    hooks.on_destroyed = [this, &audit](const std::string& id,
                                        const sandbox::DestroyReport& report) {
      log.push_back("on_destroyed " + id + (report.result ? " ok" : " error"));
      audit.CellDestroyed(id, report);
    };
    manager->SetCellHooks(std::move(hooks));
  }
};

// The proxy's per-cell byte counters, set by the test.
class FakeEgressView final : public tools::CellEgressView {
 public:
  void Set(const std::string& cell, uint64_t up, uint64_t down) {
    std::lock_guard lock(mu_);
    reports_[cell].bytes_up = up;
    reports_[cell].bytes_down = down;
  }
  std::optional<tools::CellEgressReport> Report(const std::string& cell) const override {
    std::lock_guard lock(mu_);
    auto it = reports_.find(cell);
    if (it == reports_.end()) return std::nullopt;
    return it->second;
  }
  uint64_t RefusalCursor(const std::string&) const override { return 0; }
  std::vector<std::string> RefusalsSince(const std::string&, uint64_t) const override { return {}; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, tools::CellEgressReport> reports_;
};

// An MCP server whose session hooks are serve's (serve.cc's SetAuditHooks): a client that
// initializes is a session.start, or the audit's refusal.
struct AuditedServer {
  mcp::Server server;
  explicit AuditedServer(ServeAudit& audit) : server(Options(audit)) {}
  static mcp::ServerOptions Options(ServeAudit& audit) {
    mcp::ServerOptions o;
    o.on_session_started = [&audit](const mcp::Session& s) { return audit.SessionStarted(s); };
    return o;
  }
};

class ServeAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-serve-audit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(state_dir_); }

  Result<std::unique_ptr<ServeAudit>> Open() {
    return ServeAudit::Open({.state_dir = state_dir_,
                             .server_policy = &policy_,
                             .tenant_policies = &tenants_,
                             .transport = "http",
                             .observer = {}});
  }
  std::vector<nlohmann::json> Records() {
    std::vector<nlohmann::json> out;
    uint64_t skipped = 0;
    Status st = audit::ForEachRecord(
        audit::AuditDir(state_dir_), [&](const nlohmann::json& r) { out.push_back(r); }, &skipped);
    EXPECT_TRUE(st) << st.error().message;
    EXPECT_EQ(skipped, 0u);
    return out;
  }
  std::vector<nlohmann::json> OfType(const std::string& type) {
    std::vector<nlohmann::json> out;
    for (auto& r : Records())
      if (r["type"] == type) out.push_back(r);
    return out;
  }

  std::string state_dir_;
  policies::Policy policy_;
  std::map<std::string, policies::Policy> tenants_;
};

// Two servers on one state dir share its trail: one chain, each record with its writer's
// `server`, a `server.start` each. A running server's open session is not ended by the
// other's start; a dead server's (its lock free) is, under its own server id.
TEST_F(ServeAuditTest, ServersOnTheSameStateDirShareOneChainAndEndOnlyDeadServersSessions) {
  auto first = Open();
  ASSERT_TRUE(first) << first.error().message;
  const std::string first_id = (*first)->server_id();
  ASSERT_EQ(first_id.size(), 8u);
  ASSERT_TRUE((*first)->trail()->Append("session.start", "acme", "s1", ""));
  {
    auto second = Open();
    ASSERT_TRUE(second) << second.error().message;
    EXPECT_NE((*second)->server_id(), first_id);
    (*second)->PackageSink()({{"result", "served"}, {"session", "s1"}, {"tenant", ""}});
    (*first)->PackageSink()({{"result", "served"}, {"session", "s1"}, {"tenant", ""}});
  }
  EXPECT_TRUE(OfType("session.end").empty());  // the first still runs: s1 is its own
  auto served = OfType("package.served");
  ASSERT_EQ(served.size(), 2u);
  EXPECT_NE(served[0]["server"], first_id);
  EXPECT_EQ(served[1]["server"], first_id);
  EXPECT_EQ(OfType("server.start").size(), 2u);
  // The first goes away leaving s1 open in the trail (it never saw s1 start: the record
  // was appended past it), as a killed server would: its lock is no longer held.
  first->reset();
  {
    auto third = Open();
    ASSERT_TRUE(third) << third.error().message;
  }
  auto ends = OfType("session.end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["server"], first_id);
  EXPECT_EQ(ends[0]["session"], "s1");
  EXPECT_EQ(ends[0]["reason"], "recovered after a crash");
}

// [audit] enabled = false: no trail, no files, and the rest still works.
TEST_F(ServeAuditTest, AuditOffWritesNothing) {
  policy_.audit.enabled = false;
  {
    auto off = Open();
    ASSERT_TRUE(off) << off.error().message;
    EXPECT_EQ((*off)->trail(), nullptr);
    (*off)->PackageSink()({{"result", "served"}, {"session", "s1"}, {"tenant", ""}});
  }
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/audit"));
}

TEST_F(ServeAuditTest, EgressAndPackageEventsBecomeTrailRecords) {
  {
    auto a = Open();
    ASSERT_TRUE(a) << a.error().message;
    (*a)->EgressSink()({{"time", "2026-01-01T00:00:00.000Z"},
                        {"session", "s1"},
                        {"tenant", "acme"},
                        {"host", "refused.example.com"},
                        {"port", 80},
                        {"decision", "deny"},
                        {"bytes_up", 0}});
    (*a)->PackageSink()({{"session", "s2"},
                         {"tenant", ""},
                         {"package", "evilpkg"},
                         {"result", "refused"},
                         {"reason", "denied by pypi:evil*"}});
  }
  auto egress = OfType("egress.connection");
  ASSERT_EQ(egress.size(), 1u);
  EXPECT_EQ(egress[0]["tenant"], "acme");
  EXPECT_EQ(egress[0]["session"], "s1");
  EXPECT_EQ(egress[0]["host"], "refused.example.com");
  EXPECT_EQ(egress[0]["decision"], "deny");
  EXPECT_NE(egress[0]["time"], "2026-01-01T00:00:00.000Z");  // the trail's own time
  auto package = OfType("package.refused");
  ASSERT_EQ(package.size(), 1u);
  EXPECT_EQ(package[0]["session"], "s2");
  EXPECT_EQ(package[0]["package"], "evilpkg");
  EXPECT_EQ(OfType("checkpoint").size(), 1u);  // written at close
}

TEST_F(ServeAuditTest, ARemovedWorkspaceIsRecordedForItsTenant) {
  {
    auto a = Open();
    ASSERT_TRUE(a) << a.error().message;
    WorkspaceInfo alice{.owner = "alice",
                        .name = "proj",
                        .dir = "/x",
                        .last_used = {},
                        .bytes = 1024,
                        .holder = {}};
    alice.last_used = WallClock::from_time_t(1767322800);
    (*a)->WorkspaceRemoved(alice, "retention");
    WorkspaceInfo own;
    own.owner = "_";
    own.name = "own";
    (*a)->WorkspaceRemoved(own, "retention");
  }
  auto removed = OfType("workspace.remove");
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0]["tenant"], "alice");
  EXPECT_EQ(removed[0]["workspace"], "proj");
  EXPECT_EQ(removed[0]["bytes"], 1024);
  EXPECT_EQ(removed[0]["last_used"], "2026-01-02T03:00:00Z");
  EXPECT_EQ(removed[0]["reason"], "retention");
  EXPECT_EQ(removed[1]["tenant"], "");  // the server's own sessions
  EXPECT_EQ(removed[1]["workspace"], "own");
}

TEST_F(ServeAuditTest, HttpCloseReasonsMapToSessionEndReasons) {
  EXPECT_EQ(HttpEndReason("deleted by the client"), "client closed");
  EXPECT_EQ(HttpEndReason("transport closed"), "client closed");
  EXPECT_EQ(HttpEndReason("idle for more than 900 s"), "idle");
  EXPECT_EQ(HttpEndReason("server stopping"), "server shutdown");
}

TEST_F(ServeAuditTest, SessionsAKilledServerLeftOpenAreEndedByTheNext) {
  {
    audit::TrailOptions o;
    o.dir = audit::AuditDir(state_dir_);
    auto trail = audit::Trail::Open(o);
    ASSERT_TRUE(trail) << trail.error().message;
    ASSERT_TRUE((*trail)->Append("session.start", "acme", "s1", ""));
    ASSERT_TRUE((*trail)->Append("session.start", "acme", "s2", ""));
    ASSERT_TRUE((*trail)->Append("usage", "acme", "s2", "", {{"usage", {{"cpu_s", 1.5}}}}));
    ASSERT_TRUE((*trail)->Append("session.end", "acme", "s1", "", {{"reason", "idle"}}));
  }
  {
    auto a = Open();
    ASSERT_TRUE(a) << a.error().message;
  }
  auto ends = OfType("session.end");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[1]["session"], "s2");
  EXPECT_EQ(ends[1]["tenant"], "acme");
  EXPECT_EQ(ends[1]["reason"], "recovered after a crash");
  EXPECT_EQ(ends[1]["usage"]["cpu_s"], 1.5);
  {
    auto again = Open();  // nothing left open: nothing more written
    ASSERT_TRUE(again) << again.error().message;
  }
  EXPECT_EQ(OfType("session.end").size(), 2u);
}

// A server killed between two writes (its lock free, no server.stop): the next one writes a
// `recovered` naming it and its last record, then ends its open session; `audit verify`
// notes the crash. Its session.start is in a file rotated away before the crash: the
// rotated files are read as far back as the crashed run goes.
TEST_F(ServeAuditTest, AServerKilledBetweenWritesIsRecoveredAcrossRotatedFiles) {
  std::string killed;
  uint64_t last_seq = 0;
  std::string last_hash;
  {
    audit::TrailOptions o;
    o.dir = audit::AuditDir(state_dir_);
    o.server = "0badc0de";
    o.rotate_bytes = 1;  // every record starts a new file
    auto trail = audit::Trail::Open(o);
    ASSERT_TRUE(trail) << trail.error().message;
    ASSERT_TRUE((*trail)->Append("server.start", "", "", "", {{"pid", 4242}}));
    ASSERT_TRUE((*trail)->Append("session.start", "acme", "s1", ""));
    ASSERT_TRUE((*trail)->Append("session.start", "acme", "s2", ""));
    ASSERT_TRUE((*trail)->Append("session.end", "acme", "s2", "", {{"reason", "idle"}}));
    ASSERT_TRUE((*trail)->Append("usage", "acme", "s1", "", {{"usage", {{"cpu_s", 0.5}}}}));
    // The trail's own close (a checkpoint) but no server.stop: what ServeAudit::Close would
    // have written is missing, as after a kill -9.
    ASSERT_TRUE((*trail)->Close());
    last_seq = (*trail)->last_seq();
    last_hash = (*trail)->last_hash();
    killed = o.server;
  }
  ASSERT_GT(std::distance(std::filesystem::directory_iterator(audit::AuditDir(state_dir_)),
                          std::filesystem::directory_iterator{}),
            4);
  {
    auto a = Open();
    ASSERT_TRUE(a) << a.error().message;
  }
  auto recovered = OfType("recovered");
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0]["stopped_server"], killed);
  EXPECT_EQ(recovered[0]["after_seq"], last_seq);
  EXPECT_EQ(recovered[0]["after_hash"], last_hash);
  EXPECT_EQ(recovered[0]["reason"], "server 0badc0de (pid 4242) stopped without server.stop");
  auto ends = OfType("session.end");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[1]["session"], "s1");
  EXPECT_EQ(ends[1]["server"], killed);
  EXPECT_EQ(ends[1]["reason"], "recovered after a crash");
  EXPECT_EQ(ends[1]["usage"]["cpu_s"], 0.5);
  EXPECT_GT(ends[1]["seq"], recovered[0]["seq"]);
  auto report = audit::VerifyTrail(audit::AuditDir(state_dir_), nullptr);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->ok());
  const std::string notes = ::testing::PrintToString(report->notes);
  EXPECT_NE(notes.find("server 0badc0de stopped without server.stop after seq " +
                       std::to_string(last_seq) + "; recovered at seq"),
            std::string::npos)
      << notes;
  {
    auto again = Open();  // recovered once: nothing more written
    ASSERT_TRUE(again) << again.error().message;
  }
  EXPECT_EQ(OfType("recovered").size(), 1u);
  EXPECT_EQ(OfType("session.end").size(), 2u);
}

// A snapshot the session made counts in its storage_bytes until it is deleted, by this
// session or another of the tenant: session.end carries what is still stored.
TEST_F(ServeAuditTest, TheSessionsSnapshotsCountInItsStorageUntilDeleted) {
  tenants_["acme"] = policy_;
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  std::string session;
  {
    AuditedServer server(**a);
    mcp::MemoryClient client(server.server, 0, "acme");
    ASSERT_TRUE(client.Initialize().contains("result"));
    session = client.session()->id();
    sandbox::SnapshotInfo kept, gone;
    kept.id = "a1";
    kept.stored_bytes = 70000;
    gone.id = "b2";
    gone.stored_bytes = 5000;
    (*a)->SnapshotCreated("acme", session, kept);
    (*a)->SnapshotCreated("acme", session, gone);
    EXPECT_EQ(
        (*a)->usage()->Find(session)->Snapshot(std::chrono::steady_clock::now()).storage_bytes,
        75000u);
    (*a)->SnapshotDeleted("acme", gone);
    (*a)->SessionEnded(session, "client closed");
  }
  a->reset();
  auto ends = OfType("session.end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["usage"]["storage_bytes"], 70000);
}

// [audit] required = true: while the trail cannot be written a new session is refused (its
// initialize fails with the reason); once a write succeeds again sessions start.
TEST_F(ServeAuditTest, ARequiredTrailThatCannotBeWrittenRefusesNewSessions) {
  policy_.audit.required = true;
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  AuditedServer server(**a);
  const std::string dir = audit::AuditDir(state_dir_);
  // The audit directory replaced by a file: the next write cannot find the trail.
  std::filesystem::rename(dir, dir + ".away");
  { std::ofstream(dir) << "not a directory"; }
  EXPECT_FALSE((*a)->trail()->Append("probe", "", "", ""));
  EXPECT_FALSE((*a)->trail()->Healthy());
  {
    mcp::MemoryClient client(server.server, 0, "acme");
    mcp::Json refused = client.Initialize();
    ASSERT_TRUE(refused.contains("error")) << refused.dump();
    const std::string message = refused["error"].value("message", "");
    EXPECT_NE(message.find("the audit trail cannot be written"), std::string::npos) << message;
    EXPECT_NE(message.find("[audit] required = true"), std::string::npos) << message;
  }
  std::filesystem::remove(dir);
  std::filesystem::rename(dir + ".away", dir);
  ASSERT_TRUE((*a)->trail()->Append("probe", "", "", ""));
  {
    mcp::MemoryClient client(server.server, 0, "acme");
    mcp::Json accepted = client.Initialize();
    EXPECT_TRUE(accepted.contains("result")) << accepted.dump();
  }
  a->reset();
  auto starts = OfType("session.start");
  ASSERT_EQ(starts.size(), 1u);  // only the accepted one
  EXPECT_EQ(starts[0]["tenant"], "acme");
}

// secret.substituted / secret.refused: the secret's name, host, surface and the refusal's
// line, with the tenant of the session; nothing else (the value never reaches the audit).
TEST_F(ServeAuditTest, SecretEventsNameTheSecretNeverItsValue) {
  tenants_["acme"] = policy_;
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  {
    AuditedServer server(**a);
    mcp::MemoryClient client(server.server, 0, "acme");
    ASSERT_TRUE(client.Initialize().contains("result"));
    const std::string session = client.session()->id();
    (*a)->SecretUsed({.session_id = session,
                      .secret = "API_TOKEN",
                      .host = "api.example.com:443",
                      .surface = "header",
                      .decision = "substituted",
                      .reason = "",
                      .end_session = false});
    (*a)->SecretUsed({.session_id = session,
                      .secret = "API_TOKEN",
                      .host = "other.example.com:443",
                      .surface = "body",
                      .decision = "refused",
                      .reason = "mcpcell: secret API_TOKEN may not go to other.example.com",
                      .end_session = true});
  }
  a->reset();
  auto used = OfType("secret.substituted");
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0]["tenant"], "acme");
  EXPECT_EQ(used[0]["secret"], "API_TOKEN");
  EXPECT_EQ(used[0]["host"], "api.example.com:443");
  EXPECT_EQ(used[0]["surface"], "header");
  EXPECT_EQ(used[0]["end_session"], false);
  EXPECT_FALSE(used[0].contains("reason"));
  std::set<std::string> keys;
  for (const auto& [key, value] : used[0].items()) keys.insert(key);
  const std::set<std::string> expected = {"seq",         "time",   "type",   "tenant", "session",
                                          "cell",        "server", "secret", "host",   "surface",
                                          "end_session", "prev",   "hash"};
  EXPECT_EQ(keys, expected);
  auto refused = OfType("secret.refused");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]["surface"], "body");
  EXPECT_EQ(refused[0]["end_session"], true);
  EXPECT_EQ(refused[0]["reason"], "mcpcell: secret API_TOKEN may not go to other.example.com");
}

// on_destroying samples, Destroy runs, on_destroyed writes cell.destroy with the figures
// sampled before, the cleanup report (what was removed, what was left and why) and the
// result: "ok", or Destroy's error naming what was left.
TEST_F(ServeAuditTest, CellDestroyIsWrittenAfterDestructionWithTheCleanupResult) {
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  FakeCells cells(**a, std::chrono::hours(1));
  for (const std::string key : {"s1", "s2"}) {
    auto session = cells.manager->Get(key);
    ASSERT_TRUE(session) << session.error().message;
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease) << lease.error().message;
  }
  ASSERT_TRUE(cells.manager->Close("s1"));
  Status bad = cells.manager->Close("s2");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("cgroup: 1 process left"), std::string::npos)
      << bad.error().message;
  cells.manager.reset();
  a->reset();  // the trail closed: read it whole

  std::vector<nlohmann::json> destroys = OfType("cell.destroy");
  ASSERT_EQ(destroys.size(), 2u);
  std::map<std::string, nlohmann::json> by_session;
  for (auto& r : destroys) by_session[r["session"]] = r;
  const std::string ok_cell = by_session["s1"]["cell"];
  const std::string bad_cell = by_session["s2"]["cell"];
  const nlohmann::json ok_cleanup = {
      {"processes_killed", 3},
      {"namespaces", {"pid", "mount", "net", "ipc", "uts"}},
      {"cgroup_removed", {"/sys/fs/cgroup/mcpcell/" + ok_cell}},
      {"dirs_removed", {"/state/cells/" + ok_cell + "/workspace", "/state/cells/" + ok_cell}},
      {"id_range_released", true},
      {"left", nlohmann::json::array()}};
  EXPECT_EQ(by_session["s1"]["cleanup"], ok_cleanup) << by_session["s1"].dump();
  EXPECT_EQ(by_session["s1"]["result"], "ok");
  EXPECT_EQ(by_session["s1"]["cpu_s"], 2.0);
  EXPECT_EQ(by_session["s1"]["pids_left"], 1);
  const nlohmann::json& bad_cleanup = by_session["s2"]["cleanup"];
  EXPECT_EQ(bad_cleanup["cgroup_removed"], nlohmann::json::array()) << bad_cleanup.dump();
  EXPECT_EQ(bad_cleanup["processes_killed"], 3);
  EXPECT_EQ(bad_cleanup["id_range_released"], true);
  EXPECT_EQ(bad_cleanup["left"],
            nlohmann::json::parse(R"([{"what":"cgroup","why":"1 process left in cgroup"}])"))
      << bad_cleanup.dump();
  EXPECT_EQ(by_session["s2"]["result"],
            "destroy cell " + bad_cell + ": cgroup: 1 process left in cgroup");
  EXPECT_EQ(by_session["s2"]["cpu_s"], 2.0);
  const std::vector<std::string> s1_order = {"on_destroying " + ok_cell, "Destroy " + ok_cell,
                                             "on_destroyed " + ok_cell + " ok"};
  auto at = std::search(cells.log.begin(), cells.log.end(), s1_order.begin(), s1_order.end());
  EXPECT_NE(at, cells.log.end()) << ::testing::PrintToString(cells.log);
  const std::vector<std::string> s2_order = {"on_destroying " + bad_cell, "Destroy " + bad_cell,
                                             "on_destroyed " + bad_cell + " error"};
  at = std::search(cells.log.begin(), cells.log.end(), s2_order.begin(), s2_order.end());
  EXPECT_NE(at, cells.log.end()) << ::testing::PrintToString(cells.log);
}

// A session past its maximum lifetime: the reaper closes it (its cell destroyed, hooks in
// order) and then tells the expiry listener the kind, which serve turns into session.end
// "max lifetime".
TEST_F(ServeAuditTest, MaxLifetimeClosesTheSessionThenTellsTheListenerItsKind) {
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  FakeCells cells(**a, std::chrono::milliseconds(1));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, sandbox::SessionExpiry>> expired;
  cells.manager->SetExpiryListener(
      [&](const std::string& key, sandbox::SessionExpiry kind, const std::string& why) {
        std::lock_guard lock(mu);
        cells.log.push_back("expired " + key + ": " + why);
        expired.emplace_back(key, kind);
        cv.notify_all();
      });
  auto session = cells.manager->Get("s1");
  ASSERT_TRUE(session) << session.error().message;
  std::string cell_id;
  {
    auto lease = (*session)->Acquire();
    ASSERT_TRUE(lease) << lease.error().message;
    cell_id = lease->id();
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::minutes(1), [&] { return !expired.empty(); }));
    ASSERT_EQ(expired.size(), 1u);
    EXPECT_EQ(expired[0].first, "s1");
    EXPECT_EQ(expired[0].second, sandbox::SessionExpiry::kMaxLifetime);
    ASSERT_GE(cells.log.size(), 4u);
    EXPECT_EQ(cells.log[cells.log.size() - 2], "on_destroyed " + cell_id + " ok");
    EXPECT_NE(cells.log.back().find("maximum lifetime"), std::string::npos) << cells.log.back();
  }
  EXPECT_TRUE((*session)->closed());
  session->reset();
  cells.manager.reset();
  a->reset();
  auto destroys = OfType("cell.destroy");
  ASSERT_EQ(destroys.size(), 1u);
  EXPECT_EQ(destroys[0]["result"], "ok");
  EXPECT_EQ(destroys[0]["cleanup"]["left"], nlohmann::json::array());
}

// Pause and resume (issue 28): session.pause and session.resume with paused_s; the meter
// counts the pause as paused, not active, time; a cell destroyed while paused ends the
// pause in the meter and writes no session.resume.
TEST_F(ServeAuditTest, PauseAndResumeAreRecordedAndMeteredAsPausedTime) {
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  std::vector<std::string> log;
  FakeCell cell("c1", sandbox::DestroyReport{}, &log);
  (*a)->CellBound(cell, "s1", "acme");
  auto meter = (*a)->usage()->For("s1");
  (*a)->SessionPaused(cell, "s1");
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  EXPECT_GE(meter->Snapshot(later).wall_paused_s, 10.0);  // still paused: counts up to then
  (*a)->SessionUnpaused(cell, "s1", std::chrono::milliseconds(1500), true);
  EXPECT_LT(meter->Snapshot(later).wall_paused_s, 10.0);  // ended: no longer growing
  (*a)->SessionPaused(cell, "s1");
  (*a)->SessionUnpaused(cell, "s1", std::chrono::milliseconds(700), false);
  a->reset();
  auto paused = OfType("session.pause");
  ASSERT_EQ(paused.size(), 2u);
  EXPECT_EQ(paused[0]["session"], "s1");
  EXPECT_EQ(paused[0]["cell"], "c1");
  EXPECT_EQ(paused[0]["tenant"], "acme");
  auto resumed = OfType("session.resume");
  ASSERT_EQ(resumed.size(), 1u);  // the second pause ended with the cell, not a resume
  EXPECT_DOUBLE_EQ(resumed[0]["paused_s"].get<double>(), 1.5);
}

// Egress bytes moved after the session's last call (no tool samples them): the usage
// interval's sample and the cell's destroy read the proxy's counters, and a replaced cell's
// last bytes are carried into session.end.
TEST_F(ServeAuditTest, EgressAfterTheLastCallIsMeteredAtUsageIntervalsAndWhenTheCellGoes) {
  policy_.audit.usage_interval = std::chrono::seconds(1);
  tenants_["acme"] = policy_;
  auto a = Open();
  ASSERT_TRUE(a) << a.error().message;
  FakeEgressView egress;
  (*a)->SetEgressView(&egress);
  std::string session;
  {
    AuditedServer server(**a);
    mcp::MemoryClient client(server.server, 0, "acme");
    ASSERT_TRUE(client.Initialize().contains("result"));
    session = client.session()->id();
    std::vector<std::string> log;
    FakeCell first("c1", sandbox::DestroyReport{}, &log);
    (*a)->CellBound(first, session, "acme");
    egress.Set("c1", 100, 5000);  // a download in the background, after any call
    std::vector<nlohmann::json> usage;
    for (int i = 0; i < 100 && usage.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (auto& r : OfType("usage"))
        if (r["session"] == session && r["usage"]["egress_down_bytes"] == 5000) usage.push_back(r);
    }
    ASSERT_FALSE(usage.empty()) << "no usage record with the proxy's bytes";
    EXPECT_EQ(usage[0]["usage"]["egress_up_bytes"], 100);
    EXPECT_EQ(usage[0]["tenant"], "acme");
    egress.Set("c1", 300, 9000);  // more, then the cell is replaced
    (*a)->CellDestroying(first);
    (*a)->CellDestroyed("c1", sandbox::DestroyReport{});
    FakeCell second("c2", sandbox::DestroyReport{}, &log);
    (*a)->CellBound(second, session, "acme");
    egress.Set("c2", 10, 1000);
    (*a)->SessionEnded(session, "client closed");
    (*a)->CellDestroying(second);
    (*a)->CellDestroyed("c2", sandbox::DestroyReport{});
  }
  a->reset();
  auto ends = OfType("session.end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["session"], session);
  EXPECT_EQ(ends[0]["usage"]["egress_down_bytes"], 10000);  // c1's last 9000 + c2's 1000
  EXPECT_EQ(ends[0]["usage"]["egress_up_bytes"], 310);
}

}  // namespace
}  // namespace mcpcell::serve
