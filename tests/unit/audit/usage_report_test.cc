// UsageReport: per session the window's share of its cumulative figures, per tenant the
// sums; JSON and CSV forms.
#include "audit/usage_report.h"

#include <gtest/gtest.h>

#include "audit/record.h"

namespace mcpcell::audit {
namespace {

nlohmann::json Rec(const std::string& type, const std::string& time, const std::string& tenant,
                   const std::string& session, double cpu, uint64_t calls) {
  return {{"type", type},
          {"time", time},
          {"tenant", tenant},
          {"session", session},
          {"reason", "client closed"},
          {"usage",
           {{"cpu_s", cpu},
            {"memory_gib_s", cpu * 2},
            {"peak_memory_bytes", 1000 + calls},
            {"wall_active_s", 10.0},
            {"wall_paused_s", 0.0},
            {"egress_up_bytes", 5},
            {"egress_down_bytes", 7},
            {"calls_by_tool", {{"run_code", calls}}}}}};
}

std::optional<int64_t> Ms(const std::string& t) {
  auto ms = ParseTimeMs(t);
  return *ms;
}

TEST(UsageReport, SumsSessionsPerTenantFromTheirLastRecord) {
  UsageReport r(std::nullopt, std::nullopt);
  r.Add(Rec("usage", "2026-12-01T10:00:00Z", "acme", "s1", 1.0, 1));
  r.Add(Rec("session.end", "2026-12-01T10:05:00Z", "acme", "s1", 3.0, 4));
  r.Add(Rec("session.end", "2026-12-01T11:00:00Z", "acme", "s2", 2.0, 1));
  r.Add(Rec("session.end", "2026-12-01T11:00:00Z", "beta", "s3", 0.5, 2));
  r.Add({{"type", "exec.end"}, {"time", "2026-12-01T11:00:00Z"}, {"tenant", "acme"}});
  auto sessions = r.Sessions();
  ASSERT_EQ(sessions.size(), 3u);
  EXPECT_EQ(sessions[0].session, "s1");
  EXPECT_TRUE(sessions[0].ended);
  EXPECT_DOUBLE_EQ(sessions[0].figures.cpu_s, 3.0);  // the last record, not a sum of both
  auto tenants = r.Tenants();
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].tenant, "acme");
  EXPECT_EQ(tenants[0].sessions, 2u);
  EXPECT_DOUBLE_EQ(tenants[0].figures.cpu_s, 5.0);
  EXPECT_EQ(tenants[0].figures.calls(), 5u);
  EXPECT_EQ(tenants[0].figures.peak_memory_bytes, 1004u);  // the largest, not a sum
  EXPECT_EQ(tenants[1].tenant, "beta");
}

TEST(UsageReport, AWindowCountsOnlyWhatWasUsedInIt) {
  UsageReport r(Ms("2026-12-01T10:00:00Z"), Ms("2026-12-01T11:00:00Z"));
  r.Add(Rec("usage", "2026-12-01T09:55:00Z", "acme", "s1", 1.0, 1));  // before: subtracted
  r.Add(Rec("usage", "2026-12-01T10:30:00Z", "acme", "s1", 4.0, 3));
  r.Add(Rec("session.end", "2026-12-01T11:30:00Z", "acme", "s1", 9.0, 9));  // after: ignored
  r.Add(Rec("usage", "2026-12-01T09:00:00Z", "acme", "old", 1.0, 1));       // nothing in it
  auto sessions = r.Sessions();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_FALSE(sessions[0].ended);
  EXPECT_DOUBLE_EQ(sessions[0].figures.cpu_s, 3.0);
  EXPECT_EQ(sessions[0].figures.calls_by_tool.at("run_code"), 2u);
  EXPECT_DOUBLE_EQ(sessions[0].figures.wall_active_s, 0.0);
}

TEST(UsageReport, TenantFilterAndOutputForms) {
  UsageReport r(std::nullopt, std::nullopt, "beta");
  r.Add(Rec("session.end", "2026-12-01T10:00:00Z", "acme", "s1", 1.0, 1));
  nlohmann::json beta = Rec("session.end", "2026-12-01T10:00:00Z", "beta", "s,2", 0.25, 2);
  beta["usage"]["storage_bytes"] = 8192;
  r.Add(beta);
  nlohmann::json j = r.ToJson();
  ASSERT_EQ(j["sessions"].size(), 1u);
  EXPECT_EQ(j["sessions"][0]["session"], "s,2");
  EXPECT_EQ(j["tenants"][0]["sessions"], 1);
  EXPECT_EQ(j["tenants"][0]["calls"], 2);
  EXPECT_EQ(r.ToCsv(),
            "kind,tenant,session,cpu_s,memory_gib_s,peak_memory_bytes,wall_active_s,"
            "wall_paused_s,egress_up_bytes,egress_down_bytes,storage_bytes,calls\n"
            "tenant,beta,,0.250,0.500000,1002,10.000,0.000,5,7,8192,2\n"
            "session,beta,\"s,2\",0.250,0.500000,1002,10.000,0.000,5,7,8192,2\n");
  EXPECT_EQ(j["sessions"][0]["storage_bytes"], 8192);
}

// Two servers share a trail and both number sessions from s1: each is its own session,
// named with its server.
TEST(UsageReport, SessionsOfTwoServersWithTheSameIdAreApart) {
  UsageReport r(std::nullopt, std::nullopt);
  nlohmann::json a = Rec("session.end", "2026-12-01T10:00:00Z", "acme", "s1", 1.0, 1);
  nlohmann::json b = Rec("session.end", "2026-12-01T10:00:01Z", "acme", "s1", 2.0, 1);
  a["server"] = "aaaa0001";
  b["server"] = "bbbb0002";
  r.Add(a);
  r.Add(b);
  auto sessions = r.Sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].session, "aaaa0001/s1");
  EXPECT_EQ(sessions[1].session, "bbbb0002/s1");
  EXPECT_DOUBLE_EQ(r.Tenants()[0].figures.cpu_s, 3.0);
}

TEST(UsageReport, ASessionIdUsedAgainByTheNextServerRunIsAnotherSession) {
  UsageReport r(std::nullopt, std::nullopt);
  r.Add({{"type", "session.start"},
         {"time", "2026-12-01T10:00:00Z"},
         {"tenant", ""},
         {"session", "s1"}});
  r.Add(Rec("session.end", "2026-12-01T10:05:00Z", "", "s1", 3.0, 4));
  r.Add({{"type", "session.start"},
         {"time", "2026-12-01T12:00:00Z"},
         {"tenant", ""},
         {"session", "s1"}});
  r.Add(Rec("session.end", "2026-12-01T12:05:00Z", "", "s1", 1.0, 1));
  auto sessions = r.Sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].started, "2026-12-01T10:00:00Z");
  EXPECT_DOUBLE_EQ(sessions[0].figures.cpu_s, 3.0);
  EXPECT_DOUBLE_EQ(sessions[1].figures.cpu_s, 1.0);
  EXPECT_DOUBLE_EQ(r.Tenants()[0].figures.cpu_s, 4.0);
}

}  // namespace
}  // namespace mcpcell::audit
