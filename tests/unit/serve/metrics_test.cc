// ServeMetrics (serve/metrics.h) and SessionStates (serve/metrics_sessions.h): events as
// the audit trail is given them become the counters and gauges of the text exposition.
#include "serve/metrics.h"

#include <gtest/gtest.h>

#include "serve/metrics_sessions.h"

namespace mcpcell::serve {
namespace {

using State = SessionStates::State;
using nlohmann::json;

// The value of the sample `line_prefix` (name and labels as serialized), or -1.
double Sample(const std::string& text, const std::string& line_prefix) {
  size_t at = text.find("\n" + line_prefix + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + line_prefix.size() + 2));
}

TEST(SessionStatesTest, FollowsACellThroughPauseHibernationAndEnd) {
  SessionStates s;
  s.Event("cell.create", "alice", "s1", "c1");
  s.Event("cell.create", "alice", "s2", "c2");
  EXPECT_EQ((s.Count()[{"alice", State::kRunning}]), 2u);
  s.Event("session.pause", "alice", "s1", "c1");
  EXPECT_EQ((s.Count()[{"alice", State::kPaused}]), 1u);
  s.Event("session.resume", "alice", "s1", "c1");
  s.Event("session.hibernate", "alice", "s1", "c1");
  s.Event("cell.destroy", "alice", "s1", "c1");
  auto counts = s.Count();
  EXPECT_EQ((counts[{"alice", State::kHibernated}]), 1u);
  EXPECT_EQ((counts[{"alice", State::kRunning}]), 1u);
  EXPECT_EQ(s.Cells()["alice"], 1u) << "a hibernated session has no cell";
  s.Event("session.end", "alice", "s1", "");
  s.Event("cell.destroy", "alice", "s2", "c2");
  EXPECT_TRUE(s.Count().empty());
  EXPECT_TRUE(s.Cells().empty());
}

TEST(SessionStatesTest, AReplacedCellDestroyedAfterItsSuccessorKeepsTheSession) {
  SessionStates s;
  s.Event("cell.create", "", "s1", "c1");
  s.Event("cell.create", "", "s1", "c2");
  s.Event("cell.destroy", "", "s1", "c1");
  EXPECT_EQ((s.Count()[{"", State::kRunning}]), 1u);
  EXPECT_EQ(s.Cells()[""], 1u);
}

TEST(ServeMetricsTest, EventsBecomeCountersWithBoundedLabels) {
  ServeMetrics m;
  m.Event("cell.create", "alice", "s1", "c1", json::object());
  m.Event("exec.end", "alice", "s1", "c1", {{"cpu_ms", 1500}});
  m.Event("egress.connection", "alice", "s1", "",
          {{"decision", "deny"}, {"bytes_up", 10}, {"bytes_down", 0}});
  m.Event("egress.connection", "alice", "s1", "",
          {{"decision", "allow"}, {"bytes_up", 5}, {"bytes_down", 700}});
  m.Event("package.served", "alice", "s1", "",
          {{"registry", "pypi"}, {"source", "cache"}, {"filename", "a.whl"}});
  m.Event("package.served", "alice", "s1", "",
          {{"registry", "pypi"}, {"source", "upstream https://x/a.whl"}, {"filename", "a.whl"}});
  m.Event("package.served", "alice", "s1", "",
          {{"registry", "pypi"}, {"source", "upstream https://x/simple"}, {"filename", ""}});
  m.Event("policy.refused", "alice", "s1", "", {{"call", "tools/call run_code"}});
  m.Event("cell.failed", "", "", "c9", json::object());
  m.ToolCallDone("alice", "run_command", false, std::chrono::milliseconds(30));
  m.ToolCallDone("alice", "run_command", true, std::chrono::milliseconds(3));
  m.RequestDone({"POST", "mcp", 401, ""});
  m.AuditRecordWritten("exec.end");
  m.SetLiveSource([] { return LiveFigures{{{"", 2}}, 3}; });
  const std::string text = "\n" + m.Scrape();
  EXPECT_EQ(Sample(text, "mcpcell_cell_creations_total{tenant=\"alice\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_cell_failures_total"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_exec_cpu_seconds_total{tenant=\"alice\"}"), 1.5);
  EXPECT_EQ(Sample(text, "mcpcell_egress_refusals_total{tenant=\"alice\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_egress_bytes_total{direction=\"down\",tenant=\"alice\"}"), 700);
  EXPECT_EQ(Sample(text, "mcpcell_egress_bytes_total{direction=\"up\",tenant=\"alice\"}"), 15);
  EXPECT_EQ(Sample(text, "mcpcell_package_cache_hits_total{registry=\"pypi\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_package_cache_misses_total{registry=\"pypi\"}"), 1);
  EXPECT_EQ(
      Sample(text,
             "mcpcell_tool_calls_total{outcome=\"refused\",tenant=\"alice\",tool=\"run_code\"}"),
      1);
  EXPECT_EQ(
      Sample(text,
             "mcpcell_tool_calls_total{outcome=\"ok\",tenant=\"alice\",tool=\"run_command\"}"),
      1);
  EXPECT_EQ(
      Sample(text,
             "mcpcell_tool_call_duration_seconds_count{outcome=\"error\",tool=\"run_command\"}"),
      1);
  EXPECT_EQ(Sample(text, "mcpcell_http_requests_total{code=\"401\",route=\"mcp\",tenant=\"\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_audit_records_total{type=\"exec.end\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_audit_write_errors_total"), 3);
  EXPECT_EQ(Sample(text, "mcpcell_warm_pool_ready{tenant=\"\"}"), 2);
  EXPECT_EQ(Sample(text, "mcpcell_sessions{state=\"running\",tenant=\"alice\"}"), 1);
}

TEST(ServeMetricsTest, GaugesDropToZeroAndWriteErrorsCountOnce) {
  ServeMetrics m;
  uint64_t errors = 2;
  m.SetLiveSource([&errors] { return LiveFigures{{}, errors}; });
  m.Event("cell.create", "", "s1", "c1", json::object());
  std::string text = "\n" + m.Scrape();
  EXPECT_EQ(Sample(text, "mcpcell_cells{tenant=\"\"}"), 1);
  EXPECT_EQ(Sample(text, "mcpcell_audit_write_errors_total"), 2);
  m.Event("cell.destroy", "", "s1", "c1", json::object());
  text = "\n" + m.Scrape();
  EXPECT_EQ(Sample(text, "mcpcell_cells{tenant=\"\"}"), 0);
  EXPECT_EQ(Sample(text, "mcpcell_sessions{state=\"running\",tenant=\"\"}"), 0);
  EXPECT_EQ(Sample(text, "mcpcell_audit_write_errors_total"), 2) << "read twice, counted once";
}

}  // namespace
}  // namespace mcpcell::serve
