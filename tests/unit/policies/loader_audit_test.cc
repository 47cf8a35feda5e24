// The [audit] table: defaults, every key read, strict errors with file:line, and a
// tenant's policy limited to `commands`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "policies/loader.h"

namespace mcpcell::policies {
namespace {

std::string ErrorOf(const std::string& text, bool tenant = false) {
  LoadOptions options;
  options.tenant = tenant;
  auto p = ParsePolicy(text, "p.toml", options);
  return p ? "(loaded)" : p.error().message;
}

TEST(LoaderAudit, DefaultsWhenAbsent) {
  auto p = ParsePolicy("", "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->audit.enabled);
  EXPECT_EQ(p->audit.commands, AuditCommands::kHash);
  EXPECT_EQ(p->audit.retention, std::chrono::hours(24 * 90));
  EXPECT_EQ(p->audit.usage_interval, std::chrono::minutes(5));
  EXPECT_EQ(p->audit.rotate_bytes, 64ull << 20);
  EXPECT_EQ(p->audit.checkpoint_every, 10000u);
  EXPECT_FALSE(p->audit.required);
  EXPECT_EQ(p->audit.syslog, "");
  EXPECT_EQ(p->audit.signing_key, "");
}

TEST(LoaderAudit, ReadsEveryKey) {
  const std::string key =
      std::filesystem::temp_directory_path() / ("audit-key-" + std::to_string(getpid()) + ".pem");
  std::ofstream(key) << "not checked here, only readable\n";
  auto p = ParsePolicy(R"([audit]
commands = "full"
signing_key = ")" + key + R"("
retention = "30d"
rotate_size = "1MiB"
rotate_age = "1h"
checkpoint_every = 50
required = true
usage_interval = "30s"
syslog = "tcp:127.0.0.1:6514"
)",
                       "p.toml");
  std::filesystem::remove(key);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->audit.commands, AuditCommands::kFull);
  EXPECT_EQ(p->audit.signing_key, key);
  EXPECT_EQ(p->audit.retention, std::chrono::hours(24 * 30));
  EXPECT_EQ(p->audit.rotate_bytes, 1ull << 20);
  EXPECT_EQ(p->audit.rotate_age, std::chrono::hours(1));
  EXPECT_EQ(p->audit.checkpoint_every, 50u);
  EXPECT_TRUE(p->audit.required);
  EXPECT_EQ(p->audit.usage_interval, std::chrono::seconds(30));
  EXPECT_EQ(p->audit.syslog, "tcp:127.0.0.1:6514");
}

TEST(LoaderAudit, StrictErrorsNameTheLineAndKey) {
  EXPECT_EQ(ErrorOf("[audit]\ncommands = \"some\"\n"),
            "p.toml:2:12: audit.commands: expected one of \"hash\", \"full\", got \"some\"");
  EXPECT_EQ(ErrorOf("[audit]\nretension = \"1d\"\n").substr(0, 45),
            "p.toml:2:1: audit.retension: unknown key (kno");
  EXPECT_EQ(ErrorOf("[audit]\nrequired = \"yes\"\n"),
            "p.toml:2:12: audit.required: expected true or false, got a string");
  EXPECT_EQ(ErrorOf("[audit]\nusage_interval = \"1s\"\n"),
            "p.toml:2:18: audit.usage_interval: must be between 10s and 1d, got \"1s\"");
  EXPECT_EQ(ErrorOf("[audit]\nsigning_key = \"key.pem\"\n"),
            "p.toml:2:15: audit.signing_key: must be an absolute path, got \"key.pem\"");
  EXPECT_EQ(ErrorOf("[audit]\nsigning_key = \"/nonexistent/key.pem\"\n"),
            "p.toml:2:15: audit.signing_key: cannot read \"/nonexistent/key.pem\": No such file "
            "or directory");
  EXPECT_EQ(ErrorOf("[audit]\nsyslog = \"udp:1.2.3.4:514\"\n"),
            "p.toml:2:10: audit.syslog: expected \"unix:/path\" or \"tcp:host:port\", got "
            "\"udp:1.2.3.4:514\"");
  EXPECT_EQ(ErrorOf("[audit]\nsyslog = \"tcp:collector:99999\"\n"),
            "p.toml:2:10: audit.syslog: port \"99999\" is not a number from 1 to 65535, got "
            "\"tcp:collector:99999\"");
}

TEST(LoaderAudit, ATenantMaySetOnlyCommands) {
  LoadOptions tenant;
  tenant.tenant = true;
  auto p = ParsePolicy("[audit]\ncommands = \"full\"\n", "t.toml", tenant);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->audit.commands, AuditCommands::kFull);
  EXPECT_EQ(ErrorOf("[audit]\nretention = \"1d\"\n", /*tenant=*/true),
            "p.toml:2:13: audit.retention: is server-wide (one audit trail per server): set it "
            "in the server's --policy; a tenant's policy may set only audit.commands");
  EXPECT_EQ(ErrorOf("[audit]\nretention = \"1d\"\n", /*tenant=*/false), "(loaded)");
}

TEST(LoaderAudit, EnabledIsServerWideAndExcludesRequired) {
  auto p = ParsePolicy("[audit]\nenabled = false\n", "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_FALSE(p->audit.enabled);
  EXPECT_EQ(ErrorOf("[audit]\nenabled = false\n", /*tenant=*/true),
            "p.toml:2:11: audit.enabled: is server-wide (one audit trail per server): set it in "
            "the server's --policy; a tenant's policy may set only audit.commands");
  EXPECT_EQ(ErrorOf("[audit]\nenabled = false\nrequired = true\n"),
            "p.toml:2:11: audit.enabled: is false but audit.required is true: a server cannot "
            "require a trail it does not write");
  EXPECT_EQ(ErrorOf("[audit]\nenabled = \"no\"\n"),
            "p.toml:2:11: audit.enabled: expected true or false, got a string");
}

}  // namespace
}  // namespace mcpcell::policies
