// Secret sources: read on each call (a rotated file is used at once), a command's stdout
// with its timeout and exit status, errors that name the secret and never the value.
#include "policies/secret_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mcpcell::policies {
namespace {

class SecretSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/secret-source-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Script(const std::string& body) {
    std::string path = dir_ + "/vault-read";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
};

TEST_F(SecretSourceTest, ParsesEachKind) {
  auto f = ParseSecretSource("file:/etc/x");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->path, "/etc/x");
  auto e = ParseSecretSource("env:TOKEN");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->variable, "TOKEN");
  auto c = ParseSecretSource("command:/usr/bin/vault read  github");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->argv, (std::vector<std::string>{"/usr/bin/vault", "read", "github"}));
  EXPECT_FALSE(ParseSecretSource("file:relative"));
  EXPECT_FALSE(ParseSecretSource("command:vault read"));
  EXPECT_FALSE(ParseSecretSource("ldap:x"));
}

TEST_F(SecretSourceTest, FileIsReadAgainOnEachCallSoRotationTakesEffect) {
  const std::string path = dir_ + "/token";
  std::ofstream(path) << "first\n";
  auto source = ParseSecretSource("file:" + path);
  ASSERT_TRUE(source);
  auto v1 = ReadSecretSource("TOKEN", *source);
  ASSERT_TRUE(v1) << v1.error().message;
  EXPECT_EQ(*v1, "first");
  std::ofstream(path) << "second\r\n";
  auto v2 = ReadSecretSource("TOKEN", *source);
  ASSERT_TRUE(v2) << v2.error().message;
  EXPECT_EQ(*v2, "second");
  std::filesystem::remove(path);
  auto gone = ReadSecretSource("TOKEN", *source);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().message.rfind("secret TOKEN: open(\"" + path + "\")", 0), 0u);
}

TEST_F(SecretSourceTest, EnvironmentVariable) {
  ::setenv("MCPCELL_TEST_SECRET", "from-env", 1);
  auto v = ReadSecretSource("T", ParseSecretSource("env:MCPCELL_TEST_SECRET").value());
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, "from-env");
  ::unsetenv("MCPCELL_TEST_SECRET");
  EXPECT_FALSE(ReadSecretSource("T", ParseSecretSource("env:MCPCELL_TEST_SECRET").value()));
}

TEST_F(SecretSourceTest, CommandStdoutIsTheValue) {
  auto source = ParseSecretSource("command:" + Script("echo \"value-for-$1\"") + " github");
  ASSERT_TRUE(source);
  auto v = ReadSecretSource("GITHUB_TOKEN", *source);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, "value-for-github");
}

TEST_F(SecretSourceTest, CommandFailureNamesTheSecretNotTheValue) {
  auto source = ParseSecretSource("command:" + Script("echo leaked-value; exit 3"));
  ASSERT_TRUE(source);
  auto v = ReadSecretSource("GITHUB_TOKEN", *source);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().message,
            "secret GITHUB_TOKEN: command " + dir_ + "/vault-read: exit status 3");
}

TEST_F(SecretSourceTest, CommandThatHangsIsKilledAtItsTimeout) {
  auto source = ParseSecretSource("command:" + Script("exec sleep 60"));
  ASSERT_TRUE(source);
  SecretReadOptions options;
  options.command_timeout = std::chrono::milliseconds(100);
  auto v = ReadSecretSource("SLOW", *source, options);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().message,
            "secret SLOW: command " + dir_ + "/vault-read: no answer within 100 ms (killed)");
}

TEST_F(SecretSourceTest, EmptyValueIsAnError) {
  const std::string path = dir_ + "/empty";
  std::ofstream(path) << "\n";
  auto v = ReadSecretSource("E", ParseSecretSource("file:" + path).value());
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().message, "secret E: the source gave an empty value");
}

TEST_F(SecretSourceTest, WipeClearsTheBytes) {
  std::string value = "abcdef";
  WipeSecret(value);
  EXPECT_TRUE(value.empty());
}

}  // namespace
}  // namespace mcpcell::policies
