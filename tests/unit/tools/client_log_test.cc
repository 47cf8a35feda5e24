// SessionLogRouter: warnings reach the session by id, with its secret values redacted.
#include "tools/client_log.h"

#include <gtest/gtest.h>

#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/test_client.h"

namespace mcpcell::tools {
namespace {

mcp::ServerOptions Options() {
  mcp::ServerOptions o;
  o.name = "client-log-test";
  o.version = "1";
  return o;
}

TEST(SessionLogRouter, RedactsTheSessionsSecretValuesFromWarnings) {
  mcp::Server server(Options());
  mcp::MemoryClient client(server);
  client.Initialize();
  SessionLogRouter router;
  router.Attach(&server);
  SessionLogRouter::DetachGuard detach{router};
  std::string asked;
  router.SetSecretValues([&asked](const std::string& key) {
    asked = key;
    return SecretValues{{"DB_PASSWORD", "hunter2-long"}};
  });
  const std::string id = client.session()->id();
  router.Warn(id, kEventEgressRefused, "refused: body held hunter2-long and aHVudGVyMi1sb25n");
  auto logs = client.Notifications("notifications/message", 1);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["params"]["data"]["message"],
            "refused: body held [secret DB_PASSWORD] and [secret DB_PASSWORD]");
  EXPECT_EQ(asked, id);
}

TEST(SessionLogRouter, WithoutSecretValuesTheMessageIsUnchanged) {
  mcp::Server server(Options());
  mcp::MemoryClient client(server);
  client.Initialize();
  SessionLogRouter router;
  router.Attach(&server);
  SessionLogRouter::DetachGuard detach{router};
  router.Warn(client.session()->id(), kEventPackageRefused, "hunter2-long refused");
  auto logs = client.Notifications("notifications/message", 1);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0]["params"]["data"]["message"], "hunter2-long refused");
}

}  // namespace
}  // namespace mcpcell::tools
