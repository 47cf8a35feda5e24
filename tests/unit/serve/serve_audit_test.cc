// ServeAudit, the server's side of the audit trail: one writer per state dir (the second
// is told why), the proxy's and the package service's events as trail records, HTTP close
// reasons mapped to session.end's, and sessions a killed server left open ended by the
// next one.
#include "serve/serve_audit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <vector>

#include "audit/query.h"
#include "audit/trail_files.h"

namespace mcpcell::serve {
namespace {

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
                             .transport = "http"});
  }
  std::vector<nlohmann::json> Records() {
    std::vector<nlohmann::json> out;
    uint64_t skipped = 0;
    Status st = audit::ForEachRecord(
        audit::AuditDir(state_dir_), [&](const nlohmann::json& r) { out.push_back(r); },
        &skipped);
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

// A second server on the state dir (a second stdio client's, say) serves unaudited and
// writes nothing into the first one's chain; with [audit] required it is refused, saying why.
TEST_F(ServeAuditTest, ASecondServerOnTheSameStateDirServesUnauditedUnlessAuditIsRequired) {
  auto first = Open();
  ASSERT_TRUE(first) << first.error().message;
  {
    auto second = Open();
    ASSERT_TRUE(second) << second.error().message;
    EXPECT_EQ((*second)->trail(), nullptr);
    (*second)->PackageSink()({{"result", "served"}, {"session", "s9"}, {"tenant", ""}});
  }
  policy_.audit.required = true;
  auto refused = Open();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("one audited server per state dir"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("is being written by another process"),
            std::string::npos)
      << refused.error().message;
  policy_.audit.required = false;
  first->reset();
  EXPECT_TRUE(OfType("package.served").empty());
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

}  // namespace
}  // namespace mcpcell::serve
