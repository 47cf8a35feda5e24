// Readiness (serve/health.h): the result is cached for max_age, then checked again; the
// report names every failing check in order; DirWritable names the directory it could
// not write.
#include "serve/health.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace mcpcell::serve {
namespace {

using Clock = std::chrono::steady_clock;

struct FakeCheck {
  int runs = 0;
  bool ok = true;
  ReadinessCheck As(const std::string& name) {
    return {name, [this]() -> Status {
              ++runs;
              return ok ? Ok() : Status(Error::Msg("broken"));
            }};
  }
};

class ReadinessTest : public ::testing::Test {
 protected:
  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
  Readiness::Clock clock_ = [this] { return now_; };
};

TEST_F(ReadinessTest, ChecksRunOncePerMaxAgeAndTheResultIsReusedMeanwhile) {
  FakeCheck a;
  Readiness readiness({a.As("a")}, std::chrono::seconds(2), clock_);
  EXPECT_TRUE(readiness.Check().ready);
  EXPECT_EQ(a.runs, 1);
  a.ok = false;
  now_ += std::chrono::milliseconds(1999);
  EXPECT_TRUE(readiness.Check().ready) << "a result younger than max_age is reused";
  EXPECT_EQ(a.runs, 1);
  now_ += std::chrono::milliseconds(1);
  ReadinessReport report = readiness.Check();
  EXPECT_FALSE(report.ready);
  EXPECT_EQ(a.runs, 2);
  EXPECT_EQ(report.failing, std::vector<std::string>{"a"});
}

TEST_F(ReadinessTest, ReportNamesEveryFailingCheckInOrderAndRecovers) {
  FakeCheck state, audit, pool;
  Readiness readiness({state.As("state_dir"), audit.As("audit"), pool.As("warm_pool")},
                      std::chrono::seconds(1), clock_);
  state.ok = false;
  pool.ok = false;
  ReadinessReport report = readiness.Check();
  EXPECT_FALSE(report.ready);
  EXPECT_EQ(report.failing, (std::vector<std::string>{"state_dir", "warm_pool"}));
  state.ok = pool.ok = true;
  now_ += std::chrono::seconds(1);
  report = readiness.Check();
  EXPECT_TRUE(report.ready);
  EXPECT_TRUE(report.failing.empty());
  EXPECT_EQ(audit.runs, 2);
}

TEST(DirWritableTest, AWritableDirPassesAndLeavesNothingBehind) {
  char tmpl[] = "/tmp/mcpcell-health-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  EXPECT_TRUE(DirWritable(tmpl));
  EXPECT_TRUE(std::filesystem::is_empty(tmpl));
  std::filesystem::remove_all(tmpl);
}

TEST(DirWritableTest, AMissingDirFailsNamingIt) {
  Status st = DirWritable("/nonexistent-mcpcell-health-dir");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("/nonexistent-mcpcell-health-dir"), std::string::npos)
      << st.error().message;
}

TEST(HealthRoutesTest, ReadyzAnswers503WithTheFailingNamesOnlyAndHealthzStaysOk) {
  auto readiness = std::make_shared<Readiness>(
      std::vector<ReadinessCheck>{
          {"state_dir", [] { return Status(Error::Msg("secret /path/detail")); }}},
      std::chrono::seconds(1));
  auto routes = HealthRoutes(readiness);
  ASSERT_EQ(routes.size(), 2u);
  mcp::HttpRouteRequest get{"GET", "/readyz", {}, "", "127.0.0.1:1"};
  mcp::HttpRouteResponse ready = routes[1].handler(get);
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, "{\"failing\":[\"state_dir\"],\"status\":\"not ready\"}\n");
  get.path = "/healthz";
  mcp::HttpRouteResponse health = routes[0].handler(get);
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  get.method = "POST";
  EXPECT_EQ(routes[0].handler(get).status, 405);
}

}  // namespace
}  // namespace mcpcell::serve
