// subscriptions/listen (2026-07-28) through the in-memory transport: the acknowledgement
// first, then only the notifications the filter asked for, each tagged with the
// subscription id; a malformed filter is refused naming the field; today's era has no such
// method; a cancelled subscription hears nothing more.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "mcp/session.h"
#include "test_util.h"

namespace mcp {
namespace {

using std::chrono::milliseconds;
using testing::ErrorCode;
using testing::ErrorMessage;

constexpr const char* kSubscriptionId = "io.modelcontextprotocol/subscriptionId";

Json Meta() {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", Json::object()}};
}

Json ListenParams(Json filter) { return {{"_meta", Meta()}, {"notifications", std::move(filter)}}; }

class ListenTest : public ::testing::Test {
 protected:
  ListenTest() : server_(testing::TestOptions()) {
    EXPECT_TRUE(server_.AddTool(testing::EchoTool()));
    Resource r;
    r.uri = "file:///watched";
    r.name = "watched";
    r.read = [](const std::string& uri, const std::map<std::string, std::string>&, Context&) {
      return std::vector<ResourceContents>{{uri, "text/plain", std::string("x"), std::nullopt}};
    };
    EXPECT_TRUE(server_.AddResource(r));
  }

  void AddPrompt(const std::string& name) {
    Prompt p;
    p.name = name;
    p.handler = [](const std::map<std::string, std::string>&, Context&) {
      return PromptResult::UserText("hi");
    };
    ASSERT_TRUE(server_.AddPrompt(p));
  }

  Server server_;
};

TEST_F(ListenTest, TheAcknowledgementComesFirstThenOnlyWhatTheFilterAskedFor) {
  MemoryClient client(server_);
  client.SendRequest("sub-1", "subscriptions/listen",
                     ListenParams({{"toolsListChanged", true},
                                   {"resourceSubscriptions", {"file:///watched"}},
                                   {"someFutureKind", true}}));
  auto acks = client.Notifications("notifications/subscriptions/acknowledged", 1);
  ASSERT_EQ(acks.size(), 1u);
  const Json& ack = acks[0]["params"];
  EXPECT_EQ(ack["_meta"][kSubscriptionId], "sub-1");
  EXPECT_EQ(ack["notifications"],
            Json({{"toolsListChanged", true}, {"resourceSubscriptions", {"file:///watched"}}}))
      << "unknown kinds are left out of what the server honors";
  EXPECT_EQ(client.Received().front()["method"], "notifications/subscriptions/acknowledged");

  AddPrompt("not_asked_for");
  server_.NotifyResourceUpdated("file:///other");
  Tool t = testing::EchoTool();
  t.name = "echo2";
  ASSERT_TRUE(server_.AddTool(t));
  server_.NotifyResourceUpdated("file:///watched");

  auto tools = client.Notifications("notifications/tools/list_changed", 1);
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["params"]["_meta"][kSubscriptionId], "sub-1");
  auto updated = client.Notifications("notifications/resources/updated", 1);
  ASSERT_EQ(updated.size(), 1u);
  EXPECT_EQ(updated[0]["params"]["uri"], "file:///watched");
  EXPECT_EQ(updated[0]["params"]["_meta"][kSubscriptionId], "sub-1");
  EXPECT_TRUE(client.Notifications("notifications/prompts/list_changed", 0).empty());
}

TEST_F(ListenTest, AMalformedFilterIsRefusedNamingTheField) {
  MemoryClient client(server_);
  Json r = client.Request("subscriptions/listen", ListenParams({{"toolsListChanged", "yes"}}));
  EXPECT_EQ(ErrorCode(r), kInvalidParams) << r.dump();
  EXPECT_NE(ErrorMessage(r).find("notifications.toolsListChanged must be a boolean"),
            std::string::npos);
  r = client.Request("subscriptions/listen", {{"_meta", Meta()}});
  EXPECT_EQ(ErrorCode(r), kInvalidParams);
  EXPECT_NE(ErrorMessage(r).find("\"notifications\""), std::string::npos);
}

TEST_F(ListenTest, TodaysEraHasNoListen) {
  MemoryClient client(server_);
  client.Initialize("2025-11-25");
  Json r =
      client.Request("subscriptions/listen", {{"notifications", {{"toolsListChanged", true}}}});
  EXPECT_EQ(ErrorCode(r), kMethodNotFound) << r.dump();
}

TEST_F(ListenTest, ACancelledSubscriptionHearsNothingMore) {
  MemoryClient client(server_);
  client.SendRequest(7, "subscriptions/listen", ListenParams({{"promptsListChanged", true}}));
  ASSERT_EQ(client.Notifications("notifications/subscriptions/acknowledged", 1).size(), 1u);
  client.Notify("notifications/cancelled", {{"requestId", 7}});
  // The cancellation is handled in order on the reader thread; a request after it is
  // answered only once it has been.
  ASSERT_EQ(ErrorCode(client.Request("tools/list", {{"_meta", Meta()}})), 0);
  AddPrompt("after_cancel");
  ASSERT_EQ(ErrorCode(client.Request("tools/list", {{"_meta", Meta()}})), 0);
  EXPECT_TRUE(client.Notifications("notifications/prompts/list_changed", 0).empty());
  EXPECT_TRUE(client.WaitResponse(7, milliseconds(50)).is_null())
      << "a cancelled request gets no response";
}

}  // namespace
}  // namespace mcp
