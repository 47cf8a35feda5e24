// [[secrets]]: good entries load with their defaults; every refusal names file:line:column
// and the key; DescribePolicy prints where a value comes from, never the value.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "policies/compiler.h"
#include "policies/loader.h"

namespace mcpcell::policies {
namespace {

class SecretsLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/secrets-loader-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    token_ = dir_ + "/token";
    std::ofstream(token_) << "s3cr3t-value\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static constexpr const char* kNetwork =
      "[network]\negress = \"allowlist\"\nallow = [\"api.example.com\", \"*.example.org\", "
      "\"10.1.0.0/16:8443\"]\n";

  std::string ErrorOf(const std::string& secrets) {
    auto p = ParsePolicy(std::string(kNetwork) + secrets, "p.toml");
    return p ? "(loaded)" : p.error().message;
  }
  std::string Entry(const std::string& extra) {
    return "[[secrets]]\nname = \"TOKEN\"\nsource = \"file:" + token_ + "\"\n" + extra;
  }

  std::string dir_, token_;
};

TEST_F(SecretsLoader, PlaceholderSecretLoadsWithDefaults) {
  auto p = ParsePolicy(std::string(kNetwork) + Entry("hosts = [\"api.example.com\"]\n"), "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->secrets.size(), 1u);
  const SecretPolicy& s = p->secrets[0];
  EXPECT_EQ(s.name, "TOKEN");
  EXPECT_EQ(s.mode, SecretMode::kPlaceholder);
  EXPECT_EQ(s.surfaces, (std::vector<std::string>{"header", "basic_auth", "query"}));
  EXPECT_FALSE(s.ttl.has_value());
  EXPECT_FALSE(s.end_session_on_violation);
  EXPECT_TRUE(HasPlaceholderSecrets(*p));
}

TEST_F(SecretsLoader, EveryKeyIsRead) {
  auto p = ParsePolicy(std::string(kNetwork) +
                           Entry("hosts = [\"x.example.org\", \"*.example.org\", "
                                 "\"10.1.2.0/24:8443\"]\nsurfaces = [\"body\"]\nttl = \"15m\"\n"
                                 "on_violation = \"block_and_end_session\"\n") +
                           "[[secrets]]\nname = \"DB_PASSWORD\"\nsource = \"env:PATH\"\n"
                           "mode = \"env\"\n",
                       "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->secrets.size(), 2u);
  EXPECT_EQ(p->secrets[0].surfaces, std::vector<std::string>{"body"});
  EXPECT_EQ(p->secrets[0].ttl, std::chrono::seconds(900));
  EXPECT_TRUE(p->secrets[0].end_session_on_violation);
  EXPECT_EQ(p->secrets[1].mode, SecretMode::kEnv);
}

TEST_F(SecretsLoader, UnknownSourceKindIsRefusedAtItsLine) {
  EXPECT_EQ(ErrorOf("[[secrets]]\nname = \"T\"\nsource = \"vault:x\"\nmode = \"env\"\n"),
            "p.toml:6:10: secrets[0].source: \"vault:x\": unknown source kind \"vault\" (known: "
            "file:PATH, env:VAR, command:CMDLINE)");
}

TEST_F(SecretsLoader, MissingFileIsRefusedAtLoad) {
  std::string e =
      ErrorOf("[[secrets]]\nname = \"T\"\nsource = \"file:" + dir_ + "/absent\"\nmode = \"env\"\n");
  EXPECT_EQ(e.rfind("p.toml:6:10: secrets[0].source: \"" + dir_ + "/absent\" cannot be read", 0),
            0u)
      << e;
}

TEST_F(SecretsLoader, MissingEnvironmentVariableIsRefused) {
  ::unsetenv("MCPCELL_TEST_NO_SUCH_VAR");
  EXPECT_EQ(ErrorOf("[[secrets]]\nname = \"T\"\nsource = \"env:MCPCELL_TEST_NO_SUCH_VAR\"\n"
                    "mode = \"env\"\n"),
            "p.toml:6:10: secrets[0].source: the server's environment has no "
            "MCPCELL_TEST_NO_SUCH_VAR");
}

TEST_F(SecretsLoader, BadNameIsRefused) {
  EXPECT_EQ(ErrorOf("[[secrets]]\nname = \"github_token\"\nsource = \"env:PATH\"\nmode = "
                    "\"env\"\n"),
            "p.toml:5:8: secrets[0].name: \"github_token\" must be 1 to 64 of [A-Z0-9_], not "
            "starting with a digit");
}

TEST_F(SecretsLoader, NameOfAVariableTheCompilerSetsIsRefused) {
  EXPECT_EQ(ErrorOf("[[secrets]]\nname = \"HTTP_PROXY\"\nsource = \"env:PATH\"\nmode = \"env\"\n"),
            "p.toml:5:8: secrets[0].name: \"HTTP_PROXY\" is a variable mcpcell sets in every "
            "cell; choose another name");
  EXPECT_NE(ErrorOf("[[secrets]]\nname = \"SSL_CERT_FILE\"\nsource = \"env:PATH\"\nmode = "
                    "\"env\"\n")
                .find("is a variable mcpcell sets"),
            std::string::npos);
}

TEST_F(SecretsLoader, NameGrantedTwiceIsRefused) {
  EXPECT_EQ(ErrorOf(Entry("mode = \"env\"\n") + Entry("mode = \"file\"\n")),
            "p.toml:9:8: secrets[1].name: \"TOKEN\" is granted twice");
}

TEST_F(SecretsLoader, PlaceholderWithoutHostsIsRefused) {
  EXPECT_EQ(ErrorOf(Entry("")),
            "p.toml:4:1: secrets[0].hosts: a placeholder secret needs hosts (where the proxy "
            "may put its value)");
}

TEST_F(SecretsLoader, HostsOutsideNetworkAllowAreRefused) {
  EXPECT_EQ(ErrorOf(Entry("hosts = [\"api.example.com\", \"evil.example.net\"]\n")),
            "p.toml:7:29: secrets[0].hosts[1]: \"evil.example.net\" is not within network.allow "
            "(checked for port 443): a secret may only go where the cell may connect");
  // A wildcard is within only a wildcard that covers every name under it.
  EXPECT_NE(ErrorOf(Entry("hosts = [\"*.example.com\"]\n")).find("is not within network.allow"),
            std::string::npos);
  // A wider CIDR than the allowed one, or another port.
  EXPECT_NE(ErrorOf(Entry("hosts = [\"10.0.0.0/8:8443\"]\n")).find("is not within"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Entry("hosts = [\"api.example.com:8443\"]\n")).find("is not within"),
            std::string::npos);
}

TEST_F(SecretsLoader, HostsOnANonPlaceholderSecretAreRefused) {
  EXPECT_EQ(ErrorOf(Entry("mode = \"env\"\nhosts = [\"api.example.com\"]\n")),
            "p.toml:8:9: secrets[0].hosts: only a placeholder secret has hosts (mode is \"env\")");
}

TEST_F(SecretsLoader, UnknownSurfaceAndKeyAreRefused) {
  EXPECT_EQ(ErrorOf(Entry("hosts = [\"api.example.com\"]\nsurfaces = [\"path\"]\n")),
            "p.toml:8:13: secrets[0].surfaces[0]: unknown surface \"path\" (known: header, "
            "basic_auth, query, body)");
  EXPECT_EQ(ErrorOf(Entry("value = \"x\"\n")).rfind("p.toml:7:1: secrets[0].value: unknown key", 0),
            0u);
}

TEST_F(SecretsLoader, DescribePolicyShowsTheSourceNotTheValue) {
  auto p = ParsePolicy(std::string(kNetwork) + Entry("hosts = [\"api.example.com\"]\nttl=\"1h\"\n"),
                       "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  std::string text = DescribePolicy(*p);
  EXPECT_NE(text.find("[[secrets]]\nname = \"TOKEN\"\nsource = \"file:" + token_ + "\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ttl = \"1h\""), std::string::npos) << text;
  EXPECT_EQ(text.find("s3cr3t-value"), std::string::npos);
  // What DescribePolicy prints loads back to the same secrets.
  auto again = ParsePolicy(text, "again.toml");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->secrets.size(), 1u);
}

TEST_F(SecretsLoader, PlaceholderPoliciesTrustTheProxyCaInTheirCells) {
  auto p = ParsePolicy(std::string(kNetwork) + Entry("hosts = [\"api.example.com\"]\n"), "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  // Before a server has written the bundle, compiling makes an empty one (policy check).
  auto before = CompileCellSpec(*p, "c0", dir_ + "/fresh", "");
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_TRUE(std::filesystem::is_regular_file(CaBundleHostPath(dir_ + "/fresh")));
  std::filesystem::create_directories(dir_ + "/egress");
  std::ofstream(CaBundleHostPath(dir_)) << "pem";
  auto spec = CompileCellSpec(*p, "c1", dir_, "");
  ASSERT_TRUE(spec) << spec.error().message;
  std::ifstream kept(CaBundleHostPath(dir_));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "pem");  // not replaced
  bool mounted = false;
  for (const auto& m : spec->mounts)
    mounted = mounted || (m.cell_path == kCellCaBundlePath && !m.writable &&
                          m.host_path == dir_ + "/egress/ca-bundle.pem");
  EXPECT_TRUE(mounted);
  for (const std::string& var : CaBundleEnv())
    EXPECT_NE(std::find(spec->env.begin(), spec->env.end(), var), spec->env.end()) << var;
  // Without placeholder secrets, nothing of it.
  p->secrets.clear();
  auto plain = CompileCellSpec(*p, "c1", dir_, "");
  ASSERT_TRUE(plain) << plain.error().message;
  for (const auto& e : plain->env) EXPECT_NE(e.rfind("SSL_CERT_FILE=", 0), 0u);
}

}  // namespace
}  // namespace mcpcell::policies
