// Placeholder substitution without I/O: every surface, Basic auth round trip, each reason
// for a refusal, several secrets, and the value read on each request (rotation).
#include "egress/secret_substitution.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace mcpcell::egress {
namespace {

const std::string kPh = "mcpcell-secret-0f1e2d3c4b5a";
const std::string kPh2 = "mcpcell-secret-99887766aabb";

SecretGrant Grant(std::string name, std::string ph, std::string value,
                  std::vector<std::string> hosts = {"api.example.com"}) {
  SecretGrant g;
  g.name = std::move(name);
  g.placeholder = std::move(ph);
  g.value = [value]() -> Result<std::string> { return value; };
  g.hosts = Allowlist::Parse(hosts).value();
  return g;
}

SecretRequestContext Tls(const std::string& host = "api.example.com", uint16_t port = 443) {
  SecretRequestContext c;
  c.host = ParseHost(host).value();
  c.port = port;
  c.tls = true;
  return c;
}

SecretRequest Get(std::string target, std::vector<HttpHeader> extra = {},
                  std::string host = "api.example.com") {
  SecretRequest r{"GET", std::move(target), {{"Host", std::move(host)}}, ""};
  for (HttpHeader& h : extra) r.headers.push_back(std::move(h));
  return r;
}

TEST(SecretSubstitution, ReplacesThePlaceholderInAHeader) {
  std::vector<SecretGrant> grants{Grant("GITHUB_TOKEN", kPh, "ghp_real")};
  SecretRequest r = Get("/user", {{"Authorization", "Bearer " + kPh}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_FALSE(s.refusal) << s.refusal->Line();
  EXPECT_EQ(r.headers[1].value, "Bearer ghp_real");
  ASSERT_EQ(s.substituted.size(), 1u);
  EXPECT_EQ(s.substituted[0], std::make_pair(std::string("GITHUB_TOKEN"), std::string("header")));
  ASSERT_EQ(s.masks.size(), 1u);
  EXPECT_EQ(s.masks[0].value, "ghp_real");
  EXPECT_EQ(s.masks[0].placeholder, kPh);
}

TEST(SecretSubstitution, BasicAuthIsDecodedSubstitutedAndReEncoded) {
  std::vector<SecretGrant> grants{Grant("TOKEN", kPh, "s3cr:et")};
  SecretRequest r = Get("/", {{"Authorization", "Basic " + Base64Encode("user:" + kPh)}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_FALSE(s.refusal) << s.refusal->Line();
  ASSERT_TRUE(r.headers[1].value.starts_with("Basic "));
  EXPECT_EQ(Base64Decode(r.headers[1].value.substr(6)).value(), "user:s3cr:et");
  EXPECT_EQ(s.substituted[0].second, "basic_auth");
}

TEST(SecretSubstitution, BasicAuthRefusedWhenOnlyHeadersAreAllowed) {
  std::vector<SecretGrant> grants{Grant("TOKEN", kPh, "v")};
  grants[0].surfaces.basic_auth = false;
  SecretRequest r = Get("/", {{"Authorization", "Basic " + Base64Encode("x:" + kPh)}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->surface, "basic_auth");
  EXPECT_EQ(s.refusal->Line(),
            "mcpcell: secret TOKEN refused: its placeholder was in the Basic credentials, which "
            "is not an allowed surface for it");
}

TEST(SecretSubstitution, QueryValueIsPercentEncoded) {
  std::vector<SecretGrant> grants{Grant("KEY", kPh, "a b&c")};
  SecretRequest r = Get("/search?q=1&key=" + kPh + "&x=" + kPh);
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_FALSE(s.refusal) << s.refusal->Line();
  EXPECT_EQ(r.target, "/search?q=1&key=a%20b%26c&x=a%20b%26c");
}

TEST(SecretSubstitution, PlaceholderInThePathIsRefused) {
  std::vector<SecretGrant> grants{Grant("KEY", kPh, "v")};
  SecretRequest r = Get("/repos/" + kPh + "?q=" + kPh);
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->surface, "url_path");
}

TEST(SecretSubstitution, PlaceholderInTheUrlUserinfoIsRefused) {
  std::vector<SecretGrant> grants{Grant("KEY", kPh, "v")};
  SecretRequest r = Get("https://user:" + kPh + "@api.example.com/x");
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->surface, "userinfo");
  EXPECT_NE(s.refusal->reason.find("the URL's userinfo"), std::string::npos);
}

TEST(SecretSubstitution, BodyIsRefusedUnlessAllowed) {
  std::vector<SecretGrant> grants{Grant("GITHUB_TOKEN", kPh, "v")};
  SecretRequest r{"POST",
                  "/",
                  {{"Host", "api.example.com"}, {"Content-Type", "application/json"}},
                  "{\"t\":\"" + kPh + "\"}"};
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->Line(),
            "mcpcell: secret GITHUB_TOKEN refused: its placeholder was in the request body, which "
            "is not an allowed surface for it");
}

TEST(SecretSubstitution, JsonBodyGetsAnEscapedValueAndANewContentLength) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "q\"uo\\te")};
  grants[0].surfaces.body = true;
  SecretRequest r{"POST",
                  "/",
                  {{"Host", "api.example.com"},
                   {"Content-Type", "application/json; charset=utf-8"},
                   {"Content-Length", "99"}},
                  "{\"t\":\"" + kPh + "\"}"};
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_FALSE(s.refusal) << s.refusal->Line();
  EXPECT_EQ(r.body, "{\"t\":\"q\\\"uo\\\\te\"}");
  EXPECT_EQ(r.headers[2].value, std::to_string(r.body.size()));
}

TEST(SecretSubstitution, FormBodyGetsAPercentEncodedValue) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "a=b")};
  grants[0].surfaces.body = true;
  SecretRequest r{
      "POST",
      "/",
      {{"Host", "api.example.com"}, {"Content-Type", "application/x-www-form-urlencoded"}},
      "token=" + kPh};
  ASSERT_FALSE(SubstituteSecrets(r, grants, Tls()).refusal);
  EXPECT_EQ(r.body, "token=a%3Db");
}

TEST(SecretSubstitution, OtherBodyTypesAreRefusedEvenWhenBodiesAreAllowed) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "v")};
  grants[0].surfaces.body = true;
  SecretRequest r{"POST", "/", {{"Host", "api.example.com"}, {"Content-Type", "text/plain"}}, kPh};
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_NE(s.refusal->reason.find("of type text/plain"), std::string::npos);
  EXPECT_EQ(r.body, kPh);
}

TEST(SecretSubstitution, AnotherHostIsRefusedAndTheValueIsNotRead) {
  bool read = false;
  std::vector<SecretGrant> grants{Grant("T", kPh, "v")};
  grants[0].value = [&read]() -> Result<std::string> {
    read = true;
    return std::string("v");
  };
  grants[0].end_session_on_violation = true;
  SecretRequest r = Get("/", {{"X-Token", kPh}}, "evil.example.org");
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls("evil.example.org"));
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->Line(),
            "mcpcell: secret T refused: its placeholder was in a request to "
            "evil.example.org:443, which is not one of its hosts");
  EXPECT_TRUE(s.refusal->end_session);
  EXPECT_FALSE(read);
  EXPECT_EQ(r.headers[1].value, kPh);
}

TEST(SecretSubstitution, HostHeaderMustNameTheTlsHost) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "v", {"api.example.com", "other.example.com"})};
  SecretRequest r = Get("/", {{"X-Token", kPh}}, "other.example.com");
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls("api.example.com"));
  ASSERT_TRUE(s.refusal);
  EXPECT_NE(s.refusal->reason.find("Host header (other.example.com) is not the TLS host"),
            std::string::npos);
  SecretRequest ok = Get("/", {{"X-Token", kPh}}, "API.example.com:443");
  EXPECT_FALSE(SubstituteSecrets(ok, grants, Tls("api.example.com")).refusal);
}

TEST(SecretSubstitution, PlainHttpIsAlwaysRefused) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "v", {"api.example.com:80"})};
  SecretRequest r = Get("/", {{"X-Token", kPh}});
  SecretRequestContext c = Tls("api.example.com", 80);
  c.tls = false;
  SecretSubstitution s = SubstituteSecrets(r, grants, c);
  ASSERT_TRUE(s.refusal);
  EXPECT_NE(s.refusal->reason.find("plain-HTTP request"), std::string::npos);
}

TEST(SecretSubstitution, ExpiredSecretIsRefused) {
  std::vector<SecretGrant> grants{Grant("T", kPh, "v")};
  SecretRequestContext c = Tls();
  grants[0].expires = c.now;
  SecretRequest r = Get("/", {{"X-Token", kPh}});
  SecretSubstitution s = SubstituteSecrets(r, grants, c);
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->reason, "its placeholder was used after the secret expired");
  grants[0].expires = c.now + std::chrono::seconds(1);
  EXPECT_FALSE(SubstituteSecrets(r, grants, c).refusal);
}

TEST(SecretSubstitution, SeveralSecretsInOneRequest) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "alpha"), Grant("B", kPh2, "beta")};
  SecretRequest r = Get("/?k=" + kPh2, {{"X-A", kPh}, {"X-Both", kPh + "/" + kPh2}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_FALSE(s.refusal) << s.refusal->Line();
  EXPECT_EQ(r.target, "/?k=beta");
  EXPECT_EQ(r.headers[1].value, "alpha");
  EXPECT_EQ(r.headers[2].value, "alpha/beta");
  EXPECT_EQ(s.masks.size(), 2u);
}

TEST(SecretSubstitution, OneRefusedSecretRefusesTheWholeRequest) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "alpha"),
                                  Grant("B", kPh2, "beta", {"elsewhere.example.com"})};
  SecretRequest r = Get("/", {{"X-A", kPh}, {"X-B", kPh2}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->secret, "B");
}

TEST(SecretSubstitution, APlaceholderSplitAcrossHeaderValuesIsNotRecognised) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "alpha")};
  std::string half1 = kPh.substr(0, 10), half2 = kPh.substr(10);
  SecretRequest r = Get("/", {{"X-Part", half1}, {"X-Part", half2}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  EXPECT_FALSE(s.refusal);
  EXPECT_TRUE(s.substituted.empty());
  EXPECT_EQ(r.headers[1].value + r.headers[2].value, kPh);  // forwarded as is: no value in it
}

TEST(SecretSubstitution, RepeatedHeadersAreEachSubstituted) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "alpha")};
  SecretRequest r = Get("/", {{"Cookie", "a=" + kPh}, {"Cookie", "b=" + kPh}});
  ASSERT_FALSE(SubstituteSecrets(r, grants, Tls()).refusal);
  EXPECT_EQ(r.headers[1].value, "a=alpha");
  EXPECT_EQ(r.headers[2].value, "b=alpha");
}

TEST(SecretSubstitution, ValueIsReadOnEveryRequestSoRotationTakesEffect) {
  int version = 0;
  std::vector<SecretGrant> grants{Grant("A", kPh, "")};
  grants[0].value = [&version]() -> Result<std::string> { return "v" + std::to_string(++version); };
  SecretRequest r1 = Get("/", {{"X", kPh}}), r2 = Get("/", {{"X", kPh}});
  ASSERT_FALSE(SubstituteSecrets(r1, grants, Tls()).refusal);
  ASSERT_FALSE(SubstituteSecrets(r2, grants, Tls()).refusal);
  EXPECT_EQ(r1.headers[1].value, "v1");
  EXPECT_EQ(r2.headers[1].value, "v2");
}

TEST(SecretSubstitution, UnreadableOrHeaderBreakingValuesAreRefused) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "x\r\nEvil: 1")};
  SecretRequest r = Get("/", {{"X", kPh}});
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_NE(s.refusal->reason.find("line break"), std::string::npos);
  grants[0].value = []() -> Result<std::string> { return Error::Msg("vault: timed out"); };
  s = SubstituteSecrets(r, grants, Tls());
  ASSERT_TRUE(s.refusal);
  EXPECT_EQ(s.refusal->reason, "its value cannot be read: vault: timed out");
}

TEST(SecretSubstitution, RequestsWithoutPlaceholdersAreUntouched) {
  std::vector<SecretGrant> grants{Grant("A", kPh, "alpha")};
  SecretRequest r = Get("/x?y=z", {{"Authorization", "Basic " + Base64Encode("u:p")}});
  SecretRequest before = r;
  SecretSubstitution s = SubstituteSecrets(r, grants, Tls("other.example.org"));
  EXPECT_FALSE(s.refusal);
  EXPECT_EQ(r.target, before.target);
  EXPECT_EQ(r.headers[1].value, before.headers[1].value);
}

}  // namespace
}  // namespace mcpcell::egress
