// SandboxHandles: handles are 128 random bits in sbx_ text (with the server id when there is
// one); a lookup is authorized against the tenant (another's, unknown and malformed handles
// are the same "not found"); idle time and the maximum lifetime end handles (never while a
// call runs), close ends them, an ended handle says to call sandbox_create; each tenant has
// a cap of live handles; every end is reported once.
#include "serve/sandbox_handles.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace mcpcell::serve {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

struct Ended {
  std::string key, tenant, why;
};

// Handles for tenants "a" (idle 10 min, lifetime 60 min, 2 live at most) and "b", on a clock
// the test moves, recording every end.
class SandboxHandlesTest : public ::testing::Test {
 protected:
  SandboxHandles Make(std::string server_id = "") {
    SandboxHandlesOptions o;
    o.server_id = std::move(server_id);
    o.tenants["a"] = {.idle = minutes(10), .max_lifetime = minutes(60), .max_live = 2};
    o.tenants["b"] = {.idle = minutes(10), .max_lifetime = minutes(60), .max_live = 0};
    o.now = [this] { return now_; };
    return SandboxHandles(std::move(o));
  }
  void Listen(SandboxHandles& h) {
    h.SetEndListener(
        [this](const std::string& key, const std::string& tenant, const std::string& why) {
          ended_.push_back({key, tenant, why});
        });
  }
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::now();
  std::vector<Ended> ended_;
};

TEST_F(SandboxHandlesTest, MintsDistinctRandomHandlesThatResolveToTheirOwnKeys) {
  SandboxHandles h = Make();
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    auto m = h.Mint("b");
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(m->handle.rfind("sbx_", 0), 0u) << m->handle;
    EXPECT_EQ(m->handle.size(), 4u + 32u) << m->handle;
    EXPECT_EQ(m->handle.find(m->key), std::string::npos) << "the key must not reveal the handle";
    EXPECT_TRUE(seen.insert(m->handle).second);
    auto key = h.Resolve(m->handle, "b");
    ASSERT_TRUE(key) << key.error().message;
    EXPECT_EQ(*key, m->key);
    EXPECT_TRUE(h.OwnsKey(m->key));
  }
  EXPECT_EQ(h.Live("b"), 20u);
}

TEST_F(SandboxHandlesTest, AnotherTenantsUnknownAndMalformedHandlesAreTheSameNotFound) {
  SandboxHandles h = Make();
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  auto other_tenant = h.Resolve(m->handle, "b");
  ASSERT_FALSE(other_tenant);
  std::string unknown = m->handle;
  unknown.back() = unknown.back() == '0' ? '1' : '0';
  for (const std::string& bad :
       {unknown, std::string("sbx_xyz"), std::string("hello"), std::string(""),
        m->handle.substr(0, m->handle.size() - 1), "sbx_" + std::string(32, 'G')}) {
    auto r = h.Resolve(bad, "a");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message, other_tenant.error().message) << bad;
  }
  EXPECT_NE(other_tenant.error().message.find("arguments.sandbox"), std::string::npos);
  EXPECT_NE(other_tenant.error().message.find("no such sandbox"), std::string::npos);
  // Nor may the other tenant close it.
  EXPECT_FALSE(h.Close(m->handle, "b"));
  EXPECT_TRUE(h.Resolve(m->handle, "a"));
}

TEST_F(SandboxHandlesTest, AHandleCarriesTheServerIdAndAnotherServersIsNamed) {
  SandboxHandles h = Make("mcpcell-0");
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->handle.rfind("sbx_mcpcell-0_", 0), 0u) << m->handle;
  EXPECT_TRUE(h.Resolve(m->handle, "a"));
  const std::string foreign = "sbx_mcpcell-3_" + m->handle.substr(m->handle.size() - 32);
  auto r = h.Resolve(foreign, "a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("belongs to server mcpcell-3"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("server mcpcell-0"), std::string::npos) << r.error().message;
}

TEST_F(SandboxHandlesTest, ServerIdsThatCannotBePartOfAHandleAreRefused) {
  EXPECT_TRUE(SandboxHandles::CheckServerId("mcpcell-0"));
  EXPECT_TRUE(SandboxHandles::CheckServerId("pod.a-1"));
  EXPECT_FALSE(SandboxHandles::CheckServerId(""));
  EXPECT_FALSE(SandboxHandles::CheckServerId("a_b"));
  EXPECT_FALSE(SandboxHandles::CheckServerId("a/b"));
  EXPECT_FALSE(SandboxHandles::CheckServerId(std::string(64, 'a')));
}

TEST_F(SandboxHandlesTest, CloseEndsTheHandleOnceAndItsUseSaysToCreateANewOne) {
  SandboxHandles h = Make();
  Listen(h);
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  auto closed = h.Close(m->handle, "a");
  ASSERT_TRUE(closed);
  EXPECT_EQ(*closed, m->key);
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(ended_[0].key, m->key);
  EXPECT_EQ(ended_[0].tenant, "a");
  auto r = h.Resolve(m->handle, "a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("has ended"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("sandbox_create"), std::string::npos) << r.error().message;
  // To another tenant an ended handle is as unknown as ever.
  auto other = h.Resolve(m->handle, "b");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("no such sandbox"), std::string::npos);
  EXPECT_FALSE(h.Close(m->handle, "a"));
  EXPECT_EQ(ended_.size(), 1u);
  EXPECT_EQ(h.Live("a"), 0u);
}

TEST_F(SandboxHandlesTest, IdleTimeEndsAHandleButNeverWhileACallRuns) {
  SandboxHandles h = Make();
  Listen(h);
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  auto key = h.Resolve(m->handle, "a");  // a call starts and runs 30 minutes
  ASSERT_TRUE(key);
  now_ += minutes(30);
  EXPECT_EQ(h.Live("a"), 1u);
  EXPECT_TRUE(ended_.empty());
  h.CallDone(*key);
  now_ += minutes(9);
  EXPECT_EQ(h.Live("a"), 1u);
  now_ += minutes(1);
  EXPECT_EQ(h.Live("a"), 0u);
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_NE(ended_[0].why.find("idle"), std::string::npos) << ended_[0].why;
  auto r = h.Resolve(m->handle, "a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("idle"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("sandbox_create"), std::string::npos) << r.error().message;
}

TEST_F(SandboxHandlesTest, TheMaximumLifetimeEndsABusyHandle) {
  SandboxHandles h = Make();
  Listen(h);
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  for (int i = 0; i < 7; ++i) {  // used every 9 minutes: never idle
    auto key = h.Resolve(m->handle, "a");
    ASSERT_TRUE(key) << i;
    h.CallDone(*key);
    now_ += minutes(9);
  }
  auto r = h.Resolve(m->handle, "a");  // 63 minutes after it was made
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("maximum lifetime"), std::string::npos) << r.error().message;
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_EQ(ended_[0].key, m->key);
}

TEST_F(SandboxHandlesTest, TheCellManagersEndOfTheKeyEndsTheHandle) {
  SandboxHandles h = Make();
  Listen(h);
  auto m = h.Mint("a");
  ASSERT_TRUE(m);
  EXPECT_FALSE(h.Ended("some-mcp-session-id", "idle for 600 s"));
  EXPECT_TRUE(h.Ended(m->key, "idle for 600 s"));
  EXPECT_FALSE(h.Ended(m->key, "idle for 600 s"));  // once
  ASSERT_EQ(ended_.size(), 1u);
  EXPECT_TRUE(h.OwnsKey(m->key));  // still known as a handle's key (no hibernation)
  auto r = h.Resolve(m->handle, "a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("idle for 600 s"), std::string::npos) << r.error().message;
}

TEST_F(SandboxHandlesTest, ATenantAtItsCapGetsAClearErrorUntilOneEnds) {
  SandboxHandles h = Make();
  auto first = h.Mint("a");
  ASSERT_TRUE(first);
  ASSERT_TRUE(h.Mint("a"));
  auto third = h.Mint("a");
  ASSERT_FALSE(third);
  EXPECT_NE(third.error().message.find("2 live sandboxes"), std::string::npos)
      << third.error().message;
  EXPECT_NE(third.error().message.find("sandbox_close"), std::string::npos);
  EXPECT_TRUE(h.Mint("b"));  // another tenant's cap is its own
  ASSERT_TRUE(h.Close(first->handle, "a"));
  EXPECT_TRUE(h.Mint("a"));
}

TEST_F(SandboxHandlesTest, ATenantWithoutAPolicyGetsNoHandle) {
  SandboxHandles h = Make();
  auto m = h.Mint("nobody");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("tenant \"nobody\""), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::serve
