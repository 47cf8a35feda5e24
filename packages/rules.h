// Package rules: what a policy's [packages] allow/deny lists say about one requested
// package or one concrete version of it (docs/packages.md, docs/policies.md).
//
// A rule is "<registry>:<name pattern>[<constraints>]": "pypi:requests", "pypi:numpy>=2,<3",
// "npm:@types/*", "pypi:*". Names are compared PEP 503 normalized (pypi) or as written
// (npm, lower case only). Constraints are comma-separated comparisons (==, !=, >=, <=, >,
// <, ~=, ==X.*) ordered by PEP 440 (pypi) or SemVer 2.0 (npm) (packages/versions.h).
// Deny wins over allow; an empty allow list allows nothing (fail closed).
// The policy loader parses every rule with ParseRule, so what loads is what is enforced.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "packages/config.h"

namespace mcpcell::packages {

enum class Registry { kPypi, kNpm };
std::string_view RegistryName(Registry r);  // "pypi", "npm"

// PEP 503: lower case, runs of [-_.] become one "-".
std::string NormalizePypiName(std::string_view name);
// Empty when valid, else why not. PEP 508 names: [A-Za-z0-9] at both ends, [-_.A-Za-z0-9]
// between, at most 200 characters.
std::string CheckPypiName(std::string_view name);
// npm names: "name" or "@scope/name", lower case [a-z0-9-._~], not starting with . or _,
// at most 214 characters.
std::string CheckNpmName(std::string_view name);

// One comparison of a constraint list ("==", "!=", ">=", "<=", ">", "<", "~=").
struct Comparison {
  std::string op;
  std::string version;  // "2.0", "1.*" (only with == and !=)
};

// A parsed rule from packages.allow or packages.deny.
struct Rule {
  Registry registry;
  std::string name_pattern;             // normalized for pypi; may contain '*'
  std::vector<Comparison> constraints;  // empty: every version
  std::string text;                     // the rule as written in the policy
};
// Rejects unknown registries, bad name patterns, bad operators or versions, naming the part.
Result<Rule> ParseRule(std::string_view text);

// A requested package: a pypi requirement ("requests==2.32.3", "numpy>=2",
// "pkg[extra]>=1; python_version>'3'") or an npm spec ("left-pad", "left-pad@1.3.0",
// "@scope/x@^1.2", "x@~1.2.3", "x@>=1 <2", "x@1.x"). URLs, paths, git specs, npm aliases,
// dist-tags other than "latest" and "||" ranges are refused: they cannot be judged.
struct Requirement {
  Registry registry;
  std::string name;        // normalized (pypi) / as written (npm)
  std::string constraint;  // pypi: the specifier ("==2.32.3", ">=2"); npm: the range; "" any
  std::string raw;         // the request as given
  std::vector<Comparison> comparisons;  // constraint in the rules' comparison form
};
Result<Requirement> ParseRequirement(Registry registry, std::string_view raw);

// nullopt: the requirement may be served for some version; else the refusal naming the rule:
// "\"evil-pkg\" is denied by packages.deny rule \"pypi:evil-*\"",
// "\"foo\" is not in packages.allow". Checks the mode and registries too.
std::optional<std::string> CheckRequirement(const PackagesConfig& policy,
                                            const Requirement& requirement);

// Whether one concrete version of a package may be served (nullopt: yes), with the reason.
// `name` is normalized for pypi by the function itself.
std::optional<std::string> CheckVersion(const PackagesConfig& policy, Registry registry,
                                        std::string_view name, std::string_view version);

// Whether the policy lets the service use `registry` at all (mode not disabled, listed in
// packages.registries); nullopt: yes, else the reason naming the policy key.
std::optional<std::string> CheckRegistryEnabled(const PackagesConfig& policy, Registry registry);

}  // namespace mcpcell::packages
