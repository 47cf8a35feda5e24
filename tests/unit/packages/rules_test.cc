// Versions (PEP 440, SemVer), rules, requirements and the policy checks, as tables of cases
// including hostile input.
#include "packages/rules.h"

#include <gtest/gtest.h>

#include "packages/digest.h"
#include "packages/pypi_index.h"
#include "packages/versions.h"

namespace mcpcell::packages {
namespace {

int Pep(const std::string& a, const std::string& b) {
  auto x = ParsePep440(a);
  auto y = ParsePep440(b);
  EXPECT_TRUE(x.ok()) << a << ": " << (x.ok() ? "" : x.error().message);
  EXPECT_TRUE(y.ok()) << b << ": " << (y.ok() ? "" : y.error().message);
  if (!x.ok() || !y.ok()) return 99;
  return ComparePep440(*x, *y);
}

TEST(Pep440Test, OrdersLikePip) {
  // Each version is below the next.
  const char* order[] = {"0.9",       "1.0.dev1", "1.0a1", "1.0a2.dev1", "1.0a2",
                         "1.0b1",     "1.0rc1",   "1.0",   "1.0+local",  "1.0.post1.dev1",
                         "1.0.post1", "1.0.1",    "1.1",   "1.10",       "2!0.1"};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    EXPECT_LT(Pep(order[i], order[i + 1]), 0) << order[i] << " < " << order[i + 1];
    EXPECT_GT(Pep(order[i + 1], order[i]), 0) << order[i + 1] << " > " << order[i];
  }
  EXPECT_EQ(Pep("1.0", "1.0.0"), 0);
  EXPECT_EQ(Pep("1.0RC1", "1.0rc1"), 0);
  EXPECT_EQ(Pep("1.0-1", "1.0.post1"), 0);
  EXPECT_EQ(Pep("v1.0", "1.0"), 0);
  EXPECT_EQ(Pep("1.0alpha1", "1.0a1"), 0);
}

TEST(Pep440Test, RefusesGarbage) {
  for (const char* bad : {"", "abc", "1.0-", "1.0+", "1.0+a..b", "1..0", "1.0 ", "1.0;rm",
                          "1.0junk", "+1", "1!", "99999999999999999999999"}) {
    EXPECT_FALSE(ParsePep440(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParsePep440(std::string(200, '1')).ok());
}

TEST(SemVerTest, OrdersBySpec) {
  const char* order[] = {"1.0.0-alpha",  "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                         "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",       "1.0.0",
                         "1.0.1",        "1.2.0",         "1.10.0",           "2.0.0"};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    auto a = ParseSemVer(order[i]);
    auto b = ParseSemVer(order[i + 1]);
    ASSERT_TRUE(a.ok() && b.ok()) << order[i] << " " << order[i + 1];
    EXPECT_LT(CompareSemVer(*a, *b), 0) << order[i] << " < " << order[i + 1];
    EXPECT_GT(CompareSemVer(*b, *a), 0);
  }
  EXPECT_EQ(CompareSemVer(ParseSemVer("1.0.0+build.5").value(), ParseSemVer("1.0.0").value()), 0);
  for (const char* bad :
       {"1", "1.2", "01.2.3", "1.2.3-", "1.2.3-a..b", "1.2.3+", "a.b.c", "1.2.3.4", "1.2.3-$"}) {
    EXPECT_FALSE(ParseSemVer(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseSemVer("1.2", true).ok());
}

struct SatCase {
  Registry registry;
  const char* constraints;  // a rule's constraint part
  const char* version;
  bool satisfied;
};

TEST(ComparisonTest, Table) {
  const SatCase cases[] = {
      {Registry::kPypi, ">=2,<3", "2.0", true},
      {Registry::kPypi, ">=2,<3", "2.9.9", true},
      {Registry::kPypi, ">=2,<3", "3.0", false},
      {Registry::kPypi, ">=2,<3", "3.0rc1", false},  // <V excludes pre-releases of V
      {Registry::kPypi, ">=2,<3", "1.9", false},
      {Registry::kPypi, "==1.2.*", "1.2.7", true},
      {Registry::kPypi, "==1.2.*", "1.3", false},
      {Registry::kPypi, "!=1.2.*", "1.3", true},
      {Registry::kPypi, "~=1.4", "1.9", true},
      {Registry::kPypi, "~=1.4", "2.0", false},
      {Registry::kPypi, "~=1.4.2", "1.4.9", true},
      {Registry::kPypi, "~=1.4.2", "1.5", false},
      {Registry::kPypi, ">1.0", "1.0.post1", false},  // >V excludes post-releases of V
      {Registry::kPypi, ">1.0", "1.1", true},
      {Registry::kPypi, "==1.0", "1.0.0", true},
      {Registry::kPypi, "==1.0", "1.0+local", true},
      {Registry::kPypi, "!=1.0", "1.0", false},
      {Registry::kPypi, "<=1.0", "1.0", true},
      {Registry::kPypi, ">=1", "not-a-version", false},
      {Registry::kNpm, ">=1.3,<2", "1.3.0", true},
      {Registry::kNpm, ">=1.3,<2", "2.0.0", false},
      {Registry::kNpm, ">=1.3,<2", "1.2.9", false},
      {Registry::kNpm, "==1.*", "1.99.0", true},
      {Registry::kNpm, "==1.*", "2.0.0", false},
      {Registry::kNpm, "==1.2.3", "1.2.3", true},
      {Registry::kNpm, ">=1", "1.0", false},  // packument versions must be full SemVer
  };
  for (const auto& c : cases) {
    auto rule = ParseRule(std::string(RegistryName(c.registry)) + ":x" + c.constraints);
    ASSERT_TRUE(rule.ok()) << c.constraints << ": " << rule.error().message;
    EXPECT_EQ(SatisfiesAll(c.registry, rule->constraints, c.version), c.satisfied)
        << c.constraints << " vs " << c.version;
  }
}

TEST(RuleTest, ParsesGoodRules) {
  auto r = ParseRule("pypi:Foo_Bar.baz>=2, <3");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->registry, Registry::kPypi);
  EXPECT_EQ(r->name_pattern, "foo-bar-baz");
  ASSERT_EQ(r->constraints.size(), 2u);
  EXPECT_EQ(r->constraints[0].op, ">=");
  EXPECT_EQ(r->constraints[1].version, "3");
  for (const char* ok : {"pypi:*", "npm:*", "npm:@types/*", "npm:@scope/x>=1.2", "pypi:evil-*",
                         "npm:left-pad==1.*", "pypi:numpy~=1.26"}) {
    EXPECT_TRUE(ParseRule(ok).ok()) << ok;
  }
}

TEST(RuleTest, RefusesBadRulesNamingTheProblem) {
  struct Bad {
    const char* rule;
    const char* says;
  };
  const Bad cases[] = {
      {"requests", "no \"<registry>:\""},
      {"crates:serde", "registry \"crates\""},
      {"pypi:", "no name pattern"},
      {"pypi:req/uests", "character '/'"},
      {"pypi:x>=", "has no version"},
      {"pypi:x=>1", "unknown operator \"=>\""},
      {"pypi:x>=abc", "not a PEP 440 version"},
      {"pypi:x>=1.*", "wildcard only goes with == or !="},
      {"pypi:x~=1", "at least two release parts"},
      {"pypi:x===1.0", "arbitrary equality"},
      {"npm:Left-Pad", "lower-case"},
      {"npm:@scope", "@scope/name"},
      {"npm:x~=1.2", "PEP 440 operator"},
      {"npm:x>=1.2.3-", "not a SemVer version"},
      {"pypi:x>=1,", "has no comparison operator"},
  };
  for (const auto& c : cases) {
    auto r = ParseRule(c.rule);
    ASSERT_FALSE(r.ok()) << c.rule;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.rule << " -> " << r.error().message;
  }
}

TEST(RequirementTest, PypiForms) {
  auto r = ParseRequirement(Registry::kPypi,
                            "Requests[socks, security] >= 2.31, <3; python_version>'3'");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "requests");
  EXPECT_EQ(r->comparisons.size(), 2u);
  r = ParseRequirement(Registry::kPypi, "numpy==2.0.1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ExactVersion(r->comparisons).value_or(""), "2.0.1");
  r = ParseRequirement(Registry::kPypi, "pkg (>=1.0)");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->comparisons.size(), 1u);
  struct Bad {
    const char* raw;
    const char* says;
  };
  const Bad bad[] = {
      {"", "no package name"},
      {"pkg @ https://evil.example/pkg.whl", "direct URL"},
      {"./local/path", "letter or digit"},
      {"-e git+https://x", "letter or digit"},
      {"pkg[extra", "unclosed"},
      {"pkg===1.0", "arbitrary equality"},
      {"pkg>=1.0\nrm -rf /", "control character"},
      {"pkg junk", "expected a version specifier"},
      {"pkg>=nope", "not a PEP 440 version"},
  };
  for (const auto& b : bad) {
    auto e = ParseRequirement(Registry::kPypi, b.raw);
    ASSERT_FALSE(e.ok()) << b.raw;
    EXPECT_NE(e.error().message.find(b.says), std::string::npos)
        << b.raw << " -> " << e.error().message;
  }
  EXPECT_FALSE(ParseRequirement(Registry::kPypi, std::string(5000, 'a')).ok());
}

TEST(RequirementTest, NpmForms) {
  struct Good {
    const char* raw;
    const char* name;
    const char* in;   // a version inside the range
    const char* out;  // one outside ("" none)
  };
  const Good good[] = {
      {"left-pad", "left-pad", "1.3.0", ""},
      {"left-pad@1.3.0", "left-pad", "1.3.0", "1.3.1"},
      {"left-pad@^1.2.3", "left-pad", "1.9.0", "2.0.0"},
      {"x@^0.2.3", "x", "0.2.9", "0.3.0"},
      {"x@^0.0.3", "x", "0.0.3", "0.0.4"},
      {"x@~1.2.3", "x", "1.2.9", "1.3.0"},
      {"x@~1", "x", "1.9.0", "2.0.0"},
      {"x@1.x", "x", "1.4.0", "2.0.0"},
      {"x@1", "x", "1.4.0", "2.0.0"},
      {"x@>=1.0.0 <2", "x", "1.5.0", "2.0.0"},
      {"x@1.0.0 - 1.2.0", "x", "1.2.0", "1.2.1"},
      {"@scope/pkg@^2", "@scope/pkg", "2.1.0", "3.0.0"},
      {"x@latest", "x", "9.9.9", ""},
      {"x@*", "x", "0.0.1", ""},
  };
  for (const auto& g : good) {
    auto r = ParseRequirement(Registry::kNpm, g.raw);
    ASSERT_TRUE(r.ok()) << g.raw << ": " << r.error().message;
    EXPECT_EQ(r->name, g.name) << g.raw;
    EXPECT_TRUE(SatisfiesAll(Registry::kNpm, r->comparisons, g.in)) << g.raw << " " << g.in;
    if (*g.out) {
      EXPECT_FALSE(SatisfiesAll(Registry::kNpm, r->comparisons, g.out)) << g.raw << " " << g.out;
    }
  }
  for (const char* bad : {"", "Left-Pad", "x@1 || 2", "x@git+https://github.com/a/b", "x@file:../y",
                          "x@npm:other@1", "x@github:a/b", "x@^banana", "@scope", "x@next"}) {
    EXPECT_FALSE(ParseRequirement(Registry::kNpm, bad).ok()) << bad;
  }
}

PackagesConfig Policy(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
  PackagesConfig p;
  p.mode = PackagesMode::kOnline;
  p.registries = {"pypi", "npm"};
  p.allow = std::move(allow);
  p.deny = std::move(deny);
  return p;
}

std::optional<std::string> Check(const PackagesConfig& p, Registry r, const std::string& raw) {
  auto req = ParseRequirement(r, raw);
  EXPECT_TRUE(req.ok()) << raw;
  if (!req.ok()) return "unparsable";
  return CheckRequirement(p, *req);
}

TEST(CheckTest, DenyWinsAndNamesTheRule) {
  auto p = Policy({"pypi:*"}, {"pypi:evil-*"});
  auto why = Check(p, Registry::kPypi, "Evil_Pkg==1.0");
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "\"evil-pkg\" is denied by packages.deny rule \"pypi:evil-*\"");
  EXPECT_FALSE(Check(p, Registry::kPypi, "requests"));
  EXPECT_TRUE(CheckVersion(p, Registry::kPypi, "evil.pkg", "1.0"));
}

TEST(CheckTest, AllowListAndVersions) {
  auto p = Policy({"pypi:numpy>=2,<3", "npm:left-pad"}, {"pypi:numpy==2.1.0"});
  EXPECT_EQ(Check(p, Registry::kPypi, "requests").value_or(""),
            "\"requests\" is not in packages.allow");
  EXPECT_FALSE(Check(p, Registry::kPypi, "numpy"));
  EXPECT_FALSE(Check(p, Registry::kPypi, "numpy>=1.5"));  // overlaps [2, 3)
  EXPECT_FALSE(Check(p, Registry::kPypi, "numpy==2.0.2"));
  auto outside = Check(p, Registry::kPypi, "numpy<2");
  ASSERT_TRUE(outside);
  EXPECT_NE(outside->find("pypi:numpy>=2,<3"), std::string::npos) << *outside;
  EXPECT_TRUE(Check(p, Registry::kPypi, "numpy==3.0"));
  EXPECT_TRUE(Check(p, Registry::kPypi, "numpy==2.1.0"));  // the deny rule's version
  EXPECT_FALSE(CheckVersion(p, Registry::kPypi, "numpy", "2.0.0"));
  EXPECT_TRUE(CheckVersion(p, Registry::kPypi, "numpy", "2.1.0"));
  EXPECT_TRUE(CheckVersion(p, Registry::kPypi, "numpy", "1.26.4"));
  EXPECT_TRUE(CheckVersion(p, Registry::kPypi, "numpy", "garbage"));
  EXPECT_FALSE(Check(p, Registry::kNpm, "left-pad@^1"));
  EXPECT_TRUE(Check(p, Registry::kNpm, "right-pad"));
}

TEST(CheckTest, EmptyAllowAllowsNothingAndModesGate) {
  auto p = Policy({});
  EXPECT_EQ(Check(p, Registry::kPypi, "requests").value_or(""),
            "\"requests\" is not in packages.allow");
  p = Policy({"pypi:*"});
  p.mode = PackagesMode::kDisabled;
  auto why = Check(p, Registry::kPypi, "requests");
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("packages.mode = \"disabled\""), std::string::npos);
  p = Policy({"pypi:*"});
  p.registries = {"pypi"};
  why = Check(p, Registry::kNpm, "x");
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("not in packages.registries"), std::string::npos);
}

TEST(NameTest, NormalizeAndCheck) {
  EXPECT_EQ(NormalizePypiName("Foo__Bar.-baz"), "foo-bar-baz");
  EXPECT_EQ(CheckPypiName("ok-name.1"), "");
  EXPECT_NE(CheckPypiName("-bad"), "");
  EXPECT_NE(CheckPypiName("bad/../x"), "");
  EXPECT_NE(CheckPypiName(std::string(201, 'a')), "");
  EXPECT_EQ(CheckNpmName("@scope/x.y"), "");
  EXPECT_NE(CheckNpmName("_x"), "");
  EXPECT_NE(CheckNpmName("@scope/"), "");
  EXPECT_NE(CheckNpmName("x y"), "");
}

TEST(DistFilenameTest, WheelsAndSdists) {
  auto w = ParseDistFilename("My_Pkg-1.0.2-py3-none-any.whl", "my-pkg");
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->wheel);
  EXPECT_EQ(w->version, "1.0.2");
  w = ParseDistFilename("my_pkg-1.0-1build-cp311-cp311-manylinux_2_17_x86_64.whl", "my-pkg");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->version, "1.0");
  auto s = ParseDistFilename("my-pkg-2.0.tar.gz", "my-pkg");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->wheel);
  EXPECT_EQ(s->version, "2.0");
  EXPECT_FALSE(ParseDistFilename("other-1.0-py3-none-any.whl", "my-pkg"));
  EXPECT_FALSE(ParseDistFilename("my_pkg-1.0-py3-any.whl", "my-pkg"));
  EXPECT_FALSE(ParseDistFilename("../my_pkg-1.0-py3-none-any.whl", "my-pkg"));
  EXPECT_FALSE(ParseDistFilename("my-pkg-notaversion.tar.gz", "my-pkg"));
  EXPECT_FALSE(ParseDistFilename("my-pkg-1.0.exe", "my-pkg"));
}

TEST(SimplePageTest, ParsesAnchorsStrictly) {
  std::string sha(64, 'a');
  std::string html =
      "<html><body><a href=\"../../files/demo-1.0-py3-none-any.whl#sha256=" + sha +
      "\" data-requires-python=\"&gt;=3.8\" data-yanked=\"\">demo-1.0</a>"
      "<a href='https://cdn.example/x/demo-2.0.tar.gz'>demo-2.0.tar.gz</a></body></html>";
  auto files = ParseSimplePage(html, "http://127.0.0.1:9/simple/demo/");
  ASSERT_TRUE(files.ok()) << files.error().message;
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].url, "http://127.0.0.1:9/files/demo-1.0-py3-none-any.whl");
  EXPECT_EQ((*files)[0].sha256, sha);
  EXPECT_EQ((*files)[0].requires_python, ">=3.8");
  EXPECT_TRUE((*files)[0].yanked.has_value());
  EXPECT_EQ((*files)[1].sha256, "");
  EXPECT_EQ((*files)[1].filename, "demo-2.0.tar.gz");
  EXPECT_FALSE(ParseSimplePage("<a href=\"x#sha256=zz\">", "http://h/simple/x/").ok());
  EXPECT_FALSE(ParseSimplePage("<a href=\"javascript:alert(1)\">", "http://h/s/").ok());
  EXPECT_FALSE(ParseSimplePage("<a href=\"x", "http://h/s/").ok());
  EXPECT_FALSE(ParseSimplePage("<a href=\"x&bogus;\">", "http://h/s/").ok());
  std::string page = RenderSimplePage("demo", *files);
  EXPECT_NE(page.find("data-requires-python=\"&gt;=3.8\""), std::string::npos) << page;
  EXPECT_NE(page.find("/pypi/files/" + sha + "/demo-1.0-py3-none-any.whl#sha256=" + sha),
            std::string::npos);
}

TEST(DigestTest, KnownVectors) {
  Digest d(DigestAlgo::kSha256);
  d.Update("abc", 3);
  EXPECT_EQ(d.FinalHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Base64ToHex("AAEC").value_or(""), "000102");
  EXPECT_EQ(Base64ToHex("AAE=").value_or(""), "0001");
  EXPECT_FALSE(Base64ToHex("A*E="));
  EXPECT_FALSE(Base64ToHex("abc"));
}

}  // namespace
}  // namespace mcpcell::packages
