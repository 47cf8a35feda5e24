// The parts of pip_install/npm_install that run without a cell: the cells' package
// environment, argument and policy checks (before anything runs), the parsers of what pip
// and npm report (input from the cell: hostile shapes are skipped, never trusted), and the
// result against the tools' outputSchema. The installs themselves: tests/e2e/test/
// packages.test.mjs.
#include <gtest/gtest.h>

#include <algorithm>

#include "mcp/schema.h"
#include "policies/package_env.h"
#include "tools/cell_tools.h"
#include "tools/package_install.h"

namespace mcpcell::tools {
namespace {

using policies::AddPackageEnv;
using policies::PackageCellEnv;
using policies::PackagesMode;
using policies::PackagesPolicy;
using policies::PackagesSummary;

PackagesPolicy Online() {
  PackagesPolicy p;
  p.mode = PackagesMode::kOnline;
  p.registries = {"pypi", "npm"};
  p.allow = {"pypi:tiny*", "pypi:evil*", "npm:tiny*"};
  p.deny = {"pypi:evil*"};
  return p;
}

bool Has(const std::vector<std::string>& env, const std::string& var) {
  return std::find(env.begin(), env.end(), var) != env.end();
}
bool HasName(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
}

std::string Text(const mcp::ToolResult& r) {
  std::string out;
  for (const auto& c : r.content) out += c.value("text", "");
  return out;
}

TEST(PackageCellEnv, PointsPipAndNpmAtTheServiceWithInstallTimeCodeOff) {
  auto env = PackageCellEnv(Online());
  EXPECT_TRUE(Has(env, "PIP_INDEX_URL=http://packages.mcpcell.internal/pypi/simple/"));
  EXPECT_TRUE(Has(env, "PIP_TRUSTED_HOST=packages.mcpcell.internal"));
  EXPECT_TRUE(Has(env, "PIP_ONLY_BINARY=:all:"));
  EXPECT_TRUE(Has(env, "npm_config_registry=http://packages.mcpcell.internal/npm/"));
  EXPECT_TRUE(Has(env, "npm_config_ignore_scripts=true"));
  EXPECT_TRUE(Has(env, "NODE_PATH=/workspace/node_modules"));
  EXPECT_TRUE(Has(env, "PIP_DISABLE_PIP_VERSION_CHECK=1"));
}

TEST(PackageCellEnv, ThePolicyMayAllowSdistsAndScripts) {
  PackagesPolicy p = Online();
  p.allow_sdist = true;
  p.allow_install_scripts = true;
  auto env = PackageCellEnv(p);
  EXPECT_FALSE(HasName(env, "PIP_ONLY_BINARY"));
  EXPECT_FALSE(HasName(env, "npm_config_ignore_scripts"));
  EXPECT_TRUE(HasName(env, "PIP_INDEX_URL"));
}

TEST(PackageCellEnv, OnlyTheEnabledRegistriesAndNothingWhenDisabled) {
  PackagesPolicy pypi_only = Online();
  pypi_only.registries = {"pypi"};
  pypi_only.allow = {"pypi:tiny*"};
  auto env = PackageCellEnv(pypi_only);
  EXPECT_TRUE(HasName(env, "PIP_INDEX_URL"));
  EXPECT_FALSE(HasName(env, "npm_config_registry"));
  EXPECT_FALSE(HasName(env, "NODE_PATH"));
  PackagesPolicy off = Online();
  off.mode = PackagesMode::kDisabled;
  env = PackageCellEnv(off);
  EXPECT_FALSE(HasName(env, "PIP_INDEX_URL"));
  EXPECT_FALSE(HasName(env, "npm_config_registry"));
  EXPECT_TRUE(env.empty());
  sandbox::CellSpec spec = sandbox::DefaultCellSpec("c1", "/tmp/state");
  const std::vector<std::string> before = spec.env;
  AddPackageEnv(off, spec);
  EXPECT_EQ(spec.env, before) << "a disabled policy changes nothing, PATH included";
}

TEST(AddPackageEnv, PutsTheVenvFirstInTheOnePath) {
  sandbox::CellSpec spec = sandbox::DefaultCellSpec("c1", "/tmp/state");
  AddPackageEnv(Online(), spec);
  int paths = 0;
  for (const auto& e : spec.env) {
    if (e.rfind("PATH=", 0) != 0) continue;
    ++paths;
    EXPECT_EQ(e.rfind("PATH=/workspace/.venv/bin:/workspace/node_modules/.bin:/usr/local/sbin:", 0),
              0u)
        << e;
    EXPECT_NE(e.find(":/usr/bin:"), std::string::npos) << e;
  }
  EXPECT_EQ(paths, 1);
  EXPECT_TRUE(Has(spec.env, "PIP_ONLY_BINARY=:all:"));
  PackagesPolicy npm_only = Online();
  npm_only.registries = {"npm"};
  npm_only.allow = {"npm:tiny*"};
  npm_only.deny = {};
  sandbox::CellSpec npm_spec = sandbox::DefaultCellSpec("c2", "/tmp/state");
  AddPackageEnv(npm_only, npm_spec);
  for (const auto& e : npm_spec.env) {
    if (e.rfind("PATH=", 0) == 0) {
      EXPECT_EQ(e.rfind("PATH=/workspace/node_modules/.bin:/usr/", 0), 0u) << e;
    }
  }
}

TEST(PackagesSummary, SaysTheModeRegistriesAndSafetySwitches) {
  PackagesPolicy p = Online();
  p.pypi_index = "https://mirror.example/simple/";
  std::string s = PackagesSummary(p);
  EXPECT_EQ(s.rfind("online", 0), 0u) << s;
  EXPECT_NE(s.find("https://mirror.example/simple/"), std::string::npos) << s;
  EXPECT_NE(s.find("wheels only"), std::string::npos) << s;
  p.mode = PackagesMode::kDisabled;
  EXPECT_EQ(PackagesSummary(p).rfind("disabled", 0), 0u);
}

std::vector<std::string> Entries(std::vector<std::string> packages) { return packages; }

TEST(ParsePackages, AcceptsRequirementsAndNamesTheBadEntry) {
  auto ok = ParsePackages(Entries({"tinyalpha==1.0", "tinybeta>=1,<2", "tinyx[extra]"}),
                          packages::Registry::kPypi, "pip_install");
  ASSERT_FALSE(ok.error) << Text(*ok.error);
  ASSERT_EQ(ok.requirements.size(), 3u);
  EXPECT_EQ(ok.requirements[0].name, "tinyalpha");

  auto option = ParsePackages(Entries({"tinyalpha", "--index-url=http://evil/"}),
                              packages::Registry::kPypi, "pip_install");
  ASSERT_TRUE(option.error);
  EXPECT_TRUE(option.error->is_error);
  EXPECT_NE(Text(*option.error).find("arguments.packages[1]"), std::string::npos);
  EXPECT_NE(Text(*option.error).find("options are not accepted"), std::string::npos);

  auto url = ParsePackages(Entries({"x @ https://example.com/x.whl"}), packages::Registry::kPypi,
                           "pip_install");
  ASSERT_TRUE(url.error);
  EXPECT_NE(Text(*url.error).find("arguments.packages[0]"), std::string::npos);

  auto git = ParsePackages(Entries({"tinynpm@1.0.0", "git+https://example.com/x.git"}),
                           packages::Registry::kNpm, "npm_install");
  ASSERT_TRUE(git.error);
  EXPECT_NE(Text(*git.error).find("arguments.packages[1]"), std::string::npos);

  auto empty = ParsePackages(Entries({}), packages::Registry::kPypi, "pip_install");
  ASSERT_TRUE(empty.error);
}

TEST(CheckPackagesPolicy, DisabledNamesThePolicyAndTheKey) {
  CellToolsConfig config;
  config.policy_name = "strict";
  config.packages = Online();
  config.packages.mode = PackagesMode::kDisabled;
  auto parsed = ParsePackages(Entries({"tinyalpha"}), packages::Registry::kPypi, "pip_install");
  auto r =
      CheckPackagesPolicy(config, packages::Registry::kPypi, parsed.requirements, "pip_install");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->is_error);
  EXPECT_NE(Text(*r).find("packages are disabled by policy strict (packages.mode = \"disabled\")"),
            std::string::npos)
      << Text(*r);
}

TEST(CheckPackagesPolicy, OneRefusedAndNothingRunsWithTheRuleNamed) {
  CellToolsConfig config;
  config.policy_name = "p";
  config.packages = Online();
  auto parsed = ParsePackages(Entries({"tinyalpha", "evilpkg==1", "requests"}),
                              packages::Registry::kPypi, "pip_install");
  ASSERT_FALSE(parsed.error);
  auto r =
      CheckPackagesPolicy(config, packages::Registry::kPypi, parsed.requirements, "pip_install");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->is_error);
  const mcp::Json& refused = r->structured_content["refused"];
  ASSERT_EQ(refused.size(), 2u) << refused.dump();
  EXPECT_EQ(refused[0]["package"], "evilpkg==1");
  EXPECT_NE(refused[0]["reason"].get<std::string>().find("\"pypi:evil*\""), std::string::npos);
  EXPECT_EQ(refused[1]["package"], "requests");
  EXPECT_NE(refused[1]["reason"].get<std::string>().find("packages.allow"), std::string::npos);
  EXPECT_NE(Text(*r).find("nothing was installed"), std::string::npos);
  EXPECT_TRUE(mcp::ValidateJson(InstallOutputSchema("sha256"), r->structured_content).empty());

  auto fine = ParsePackages(Entries({"tinyalpha"}), packages::Registry::kPypi, "pip_install");
  EXPECT_FALSE(
      CheckPackagesPolicy(config, packages::Registry::kPypi, fine.requirements, "pip_install"));
}

// A package tool is off (left out of tools/list, named in session_info) exactly when its
// call is refused before any package is looked at: one predicate, PackageToolOff.
TEST(ToolOffReason, PackageToolsAreOffExactlyWhenTheirCallsRefuseEveryPackage) {
  CellToolsConfig disabled;
  CellToolsConfig pypi_only;
  pypi_only.packages = Online();
  pypi_only.packages.registries = {"pypi"};
  CellToolsConfig both;
  both.packages = Online();
  CellToolsConfig no_pip = both;
  no_pip.enabled_tools = {"run_code", "npm_install"};
  for (const CellToolsConfig* config : {&disabled, &pypi_only, &both, &no_pip}) {
    for (const char* tool : {"pip_install", "npm_install"}) {
      const packages::Registry registry = *PackageToolRegistry(tool);
      const char* allowed = registry == packages::Registry::kPypi ? "tinyalpha" : "tinynpm";
      auto parsed = ParsePackages(Entries({allowed}), registry, tool);
      ASSERT_FALSE(parsed.error);
      const bool refused =
          CheckPackagesPolicy(*config, registry, parsed.requirements, tool).has_value();
      const bool package_off = PackageToolOff(*config, registry).has_value();
      EXPECT_EQ(refused, package_off) << tool;
      if (config->Enables(tool)) {
        EXPECT_EQ(ToolOffReason(*config, tool).has_value(), package_off);
      }
    }
  }
  EXPECT_EQ(ToolOffReason(disabled, "pip_install"), "packages.mode = \"disabled\"");
  EXPECT_EQ(ToolOffReason(pypi_only, "npm_install"),
            "registry \"npm\" is not in packages.registries");
  EXPECT_EQ(ToolOffReason(pypi_only, "pip_install"), std::nullopt);
  EXPECT_EQ(ToolOffReason(no_pip, "pip_install"), "not in tools.enabled");
  EXPECT_EQ(ToolOffReason(no_pip, "read_file"), "not in tools.enabled");
  EXPECT_EQ(ToolOffReason(both, "run_code"), std::nullopt);
  std::vector<std::string> off;
  for (const ToolOff& t : ToolsOff(disabled)) off.push_back(t.tool + ": " + t.reason);
  EXPECT_EQ(off, (std::vector<std::string>{"pip_install: packages.mode = \"disabled\"",
                                           "npm_install: packages.mode = \"disabled\""}));
  EXPECT_EQ(PackageToolRegistry("run_code"), std::nullopt);
}

TEST(ParsePipReport, ReadsPip23AndLaterShapes) {
  auto r = ParsePipReport(R"({"version": "1", "install": [
    {"metadata": {"name": "tinyalpha", "version": "1.0"}, "requested": true,
     "download_info": {"url": "http://packages.mcpcell.internal/pypi/files/ab/tinyalpha.whl",
                       "archive_info": {"hash": "sha256=abcd"}}},
    {"metadata": {"name": "tinybeta", "version": "1.2"},
     "download_info": {"url": "u", "archive_info": {"hash": "sha256=ffff",
                                                   "hashes": {"sha256": "0123"}}}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "tinyalpha");
  EXPECT_EQ((*r)[0].version, "1.0");
  EXPECT_EQ((*r)[0].hash, "abcd");
  EXPECT_EQ((*r)[0].source, "http://packages.mcpcell.internal/pypi/files/ab/tinyalpha.whl");
  EXPECT_EQ((*r)[1].hash, "0123");
}

TEST(ParsePipReport, HostileShapesAreSkippedNotTrusted) {
  auto r = ParsePipReport(R"({"install": [1, "x", {"metadata": {"name": 5}},
    {"metadata": {"name": "ok", "version": ["1"]}, "download_info": {"archive_info": 3}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "ok");
  EXPECT_EQ((*r)[0].version, "");
  EXPECT_FALSE(ParsePipReport("not json").ok());
  EXPECT_FALSE(ParsePipReport(R"({"install": {}})").ok());
}

TEST(ParseNpmLockfile, NamesScopedNestedAndSkipsLinks) {
  auto r = ParseNpmLockfile(R"({"name": "workspace", "lockfileVersion": 3, "packages": {
    "node_modules/tinynpm": {"version": "1.0.0", "resolved": "http://x/t.tgz", "integrity": "sha512-x"},
    "node_modules/@s/pkg": {"version": "2.0.0"},
    "node_modules/a/node_modules/b": {"version": "3.0.0"},
    "node_modules/linked": {"link": true, "resolved": "../linked"},
    "node_modules/": {"version": "9"},
    "node_modules/bad": 7,
    "node_modules/typed": {"version": 1}}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->at("tinynpm"), (LockedPackage{"1.0.0", "http://x/t.tgz", "sha512-x"}));
  EXPECT_EQ(r->at("@s/pkg").version, "2.0.0");
  EXPECT_EQ(r->at("node_modules/a/node_modules/b").version, "3.0.0");
  EXPECT_EQ(r->count("linked"), 0u);
  EXPECT_EQ(r->count("bad"), 0u);
  EXPECT_EQ(r->at("typed").version, "");
  EXPECT_EQ(r->size(), 4u);
  EXPECT_FALSE(ParseNpmLockfile("[]").ok());
}

TEST(PackageOfLine, TheQuotedNameOrTheArtifactsName) {
  EXPECT_EQ(PackageOfLine("package refused: \"tinysdist\": only an sdist exists"), "tinysdist");
  EXPECT_EQ(PackageOfLine("package failed: tinytamper-1.0-py3-none-any.whl: hash mismatch"),
            "tinytamper");
  EXPECT_EQ(PackageOfLine("package failed: tiny_under-2.1-py3-none-any.whl: upstream 500"),
            "tiny_under");
  EXPECT_EQ(PackageOfLine("package failed: /npm/-/files/sha512-ab/left-pad-1.3.0.tgz: x"),
            "left-pad");
  EXPECT_EQ(PackageOfLine("CONNECT example.com:443 refused: not in the allowlist"), "");
}

TEST(BuildInstallResult, FailureIsAnErrorAndNothingNewIsNot) {
  InstallSummary failed{.tool = "pip_install", .hash_key = "sha256"};
  failed.exit_code = 1;
  failed.refused.push_back({"tinysdist", "only an sdist exists"});
  failed.output = "ERROR: No matching distribution found for tinysdist\n";
  mcp::ToolResult r = BuildInstallResult(failed);
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(Text(r).find("nothing was installed"), std::string::npos);
  EXPECT_NE(Text(r).find("only an sdist exists"), std::string::npos);
  EXPECT_TRUE(mcp::ValidateJson(InstallOutputSchema("sha256"), r.structured_content).empty())
      << r.structured_content.dump();

  InstallSummary again{.tool = "pip_install", .hash_key = "sha256"};
  r = BuildInstallResult(again);
  EXPECT_FALSE(r.is_error);
  EXPECT_NE(Text(r).find("nothing new to install"), std::string::npos);

  InstallSummary npm{.tool = "npm_install", .hash_key = "integrity"};
  npm.installed.push_back({"tinynpm", "1.0.0", "http://x/t.tgz", "sha512-x"});
  r = BuildInstallResult(npm);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.structured_content["installed"][0]["integrity"], "sha512-x");
  EXPECT_TRUE(mcp::ValidateJson(InstallOutputSchema("integrity"), r.structured_content).empty())
      << r.structured_content.dump();
  EXPECT_FALSE(mcp::ValidateJson(InstallOutputSchema("sha256"), r.structured_content).empty())
      << "the schemas are strict about the hash key";
}

}  // namespace
}  // namespace mcpcell::tools
