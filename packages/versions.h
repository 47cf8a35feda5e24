// Version ordering for package rules: PEP 440 (pypi) and SemVer 2.0 (npm), and whether one
// version satisfies a rule's comparison ("==", "!=", ">=", "<=", ">", "<", "~=", "==X.*").
//
// Versions that do not parse never satisfy anything: the service drops files whose version
// it cannot judge instead of guessing. Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packages/rules.h"

namespace mcpcell::packages {

// PEP 440, normalized: "1!2.0.post1.dev3+local".
struct Pep440Version {
  uint64_t epoch = 0;
  std::vector<uint64_t> release;
  int pre_kind = -1;  // -1 none, 0 a, 1 b, 2 rc
  uint64_t pre = 0;
  std::optional<uint64_t> post;
  std::optional<uint64_t> dev;
  std::string local;  // after '+', lower case; ignored by ordering except as a tie-break
  bool is_prerelease() const { return pre_kind >= 0 || dev.has_value(); }
};
Result<Pep440Version> ParsePep440(std::string_view text);
int ComparePep440(const Pep440Version& a, const Pep440Version& b);  // <0, 0, >0

// SemVer 2.0 "1.2.3-beta.1+build"; partial "1" / "1.2" only where `allow_partial` (rules),
// missing parts are 0.
struct SemVer {
  uint64_t major = 0, minor = 0, patch = 0;
  std::vector<std::string> prerelease;
  int parts = 3;  // how many numeric parts were written
};
Result<SemVer> ParseSemVer(std::string_view text, bool allow_partial = false);
int CompareSemVer(const SemVer& a, const SemVer& b);

// Empty when `c` is a valid comparison for `registry`, else why not.
std::string CheckComparison(Registry registry, const Comparison& c);
// Whether `version` satisfies every comparison (false if `version` does not parse).
bool SatisfiesAll(Registry registry, const std::vector<Comparison>& comparisons,
                  std::string_view version);
// Whether some version could satisfy both lists (an interval test; "!=" is ignored, so the
// answer errs on "yes"). Used to refuse a request before anything is downloaded.
bool MayOverlap(Registry registry, const std::vector<Comparison>& a,
                const std::vector<Comparison>& b);
// "==1.2.3" (pypi, no wildcard) or an exact npm version: the single version, else nullopt.
std::optional<std::string> ExactVersion(const std::vector<Comparison>& comparisons);

}  // namespace mcpcell::packages
