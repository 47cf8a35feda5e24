// The server side of egress in real cells, as root and unprivileged: EgressRegistry binds
// a cell's proxy listener to the EgressProxy with its profile's allowlist, a program in the
// cell gets the proxy's answers (curl through the proxy variables), refusals are kept for
// the tool result, counters read back, and Unbind closes the cell's proxy. No upstream is
// needed: everything asserted is a refusal or a counter.
#include "serve/egress_registry.h"

#include <gtest/gtest.h>

#include <string>

#include "egress/allowlist.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::serve {
namespace {

using sandbox::Cell;
using sandbox::CellSpec;
using sandbox::celltest::ProbeSpec;
using sandbox::celltest::RunInCell;
using sandbox::celltest::TempStateDir;
using sandbox::celltest::TestCreateOptions;

egress::CellEgress Allowing(const std::vector<std::string>& entries) {
  egress::CellEgress cell;
  cell.allowlist = egress::Allowlist::Parse(entries).value();
  cell.max_connections = 4;
  return cell;
}

egress::EgressProxyOptions TestProxyOptions() {
  egress::EgressProxyOptions options;
  options.host_addresses = std::vector<egress::IpAddress>{};
  // Names resolve only here: nothing leaves the host.
  options.hosts = egress::ParseHostsFile("169.254.169.254 meta.test\n", "test").value();
  options.resolver = [](const std::string&, egress::ResolveDone done) {
    done(Error::Msg("no DNS in this test"));
  };
  return options;
}

class EgressRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    CellSpec spec = ProbeSpec(state_);
    spec.egress_proxy_port = 3128;
    auto cell = Cell::Create(spec, TestCreateOptions());
    ASSERT_TRUE(cell.ok()) << cell.error().message;
    cell_ = std::move(*cell);
  }
  void TearDown() override {
    if (cell_) {
      EXPECT_TRUE(cell_->Destroy().ok());
    }
  }
  // curl through the proxy; prints the body of the answer.
  sandbox::celltest::ProbeRun Curl(const std::string& url) {
    return RunInCell(*cell_, {"/usr/bin/curl", "-sS", "--max-time", "10", "--proxy",
                              "http://127.0.0.1:3128", url});
  }

  TempStateDir state_;
  std::unique_ptr<Cell> cell_;
};

TEST_F(EgressRegistryTest, BoundCellGetsItsProfilesAnswersAndRefusalsAreKept) {
  EgressRegistry registry(TestProxyOptions());
  registry.SetProfile("", Allowing({"meta.test"}));
  ASSERT_TRUE(registry.Bind(*cell_, "session-1", "").ok());
  uint64_t cursor = registry.RefusalCursor(cell_->id());

  auto denied = Curl("http://denied.test/");
  ASSERT_TRUE(denied.ok) << denied.error;
  EXPECT_EQ(denied.out, "mcpcell: egress to denied.test:80 denied: not in the policy's allowlist\n")
      << denied.err;
  auto meta = Curl("http://meta.test/latest/");
  EXPECT_EQ(meta.out,
            "mcpcell: egress to meta.test:80 denied: resolves to 169.254.169.254 (link-local)\n");

  std::vector<std::string> refusals = registry.RefusalsSince(cell_->id(), cursor);
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0], "mcpcell: egress to denied.test:80 denied: not in the policy's allowlist");
  EXPECT_TRUE(registry.RefusalsSince(cell_->id(), registry.RefusalCursor(cell_->id())).empty());

  auto info = registry.Report(cell_->id());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->connections_refused, 2u);
  EXPECT_EQ(info->connections_active, 0u);
  EXPECT_EQ(info->allowlist, std::vector<std::string>{"meta.test"});

  // Unbound: the proxy closed the cell's listener, nothing answers on 3128 any more.
  registry.Unbind(*cell_);
  EXPECT_FALSE(registry.Report(cell_->id()).has_value());
  auto gone = Curl("http://denied.test/");
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_NE(gone.err.find("Failed to connect"), std::string::npos) << gone.err;
}

TEST_F(EgressRegistryTest, BindFailsWithoutSettingsOrListener) {
  EgressRegistry registry(TestProxyOptions());
  auto unknown = registry.Bind(*cell_, "s", "tenant-x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("no proxy settings for cell profile \"tenant-x\""),
            std::string::npos);
  registry.SetProfile("tenant-x", Allowing({"a.test"}));
  ASSERT_TRUE(registry.Bind(*cell_, "s", "tenant-x").ok());
  ASSERT_TRUE(registry.Bind(*cell_, "s", "tenant-x").ok()) << "a second bind is a no-op";

  // A cell made without the listener cannot be bound: it would be used without its proxy.
  auto plain = Cell::Create(ProbeSpec(state_), TestCreateOptions());
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  auto no_listener = registry.Bind(**plain, "s2", "tenant-x");
  ASSERT_FALSE(no_listener.ok());
  EXPECT_NE(no_listener.error().message.find("has no proxy listener"), std::string::npos);
  EXPECT_TRUE((*plain)->Destroy().ok());
}

}  // namespace
}  // namespace mcpcell::serve
