// The operator page's API (/admin/api/...) over a fake AdminView and a real trail in a temp
// dir: every answer is scoped to the operator's tenants, bad parameters are named, actions on
// unknown and other tenants' sessions are 404s that reach no session, and the page is served
// without a token under a CSP that allows only 'self'.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "audit/trail.h"
#include "serve/admin_api.h"
#include "serve/admin_page.h"

namespace mcpcell::serve {
namespace {

using nlohmann::json;

const std::string kTenantA = "token-a", kTenantB = "token-b";
const std::string kOpsA = "ops-a", kOpsAll = "ops-all";

class FakeView : public AdminView {
 public:
  std::vector<AdminSession> Sessions() const override {
    return {{"a", "sa", 12.5, "running", "default", json{{"cpu_s", 0.25}}, "", ""},
            {"b", "sb", 3, "held", "strict", json::object(), "ops-b", "2026-12-02T15:04:05Z"},
            {"", "s0", 1, "new", "server", json::object(), "", ""}};
  }
  std::vector<AdminPool> Pools() const override {
    return {{"", 1, 1, 0, ""}, {"a", 1, 0, 0, "cannot make cells: no memory"}, {"b", 1, 1, 0, ""}};
  }
  AdminActionResult Act(AdminAction action, const std::string& id,
                        const std::string& operator_name) override {
    acted.push_back(std::string(AdminActionName(action)) + " " + id + " by " + operator_name);
    if (id == "sb" && action == AdminAction::kResume) return {409, "session sb is not paused"};
    return {200, "done"};
  }
  std::vector<std::string> acted;
};

class AdminApiLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "admin-live-XXXXXX";
    ASSERT_TRUE(mkdtemp(templ.data()));
    dir_ = templ;
    std::string error;
    std::string text =
        "[[tenant]]\nname = \"a\"\ntoken_sha256 = [\"" + Sha256Hex(kTenantA) +
        "\"]\n[[tenant]]\nname = \"b\"\ntoken_sha256 = [\"" + Sha256Hex(kTenantB) +
        "\"]\n[[operator]]\nname = \"ops-a\"\ntoken_sha256 = [\"" + Sha256Hex(kOpsA) +
        "\"]\ntenants = [\"a\"]\n[[operator]]\nname = " + "\"all\"\ntoken_sha256 = [\"" +
        Sha256Hex(kOpsAll) + "\"]\ntenants = \"*\"\n";
    auto config = ParseHttpConfig(text, "http.toml", error);
    ASSERT_TRUE(config) << error;
    audit::TrailOptions options;
    options.dir = dir_;
    auto trail = audit::Trail::Open(options);
    ASSERT_TRUE(trail) << trail.error().message;
    trail_ = std::move(*trail);
    json deny = {{"decision", "deny"},
                 {"host", "evil.example"},
                 {"port", 443},
                 {"reason", "not in network.allow"}};
    json allow = {{"decision", "allow"}, {"host", "pypi.org"}, {"port", 443}};
    ASSERT_TRUE(trail_->Append("egress.connection", "a", "sa", "", deny));
    ASSERT_TRUE(trail_->Append("egress.connection", "a", "sa", "", allow));
    ASSERT_TRUE(trail_->Append("egress.connection", "b", "sb", "", deny));
    view_ = std::make_shared<FakeView>();
    route_ = AdminRoute(std::make_shared<HttpConfig>(*config), dir_, view_);
  }
  void TearDown() override {
    trail_.reset();
    std::filesystem::remove_all(dir_);
  }
  mcp::HttpRouteResponse Call(const std::string& method, const std::string& path,
                              const std::string& token,
                              std::vector<std::pair<std::string, std::string>> params = {}) {
    return route_.handler({method, path, std::move(params), token, "127.0.0.1:5000"});
  }
  json Get(const std::string& path, const std::string& token,
           std::vector<std::pair<std::string, std::string>> params = {}) {
    auto res = Call("GET", path, token, std::move(params));
    EXPECT_EQ(res.status, 200) << path << ": " << res.body;
    return json::parse(res.body);
  }
  static std::vector<std::string> Ids(const json& rows, const char* key) {
    std::vector<std::string> out;
    for (const json& row : rows) out.push_back(row[key].get<std::string>());
    return out;
  }

  std::string dir_;
  std::unique_ptr<audit::Trail> trail_;
  std::shared_ptr<FakeView> view_;
  mcp::HttpRoute route_;
};

TEST_F(AdminApiLiveTest, SessionsAreThoseOfTheOperatorsTenantsWithTheirFigures) {
  json a = Get("/admin/api/sessions", kOpsA)["sessions"];
  EXPECT_EQ(Ids(a, "id"), std::vector<std::string>{"sa"});
  EXPECT_EQ(a[0]["tenant"], "a");
  EXPECT_EQ(a[0]["state"], "running");
  EXPECT_EQ(a[0]["policy"], "default");
  EXPECT_EQ(a[0]["age_s"], 12.5);
  EXPECT_EQ(a[0]["usage"]["cpu_s"], 0.25);
  EXPECT_FALSE(a[0].contains("held_by"));  // only a held session names its operator
  json b = Get("/admin/api/sessions", kOpsAll, {{"tenant", "b"}})["sessions"];
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]["state"], "held");
  EXPECT_EQ(b[0]["held_by"], "ops-b");
  EXPECT_EQ(b[0]["held_since"], "2026-12-02T15:04:05Z");
  EXPECT_EQ(Ids(Get("/admin/api/sessions", kOpsAll)["sessions"], "id"),
            (std::vector<std::string>{"sa", "sb", "s0"}));
  EXPECT_EQ(Ids(Get("/admin/api/sessions", kOpsAll, {{"tenant", "b"}})["sessions"], "id"),
            std::vector<std::string>{"sb"});
  auto other = Call("GET", "/admin/api/sessions", kOpsA, {{"tenant", "b"}});
  EXPECT_EQ(other.status, 403);
  EXPECT_FALSE(other.refusal_reason.empty());
}

TEST_F(AdminApiLiveTest, PoolsAndEgressRefusalsAreScopedToo) {
  json pools = Get("/admin/api/pool", kOpsA)["pools"];
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0]["tenant"], "a");
  EXPECT_EQ(pools[0]["status"], "cannot make cells: no memory");
  EXPECT_EQ(Get("/admin/api/pool", kOpsAll)["pools"].size(), 3u);

  json mine = Get("/admin/api/egress", kOpsA)["refusals"];
  ASSERT_EQ(mine.size(), 1u);  // the allowed connection is not a refusal; b's is not a's
  EXPECT_EQ(mine[0]["host"], "evil.example");
  EXPECT_EQ(mine[0]["session"], "sa");
  EXPECT_EQ(mine[0]["reason"], "not in network.allow");
  json all = Get("/admin/api/egress", kOpsAll)["refusals"];
  EXPECT_EQ(Ids(all, "session"), (std::vector<std::string>{"sa", "sb"}));
  json last = Get("/admin/api/egress", kOpsAll, {{"limit", "1"}})["refusals"];
  EXPECT_EQ(Ids(last, "session"), std::vector<std::string>{"sb"});  // the newest
}

TEST_F(AdminApiLiveTest, BadParametersPathsAndMethodsAreNamed) {
  auto unknown = Call("GET", "/admin/api/sessions", kOpsAll, {{"state", "paused"}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("unknown parameter \\\"state\\\" (expected tenant)"),
            std::string::npos)
      << unknown.body;
  auto twice = Call("GET", "/admin/api/egress", kOpsAll, {{"limit", "1"}, {"limit", "2"}});
  EXPECT_EQ(twice.status, 400);
  EXPECT_NE(twice.body.find("limit: given more than once"), std::string::npos) << twice.body;
  auto limit = Call("GET", "/admin/api/egress", kOpsAll, {{"limit", "0"}});
  EXPECT_EQ(limit.status, 400);
  EXPECT_NE(limit.body.find("limit: expected an integer from 1 to 1000, got \\\"0\\\""),
            std::string::npos)
      << limit.body;
  EXPECT_EQ(Call("GET", "/admin/api/pool", kOpsAll, {{"tenant", "a"}}).status, 400);
  EXPECT_EQ(Call("GET", "/admin/api/nothing", kOpsAll).status, 404);
  EXPECT_EQ(Call("POST", "/admin/api/sessions", kOpsAll).status, 405);
  EXPECT_EQ(Call("POST", "/admin/api/sessions/sa/explode", kOpsAll).status, 404);
  EXPECT_EQ(Call("POST", "/admin/api/sessions/sa/end", kOpsAll, {{"now", "1"}}).status, 400);
  EXPECT_TRUE(view_->acted.empty());
}

TEST_F(AdminApiLiveTest, ActionsReachOnlySessionsInScopeAndNameTheOperator) {
  auto end = Call("POST", "/admin/api/sessions/sa/end", kOpsA);
  ASSERT_EQ(end.status, 200) << end.body;
  EXPECT_EQ(json::parse(end.body)["action"], "end");
  // Another tenant's session is answered exactly like a session that does not exist.
  auto foreign = Call("POST", "/admin/api/sessions/sb/pause", kOpsA);
  auto missing = Call("POST", "/admin/api/sessions/nope/pause", kOpsA);
  EXPECT_EQ(foreign.status, 404);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(foreign.body)["error"], "Not Found: no live session \"sb\"");
  EXPECT_EQ(Call("POST", "/admin/api/sessions/s0/end", kOpsA).status, 404);  // no tenant
  EXPECT_EQ(Call("POST", "/admin/api/sessions/sa/end", kTenantA).status, 401);
  EXPECT_EQ(view_->acted, std::vector<std::string>{"end sa by ops-a"});
  auto conflict = Call("POST", "/admin/api/sessions/sb/resume", kOpsAll);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(json::parse(conflict.body)["error"], "Conflict: session sb is not paused");
}

TEST_F(AdminApiLiveTest, ThePageNeedsNoTokenAndAllowsOnlySelf) {
  for (const std::string path :
       {"/admin/", "/admin/index.html", "/admin/admin.js", "/admin/admin.css"}) {
    auto page = Call("GET", path, "");
    ASSERT_EQ(page.status, 200) << path;
    EXPECT_FALSE(page.body.empty()) << path;
    bool csp = false;
    for (const auto& [name, value] : page.headers) {
      if (name == "Content-Security-Policy") csp = value == kAdminPageCsp;
    }
    EXPECT_TRUE(csp) << path;
  }
  EXPECT_EQ(Call("GET", "/admin/", "").content_type, "text/html; charset=utf-8");
  EXPECT_EQ(Call("GET", "/admin/admin.js", "").content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(Call("GET", "/admin/", "").body.find("<script src=\"admin.js\""), std::string::npos);
  auto bare = Call("GET", "/admin", "");
  EXPECT_EQ(bare.status, 308);
  EXPECT_EQ(Call("POST", "/admin/", "").status, 405);
  // The data is not: without a token every API path is a 401.
  EXPECT_EQ(Call("GET", "/admin/api/sessions", "").status, 401);
  EXPECT_EQ(Call("GET", "/admin/api/whoami", kTenantB).status, 401);
  json me = Get("/admin/api/whoami", kOpsA);
  EXPECT_EQ(me["operator"], "ops-a");
  EXPECT_EQ(me["tenants"], json::array({"a"}));
}

TEST_F(AdminApiLiveTest, WithoutAViewTheLiveEndpointsSaySo) {
  std::string error;
  auto config =
      ParseHttpConfig("[[tenant]]\nname = \"a\"\ntoken_sha256 = [\"" + Sha256Hex(kTenantA) +
                          "\"]\n[[operator]]\nname = \"x\"\n" + "token_sha256 = [\"" +
                          Sha256Hex(kOpsAll) + "\"]\ntenants = \"*\"\n",
                      "http.toml", error);
  ASSERT_TRUE(config) << error;
  auto route = AdminRoute(std::make_shared<HttpConfig>(*config), dir_);
  auto res = route.handler({"GET", "/admin/api/sessions", {}, kOpsAll, "127.0.0.1:5000"});
  EXPECT_EQ(res.status, 503);
  EXPECT_NE(res.body.find("no sessions to show"), std::string::npos) << res.body;
}

}  // namespace
}  // namespace mcpcell::serve
