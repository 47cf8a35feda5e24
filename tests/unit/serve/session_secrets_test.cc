// SessionSecrets: each session gets its own random placeholders; env secrets are read at
// each exec (rotation) and stop at expiry; file secrets are written 0400 and removed at
// expiry and release; Describe never holds a value; a block_and_end_session refusal ends
// the session on the object's own thread.
#include "serve/session_secrets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

namespace mcpcell::serve {
namespace {

using policies::SecretMode;
using policies::SecretPolicy;

// Only the file operations SessionSecrets uses; everything else is refused.
class FakeCell final : public sandbox::CellInstance {
 public:
  const std::string& id() const override { return id_; }
  const sandbox::CellSpec& spec() const override { return spec_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  bool usable() const override { return true; }
  Result<sandbox::CgroupUsage> Usage() const override { return Error::Msg("fake"); }
  int TakeEgressListener() override { return -1; }
  Status Destroy() override { return Ok(); }
  Result<sandbox::ExecResult> Exec(const sandbox::ExecOptions&) override {
    return Error::Msg("fake");
  }
  Status SignalExec(uint64_t, int) override { return Error::Msg("fake"); }
  Result<sandbox::control::StatsReply> Stats() override { return Error::Msg("fake"); }
  Result<std::string> ReadFile(const std::string&, uint64_t) override { return Error::Msg("fake"); }
  Result<sandbox::FileWindow> ReadFileRange(const std::string&, uint64_t, uint64_t) override {
    return Error::Msg("fake");
  }
  Status WriteFile(const std::string& path, std::string_view data, uint32_t mode) override {
    files[path] = {std::string(data), mode};
    return Ok();
  }
  Status WriteFileAt(const std::string&, uint64_t, std::string_view, bool, uint32_t) override {
    return Error::Msg("fake");
  }
  Status AppendFile(const std::string&, std::string_view, uint32_t) override {
    return Error::Msg("fake");
  }
  Status WriteNewFile(const std::string&, std::string_view, uint32_t) override {
    return Error::Msg("fake");
  }
  Result<std::vector<sandbox::control::DirEntry>> ListDir(const std::string&, size_t) override {
    return Error::Msg("fake");
  }
  Result<sandbox::control::FileStat> Stat(const std::string&, bool) override {
    return Error::Msg("fake");
  }
  Status Mkdir(const std::string&, uint32_t, bool) override { return Error::Msg("fake"); }
  Status Remove(const std::string& path, bool) override {
    files.erase(path);
    return Ok();
  }
  Status Rename(const std::string&, const std::string&, bool) override {
    return Error::Msg("fake");
  }

  std::map<std::string, std::pair<std::string, uint32_t>> files;

 private:
  std::string id_ = "cell-1";
  sandbox::CellSpec spec_;
  std::vector<std::string> warnings_;
};

class SessionSecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/session-secrets-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Write("token-1");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& value) { std::ofstream(dir_ + "/token") << value << "\n"; }
  SecretPolicy Secret(const std::string& name, SecretMode mode) {
    SecretPolicy s;
    s.name = name;
    s.source = "file:" + dir_ + "/token";
    s.mode = mode;
    if (mode == SecretMode::kPlaceholder) s.hosts = {"api.example.com"};
    return s;
  }
  std::string dir_;
};

TEST_F(SessionSecretsTest, PlaceholdersAreRandomPerSessionAndTheGrantReadsTheSourceEachTime) {
  SessionSecrets secrets;
  secrets.SetProfile("", {Secret("GITHUB_TOKEN", SecretMode::kPlaceholder)});
  FakeCell a, b;
  auto ga = secrets.Grant(a, "session-a", "");
  auto gb = secrets.Grant(b, "session-b", "");
  ASSERT_TRUE(ga && gb);
  ASSERT_EQ(ga->size(), 1u);
  const egress::SecretGrant& grant = (*ga)[0];
  EXPECT_EQ(grant.placeholder.rfind("mcpcell-secret-", 0), 0u);
  EXPECT_EQ(grant.placeholder.size(), std::string("mcpcell-secret-").size() + 32);
  EXPECT_NE(grant.placeholder, (*gb)[0].placeholder);
  EXPECT_TRUE(grant.hosts.Match("api.example.com", 443));
  EXPECT_FALSE(grant.hosts.Match("other.example.com", 443));
  EXPECT_TRUE(grant.surfaces.header && grant.surfaces.basic_auth && grant.surfaces.query);
  EXPECT_FALSE(grant.surfaces.body);
  EXPECT_EQ(grant.value().value(), "token-1");
  Write("token-2");
  EXPECT_EQ(grant.value().value(), "token-2");  // rotated: the next request gets the new value
  // The cell's environment holds the placeholder, never the value.
  auto env = secrets.ExecEnv("session-a");
  ASSERT_TRUE(env);
  EXPECT_EQ(*env, std::vector<std::string>{"GITHUB_TOKEN=" + grant.placeholder});
  // A second cell of the same session (a replacement) gets the same placeholder.
  FakeCell again;
  auto g2 = secrets.Grant(again, "session-a", "");
  ASSERT_TRUE(g2);
  EXPECT_EQ((*g2)[0].placeholder, grant.placeholder);
}

TEST_F(SessionSecretsTest, EnvSecretIsReadAtEachExecAndStopsAtExpiry) {
  SessionSecrets secrets;
  SecretPolicy expired = Secret("OLD_PASSWORD", SecretMode::kEnv);
  expired.ttl = std::chrono::seconds(0);
  secrets.SetProfile("", {Secret("DB_PASSWORD", SecretMode::kEnv), expired});
  FakeCell cell;
  auto grants = secrets.Grant(cell, "s", "");
  ASSERT_TRUE(grants);
  EXPECT_TRUE(grants->empty());  // nothing for the proxy
  EXPECT_EQ(secrets.ExecEnv("s").value(), std::vector<std::string>{"DB_PASSWORD=token-1"});
  Write("token-2");
  EXPECT_EQ(secrets.ExecEnv("s").value(), std::vector<std::string>{"DB_PASSWORD=token-2"});
  EXPECT_EQ(secrets.Names("s"), (std::vector<std::string>{"DB_PASSWORD", "OLD_PASSWORD"}));
  auto described = secrets.Describe("s");
  ASSERT_EQ(described.size(), 2u);
  EXPECT_FALSE(described[0].expired);
  EXPECT_FALSE(described[0].time_left.has_value());
  EXPECT_TRUE(described[1].expired);
  // An unreadable source is an error naming the secret, not an empty variable.
  std::filesystem::remove(dir_ + "/token");
  auto broken = secrets.ExecEnv("s");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().message.rfind("secret DB_PASSWORD: open(", 0), 0u);
}

TEST_F(SessionSecretsTest, FileSecretIsWrittenPrivateAndRemovedOnRelease) {
  SessionSecrets secrets;
  secrets.SetProfile("", {Secret("KEY", SecretMode::kFile)});
  FakeCell cell;
  ASSERT_TRUE(secrets.Grant(cell, "s", ""));
  ASSERT_EQ(cell.files.count("/run/secrets/KEY"), 1u);
  EXPECT_EQ(cell.files["/run/secrets/KEY"].first, "token-1");
  EXPECT_EQ(cell.files["/run/secrets/KEY"].second, 0400u);
  EXPECT_TRUE(secrets.ExecEnv("s")->empty());
  EXPECT_EQ(secrets.Describe("s")[0].file, "/run/secrets/KEY");
  secrets.Release("s");
  EXPECT_EQ(cell.files.count("/run/secrets/KEY"), 0u);
  // A cell replacing it in the same session gets the file again.
  FakeCell replacement;
  ASSERT_TRUE(secrets.Grant(replacement, "s", ""));
  EXPECT_EQ(replacement.files.count("/run/secrets/KEY"), 1u);
}

TEST_F(SessionSecretsTest, AReplacementCellKeepsThePlaceholderAndExpiry) {
  SessionSecrets secrets;
  SecretPolicy s = Secret("T", SecretMode::kPlaceholder);
  s.ttl = std::chrono::seconds(600);
  secrets.SetProfile("", {s});
  FakeCell first, second;
  auto g1 = secrets.Grant(first, "s", "");
  ASSERT_TRUE(g1);
  secrets.Release("s");
  auto g2 = secrets.Grant(second, "s", "");
  ASSERT_TRUE(g2);
  EXPECT_EQ((*g1)[0].placeholder, (*g2)[0].placeholder);
  EXPECT_EQ((*g1)[0].expires, (*g2)[0].expires);
}

TEST_F(SessionSecretsTest, ExpiredFileSecretIsRemovedAtTheNextCall) {
  SessionSecrets secrets;
  SecretPolicy s = Secret("KEY", SecretMode::kFile);
  s.ttl = std::chrono::seconds(3600);
  secrets.SetProfile("", {s});
  FakeCell cell;
  ASSERT_TRUE(secrets.Grant(cell, "live", ""));
  EXPECT_EQ(cell.files.count("/run/secrets/KEY"), 1u);
  (void)secrets.ExecEnv("live");
  EXPECT_EQ(cell.files.count("/run/secrets/KEY"), 1u);  // an hour left: kept
  s.ttl = std::chrono::seconds(0);
  SessionSecrets expiring;
  expiring.SetProfile("", {s});
  FakeCell other;
  ASSERT_TRUE(expiring.Grant(other, "gone", ""));
  EXPECT_EQ(other.files.count("/run/secrets/KEY"), 0u);  // never written once expired
}

TEST_F(SessionSecretsTest, OtherProfilesSecretsAreNotGranted) {
  SessionSecrets secrets;
  secrets.SetProfile("tenant-a", {Secret("A_TOKEN", SecretMode::kEnv)});
  secrets.SetProfile("tenant-b", {});
  FakeCell cell;
  auto grants = secrets.Grant(cell, "s-b", "tenant-b");
  ASSERT_TRUE(grants);
  EXPECT_TRUE(secrets.ExecEnv("s-b")->empty());
  EXPECT_TRUE(secrets.Values("s-b").empty());
}

TEST_F(SessionSecretsTest, DescribeNeverHoldsTheValueAndValuesDoes) {
  SessionSecrets secrets;
  SecretPolicy s = Secret("T", SecretMode::kPlaceholder);
  s.ttl = std::chrono::seconds(600);
  secrets.SetProfile("", {s});
  FakeCell cell;
  ASSERT_TRUE(secrets.Grant(cell, "s", ""));
  auto d = secrets.Describe("s");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].hosts, std::vector<std::string>{"api.example.com"});
  ASSERT_TRUE(d[0].time_left);
  EXPECT_GT(d[0].time_left->count(), 0);
  EXPECT_LE(d[0].time_left->count(), 600);
  auto values = secrets.Values("s");
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].value, "token-1");
}

TEST_F(SessionSecretsTest, RefusalOfABlockAndEndSessionSecretEndsTheSession) {
  SessionSecrets secrets;
  std::mutex mu;
  std::condition_variable cv;
  std::string ended, why;
  secrets.SetEndSession([&](const std::string& key, const std::string& reason) {
    std::lock_guard lock(mu);
    ended = key;
    why = reason;
    cv.notify_all();
  });
  egress::SecretEvent substituted{"s1", "T",  "api.example.com:443", "header", "substituted",
                                  "",   false};
  secrets.OnSecretEvent(substituted);
  egress::SecretEvent plain_block{"s2", "T", "x:443", "header", "refused", "no", false};
  secrets.OnSecretEvent(plain_block);
  egress::SecretEvent fatal{"s3", "T", "x:443", "header", "refused", "not its host", true};
  secrets.OnSecretEvent(fatal);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return !ended.empty(); });
  EXPECT_EQ(ended, "s3");
  EXPECT_NE(why.find("secret T"), std::string::npos);
  EXPECT_NE(why.find("not its host"), std::string::npos);
  lock.unlock();
  secrets.SetEndSession(nullptr);
}

TEST(SecretsInstructions, NameHowToUseAndNeverTheSource) {
  SecretPolicy p;
  p.name = "GITHUB_TOKEN";
  p.source = "file:/etc/mcpcell/secrets/github";
  p.hosts = {"api.github.com"};
  SecretPolicy f;
  f.name = "KEY";
  f.source = "env:KEY";
  f.mode = SecretMode::kFile;
  const std::string text = SecretsInstructions({p, f});
  EXPECT_NE(text.find("$GITHUB_TOKEN (a placeholder: use the variable in HTTPS requests to "
                      "api.github.com"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("$KEY (the file /run/secrets/KEY)"), std::string::npos) << text;
  EXPECT_EQ(text.find("/etc/mcpcell/secrets"), std::string::npos);
  EXPECT_EQ(SecretsInstructions({}), "");
}

TEST(CaBundle, HoldsTheProxyCaAndIsWorldReadable) {
  char tmpl[] = "/tmp/ca-bundle-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string pem = "-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n";
  ASSERT_TRUE(WriteCaBundle(dir, pem));
  std::ifstream in(dir + "/egress/ca-bundle.pem");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(text.ends_with(pem));
  EXPECT_EQ(std::filesystem::status(dir + "/egress/ca-bundle.pem").permissions(),
            std::filesystem::perms(0644));
  EXPECT_FALSE(WriteCaBundle(dir, ""));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mcpcell::serve
