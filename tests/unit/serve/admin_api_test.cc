// The operators of the HTTP config, the /admin/audit parameters, and the route itself over
// a real trail in a temp dir (scoping, refusals, auth.refused records).
#include "serve/admin_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>

#include "audit/trail.h"

namespace mcpcell::serve {
namespace {

using nlohmann::json;

const std::string kTenantA = "token-a", kTenantB = "token-b";
const std::string kOpsA = "ops-a", kOpsAll = "ops-all";

std::string Config(const std::string& operators) {
  return "[[tenant]]\nname = \"a\"\ntoken_sha256 = [\"" + Sha256Hex(kTenantA) +
         "\"]\n[[tenant]]\nname = \"b\"\ntoken_sha256 = [\"" + Sha256Hex(kTenantB) + "\"]\n" +
         operators;
}

std::string Operator(const std::string& name, const std::string& token,
                     const std::string& tenants) {
  return "[[operator]]\nname = \"" + name + "\"\ntoken_sha256 = [\"" + Sha256Hex(token) +
         "\"]\ntenants = " + tenants + "\n";
}

std::string ParseError(const std::string& text) {
  std::string error;
  EXPECT_FALSE(ParseHttpConfig(text, "http.toml", error).has_value()) << text;
  return error;
}

TEST(OperatorConfigTest, OperatorsAreScopedToListedTenantsOrAll) {
  std::string error;
  auto config = ParseHttpConfig(
      Config(Operator("ops-a", kOpsA, "[\"a\"]") + Operator("all", kOpsAll, "\"*\"")), "http.toml",
      error);
  ASSERT_TRUE(config) << error;
  auto a = config->AuthenticateOperator(kOpsA);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "ops-a");
  EXPECT_FALSE(a->scope.all_tenants);
  EXPECT_EQ(a->scope.tenants, std::set<std::string>{"a"});
  ASSERT_TRUE(config->AuthenticateOperator(kOpsAll));
  EXPECT_TRUE(config->AuthenticateOperator(kOpsAll)->scope.all_tenants);
  // The two kinds of tokens never stand in for each other.
  EXPECT_FALSE(config->AuthenticateOperator(kTenantA));
  EXPECT_FALSE(config->Authenticate(kOpsA));
  EXPECT_TRUE(config->Authenticate(kTenantA));
}

TEST(OperatorConfigTest, BadOperatorsAreRefusedWithTheLineAndTheProblem) {
  // Tenants take 6 lines: the first [[operator]] is on line 7.
  EXPECT_EQ(ParseError(Config(Operator("x", kTenantB, "\"*\""))),
            "http.toml:7: operator \"x\": a token_sha256 is also tenant \"b\"'s token "
            "(operator tokens must differ from every tenant's)");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "[\"c\"]"))),
            "http.toml:7: operator \"x\": tenants entry \"c\" is not a [[tenant]] of this file");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "\"all\""))),
            "http.toml:7: operator \"x\": tenants must be \"*\" or a list of tenant names, got "
            "\"all\"");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "[]"))),
            "http.toml:7: operator \"x\": tenants is empty (give tenant names, or \"*\" for all)");
  EXPECT_EQ(ParseError(Config("[[operator]]\nname = \"x\"\ntoken_sha256 = [\"" + Sha256Hex(kOpsA) +
                              "\"]\n")),
            "http.toml:7: operator \"x\": tenants (\"*\" or a list of tenant names) is required");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "\"*\"") + "policy = \"default\"\n")),
            "http.toml:7: operator \"x\": unknown key \"policy\" (expected name, token_sha256, "
            "tenants)");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "\"*\"") + Operator("x", kOpsAll, "\"*\""))),
            "http.toml:11: operator \"x\" is defined twice");
  EXPECT_EQ(ParseError(Config(Operator("x", kOpsA, "\"*\"") + Operator("y", kOpsA, "\"*\""))),
            "http.toml:11: operator \"y\": a token hash is listed twice");
  EXPECT_EQ(ParseError(Config("[[operator]]\ntoken_sha256 = []\n")),
            "http.toml:7: operator #1: name (a non-empty string) is required");
}

TEST(AuditQueryTest, ParsesEveryFilter) {
  auto r = ParseAuditQuery({{"tenant", "a"},
                            {"session", "s1"},
                            {"type", "exec."},
                            {"since", "2026-12-02"},
                            {"until", "2026-12-03T00:00:00Z"},
                            {"limit", "5"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->filter.tenant, "a");
  EXPECT_EQ(r->filter.session, "s1");
  EXPECT_EQ(r->filter.type, "exec.");
  EXPECT_EQ(*r->filter.until_ms - *r->filter.since_ms, 86400000);
  EXPECT_EQ(r->limit, 5u);
  auto defaults = ParseAuditQuery({});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->limit, kDefaultAuditLimit);
  EXPECT_FALSE(defaults->newest_first);
  EXPECT_TRUE(ParseAuditQuery({{"order", "desc"}})->newest_first);
  EXPECT_FALSE(ParseAuditQuery({{"order", "asc"}})->newest_first);
  EXPECT_FALSE(defaults->filter.since_ms);
}

TEST(AuditQueryTest, BadParametersAreNamed) {
  auto message = [](std::vector<std::pair<std::string, std::string>> params) {
    auto r = ParseAuditQuery(params);
    EXPECT_FALSE(r);
    return r ? std::string() : r.error().message;
  };
  EXPECT_EQ(message({{"since", "yesterday"}}).rfind("since: ", 0), 0u);
  EXPECT_EQ(message({{"until", "2026-13-01"}}).rfind("until: ", 0), 0u);
  EXPECT_EQ(message({{"limit", "0"}}), "limit: expected an integer from 1 to 100000, got \"0\"");
  EXPECT_EQ(message({{"limit", "-3"}}), "limit: expected an integer from 1 to 100000, got \"-3\"");
  EXPECT_EQ(message({{"limit", "100001"}}).rfind("limit: ", 0), 0u);
  EXPECT_EQ(message({{"tenant", "a"}, {"tenant", "b"}}), "tenant: given more than once");
  EXPECT_EQ(message({{"who", "x"}}),
            "unknown parameter \"who\" (expected tenant, session, type, since, until, limit, "
            "order)");
  EXPECT_EQ(message({{"order", "newest"}}),
            "order: expected asc (chain order) or desc (newest first), got \"newest\"");
}

class AdminRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "admin-api-XXXXXX";
    ASSERT_TRUE(mkdtemp(templ.data()));
    dir_ = templ;
    std::string error;
    auto config = ParseHttpConfig(
        Config(Operator("ops-a", kOpsA, "[\"a\"]") + Operator("all", kOpsAll, "\"*\"")),
        "http.toml", error);
    ASSERT_TRUE(config) << error;
    config_ = std::make_shared<HttpConfig>(*config);
    audit::TrailOptions options;
    options.dir = dir_;
    auto trail = audit::Trail::Open(options);
    ASSERT_TRUE(trail) << trail.error().message;
    trail_ = std::move(*trail);
    ASSERT_TRUE(trail_->Append("session.start", "a", "sa", "ca"));
    ASSERT_TRUE(trail_->Append("exec.start", "a", "sa", "ca"));
    ASSERT_TRUE(trail_->Append("session.start", "b", "sb", "cb"));
    route_ = AdminRoute(config_, dir_);
  }
  void TearDown() override {
    trail_.reset();
    std::filesystem::remove_all(dir_);
  }
  mcp::HttpRouteResponse Get(const std::string& token,
                             std::vector<std::pair<std::string, std::string>> params = {},
                             const std::string& path = "/admin/audit") {
    return route_.handler({"GET", path, std::move(params), token, "127.0.0.1:5000"});
  }
  static std::vector<json> Lines(const std::string& body) {
    std::vector<json> out;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  std::string dir_;
  std::shared_ptr<HttpConfig> config_;
  std::unique_ptr<audit::Trail> trail_;
  mcp::HttpRoute route_;
};

TEST_F(AdminRouteTest, AScopedOperatorSeesOnlyItsTenantsRecords) {
  auto res = Get(kOpsA);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(res.content_type, "application/jsonl");
  auto lines = Lines(res.body);
  ASSERT_EQ(lines.size(), 2u);
  for (const json& r : lines) EXPECT_EQ(r["tenant"], "a");
  EXPECT_EQ(lines[1]["type"], "exec.start");
}

TEST_F(AdminRouteTest, AnAllTenantsOperatorSeesEverythingAndFiltersApply) {
  EXPECT_EQ(Lines(Get(kOpsAll).body).size(), 3u);
  auto b = Lines(Get(kOpsAll, {{"tenant", "b"}}).body);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]["session"], "sb");
  EXPECT_EQ(Lines(Get(kOpsAll, {{"type", "session."}}).body).size(), 2u);
  auto limited = Get(kOpsAll, {{"limit", "1"}});
  EXPECT_EQ(Lines(limited.body).size(), 1u);
  ASSERT_EQ(limited.headers.size(), 1u);
  EXPECT_EQ(limited.headers[0].first, "X-Audit-Truncated");
}

TEST_F(AdminRouteTest, OrderDescGivesTheNewestMatchingRecordsFirst) {
  ASSERT_TRUE(trail_->Append("exec.start", "a", "sa", "ca", {{"n", 2}}));
  auto newest = Get(kOpsA, {{"order", "desc"}, {"limit", "2"}});
  ASSERT_EQ(newest.status, 200) << newest.body;
  auto lines = Lines(newest.body);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["n"], 2);  // the record appended last
  EXPECT_EQ(lines[1]["type"], "exec.start");
  EXPECT_GT(lines[0]["seq"].get<uint64_t>(), lines[1]["seq"].get<uint64_t>());
  ASSERT_EQ(newest.headers.size(), 1u);  // session.start of sa is left out
  EXPECT_EQ(newest.headers[0].first, "X-Audit-Truncated");
  auto all = Lines(Get(kOpsA, {{"order", "desc"}}).body);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2]["type"], "session.start");  // the oldest last; b's records not there
  auto asc = Lines(Get(kOpsA, {{"order", "asc"}, {"limit", "1"}}).body);
  ASSERT_EQ(asc.size(), 1u);
  EXPECT_EQ(asc[0]["type"], "session.start");
}

TEST_F(AdminRouteTest, TokensAnotherTenantAndBadFiltersAreRefused) {
  auto none = Get("");
  EXPECT_EQ(none.status, 401);
  EXPECT_FALSE(none.refusal_reason.empty());
  EXPECT_EQ(Get(kTenantA).status, 401);  // a tenant's token is not an operator's
  EXPECT_EQ(Get(kTenantA, {}, "/admin/other").status, 401);
  EXPECT_EQ(Get(kOpsA, {}, "/admin/other").status, 404);
  auto other = Get(kOpsA, {{"tenant", "b"}});
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.body.find("may not read tenant \\\"b\\\""), std::string::npos) << other.body;
  auto bad = Get(kOpsA, {{"since", "soon"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("since: "), std::string::npos) << bad.body;
  auto post = route_.handler({"POST", "/admin/audit", {}, kOpsA, "127.0.0.1:5000"});
  EXPECT_EQ(post.status, 405);
}

TEST_F(AdminRouteTest, RefusalsBecomeAuthRefusedRecordsForAllTenantOperatorsOnly) {
  AuditRefusals(trail_.get())({"10.0.0.7:4242", 401, "POST", "/mcp", "invalid bearer token"});
  auto refused = Lines(Get(kOpsAll, {{"type", "auth.refused"}}).body);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0]["peer"], "10.0.0.7:4242");
  EXPECT_EQ(refused[0]["status"], 401);
  EXPECT_EQ(refused[0]["path"], "/mcp");
  EXPECT_EQ(refused[0]["reason"], "invalid bearer token");
  EXPECT_TRUE(Lines(Get(kOpsA, {{"type", "auth.refused"}}).body).empty());
}

}  // namespace
}  // namespace mcpcell::serve
