// PEP 440 and SemVer parsing, ordering and rule comparisons (see versions.h).
#include "packages/versions.h"

#include <algorithm>
#include <cctype>

namespace mcpcell::packages {

namespace {

bool ReadNumber(std::string_view s, size_t* i, uint64_t* out) {
  size_t start = *i;
  uint64_t v = 0;
  while (*i < s.size() && std::isdigit(static_cast<unsigned char>(s[*i]))) {
    if (*i - start >= 18) return false;  // keep it in range; no real version is that long
    v = v * 10 + static_cast<uint64_t>(s[*i] - '0');
    ++*i;
  }
  *out = v;
  return *i > start;
}

bool IsSep(char c) { return c == '.' || c == '-' || c == '_'; }

// Matches one of `words` (lower case) at s[*i], case-insensitively; returns its index.
int ReadWord(std::string_view s, size_t* i, std::initializer_list<const char*> words) {
  int index = 0;
  int best = -1;
  size_t best_len = 0;
  for (const char* w : words) {
    size_t n = std::char_traits<char>::length(w);
    if (s.size() - *i >= n && n > best_len) {
      bool eq = true;
      for (size_t k = 0; k < n; ++k) {
        if (std::tolower(static_cast<unsigned char>(s[*i + k])) != w[k]) eq = false;
      }
      if (eq) best = index, best_len = n;
    }
    ++index;
  }
  if (best >= 0) *i += best_len;
  return best;
}

}  // namespace

Result<Pep440Version> ParsePep440(std::string_view text) {
  std::string_view s = text;
  auto bad = [&](const std::string& why) {
    return Error::Msg("\"" + std::string(text) + "\" is not a PEP 440 version: " + why);
  };
  if (s.empty() || s.size() > 128) return bad("empty or longer than 128 characters");
  Pep440Version v;
  size_t i = 0;
  if (s[0] == 'v' || s[0] == 'V') i = 1;
  uint64_t n = 0;
  if (!ReadNumber(s, &i, &n)) return bad("it must start with a number");
  if (i < s.size() && s[i] == '!') {
    v.epoch = n;
    ++i;
    if (!ReadNumber(s, &i, &n)) return bad("a number must follow the epoch");
  }
  v.release.push_back(n);
  while (i + 1 < s.size() && s[i] == '.' && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
    ++i;
    if (!ReadNumber(s, &i, &n)) return bad("bad release segment");
    v.release.push_back(n);
    if (v.release.size() > 16) return bad("more than 16 release segments");
  }
  // Pre-release: [sep](a|alpha|b|beta|c|rc|pre|preview)[sep][N]
  {
    size_t j = i;
    if (j < s.size() && IsSep(s[j])) ++j;
    int kind = ReadWord(s, &j, {"a", "alpha", "b", "beta", "c", "rc", "pre", "preview"});
    if (kind >= 0) {
      static const int kKinds[] = {0, 0, 1, 1, 2, 2, 2, 2};
      v.pre_kind = kKinds[kind];
      if (j < s.size() && IsSep(s[j]) && j + 1 < s.size() &&
          std::isdigit(static_cast<unsigned char>(s[j + 1])))
        ++j;
      uint64_t p = 0;
      ReadNumber(s, &j, &p);
      v.pre = p;
      i = j;
    }
  }
  // Post-release: -N | [sep](post|rev|r)[sep][N]
  {
    size_t j = i;
    uint64_t p = 0;
    if (j < s.size() && s[j] == '-' && j + 1 < s.size() &&
        std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
      ++j;
      ReadNumber(s, &j, &p);
      v.post = p;
      i = j;
    } else {
      if (j < s.size() && IsSep(s[j])) ++j;
      if (ReadWord(s, &j, {"post", "rev", "r"}) >= 0) {
        if (j < s.size() && IsSep(s[j]) && j + 1 < s.size() &&
            std::isdigit(static_cast<unsigned char>(s[j + 1])))
          ++j;
        ReadNumber(s, &j, &p);
        v.post = p;
        i = j;
      }
    }
  }
  // Dev release: [sep]dev[sep][N]
  {
    size_t j = i;
    if (j < s.size() && IsSep(s[j])) ++j;
    if (ReadWord(s, &j, {"dev"}) >= 0) {
      if (j < s.size() && IsSep(s[j]) && j + 1 < s.size() &&
          std::isdigit(static_cast<unsigned char>(s[j + 1])))
        ++j;
      uint64_t d = 0;
      ReadNumber(s, &j, &d);
      v.dev = d;
      i = j;
    }
  }
  if (i < s.size() && s[i] == '+') {
    ++i;
    if (i == s.size()) return bad("empty local version");
    for (; i < s.size(); ++i) {
      char c = s[i];
      if (std::isalnum(static_cast<unsigned char>(c))) {
        v.local += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (IsSep(c) && !v.local.empty() && v.local.back() != '.') {
        v.local += '.';
      } else {
        return bad("bad character in the local version");
      }
    }
    if (v.local.back() == '.') return bad("local version ends with a separator");
  }
  if (i != s.size()) return bad("unexpected \"" + std::string(s.substr(i)) + "\"");
  return v;
}

int ComparePep440(const Pep440Version& a, const Pep440Version& b) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (int c = cmp(a.epoch, b.epoch)) return c;
  size_t n = std::max(a.release.size(), b.release.size());
  for (size_t k = 0; k < n; ++k) {
    uint64_t x = k < a.release.size() ? a.release[k] : 0;
    uint64_t y = k < b.release.size() ? b.release[k] : 0;
    if (int c = cmp(x, y)) return c;
  }
  // Pre-release phase: a dev-only release (1.0.dev1) sorts before any pre-release of 1.0;
  // no pre-release sorts after every pre-release.
  auto pre_key = [](const Pep440Version& v) -> std::pair<int, uint64_t> {
    if (v.pre_kind >= 0) return {v.pre_kind, v.pre};
    if (!v.post && v.dev) return {-1, 0};
    return {3, 0};
  };
  if (int c = cmp(pre_key(a), pre_key(b))) return c;
  auto post_key = [](const Pep440Version& v) -> int64_t {
    return v.post ? static_cast<int64_t>(*v.post) : -1;
  };
  if (int c = cmp(post_key(a), post_key(b))) return c;
  auto dev_key = [](const Pep440Version& v) -> uint64_t { return v.dev ? *v.dev : UINT64_MAX; };
  if (int c = cmp(dev_key(a), dev_key(b))) return c;
  return cmp(a.local, b.local);
}

Result<SemVer> ParseSemVer(std::string_view text, bool allow_partial) {
  auto bad = [&](const std::string& why) {
    return Error::Msg("\"" + std::string(text) + "\" is not a SemVer version: " + why);
  };
  if (text.empty() || text.size() > 256) return bad("empty or longer than 256 characters");
  SemVer v;
  size_t i = 0;
  uint64_t* parts[] = {&v.major, &v.minor, &v.patch};
  v.parts = 0;
  for (int k = 0; k < 3; ++k) {
    if (k > 0) {
      if (i >= text.size() || text[i] != '.') break;
      ++i;
    }
    size_t start = i;
    if (!ReadNumber(text, &i, parts[k])) return bad("expected a number");
    if (i - start > 1 && text[start] == '0') return bad("leading zero");
    v.parts = k + 1;
  }
  if (v.parts < 3 && !allow_partial) return bad("needs MAJOR.MINOR.PATCH");
  if (i < text.size() && text[i] == '-') {
    if (v.parts < 3) return bad("a pre-release needs MAJOR.MINOR.PATCH");
    ++i;
    std::string id;
    for (;; ++i) {
      if (i == text.size() || text[i] == '.' || text[i] == '+') {
        if (id.empty()) return bad("empty pre-release identifier");
        v.prerelease.push_back(id);
        id.clear();
        if (i == text.size() || text[i] == '+') break;
        continue;
      }
      char c = text[i];
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
        return bad("bad character in the pre-release");
      id += c;
    }
  }
  if (i < text.size() && text[i] == '+') {
    if (i + 1 == text.size()) return bad("empty build metadata");
    for (++i; i < text.size(); ++i) {
      char c = text[i];
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.')
        return bad("bad character in the build metadata");
    }
  }
  if (i != text.size()) return bad("unexpected \"" + std::string(text.substr(i)) + "\"");
  return v;
}

int CompareSemVer(const SemVer& a, const SemVer& b) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (int c = cmp(a.major, b.major)) return c;
  if (int c = cmp(a.minor, b.minor)) return c;
  if (int c = cmp(a.patch, b.patch)) return c;
  if (a.prerelease.empty() || b.prerelease.empty())
    return cmp(b.prerelease.empty() ? 1 : 0, a.prerelease.empty() ? 1 : 0) * -1;
  for (size_t k = 0; k < std::min(a.prerelease.size(), b.prerelease.size()); ++k) {
    const std::string& x = a.prerelease[k];
    const std::string& y = b.prerelease[k];
    bool xn = std::all_of(x.begin(), x.end(), ::isdigit);
    bool yn = std::all_of(y.begin(), y.end(), ::isdigit);
    if (xn && yn) {
      if (int c = cmp(x.size(), y.size())) return c;  // no leading zeros: longer is larger
      if (int c = cmp(x, y)) return c;
    } else if (xn != yn) {
      return xn ? -1 : 1;  // numeric identifiers sort before alphanumeric ones
    } else if (int c = cmp(x, y)) {
      return c;
    }
  }
  return cmp(a.prerelease.size(), b.prerelease.size());
}

namespace {

bool IsWildcard(const std::string& v) { return v.size() >= 2 && v.ends_with(".*"); }

// A version in a registry's ordering, parsed once.
struct AnyVersion {
  Registry registry;
  Pep440Version pep;
  SemVer sem;
};

std::optional<AnyVersion> Parse(Registry r, std::string_view text, bool rule_side) {
  AnyVersion v{r, {}, {}};
  if (r == Registry::kPypi) {
    auto p = ParsePep440(text);
    if (!p) return std::nullopt;
    v.pep = std::move(p.value());
  } else {
    auto s = ParseSemVer(text, rule_side);
    if (!s) return std::nullopt;
    v.sem = std::move(s.value());
  }
  return v;
}

int Compare(const AnyVersion& a, const AnyVersion& b) {
  return a.registry == Registry::kPypi ? ComparePep440(a.pep, b.pep) : CompareSemVer(a.sem, b.sem);
}

// The release prefix of a wildcard ("1.2.*") matches the candidate.
bool PrefixMatches(const AnyVersion& candidate, const AnyVersion& prefix) {
  if (candidate.registry == Registry::kPypi) {
    if (candidate.pep.epoch != prefix.pep.epoch) return false;
    for (size_t k = 0; k < prefix.pep.release.size(); ++k) {
      uint64_t x = k < candidate.pep.release.size() ? candidate.pep.release[k] : 0;
      if (x != prefix.pep.release[k]) return false;
    }
    return true;
  }
  const uint64_t c[] = {candidate.sem.major, candidate.sem.minor, candidate.sem.patch};
  const uint64_t p[] = {prefix.sem.major, prefix.sem.minor, prefix.sem.patch};
  for (int k = 0; k < prefix.sem.parts; ++k)
    if (c[k] != p[k]) return false;
  return true;
}

// The first version after every version with this prefix ("1.2" -> "1.3").
AnyVersion BumpPrefix(const AnyVersion& v, size_t keep) {
  AnyVersion out{v.registry, {}, {}};
  if (v.registry == Registry::kPypi) {
    out.pep.epoch = v.pep.epoch;
    out.pep.release.assign(v.pep.release.begin(), v.pep.release.begin() + keep);
    ++out.pep.release.back();
    out.pep.dev = 0;  // X.dev0 is the lowest version of X
  } else {
    uint64_t* p[] = {&out.sem.major, &out.sem.minor, &out.sem.patch};
    const uint64_t q[] = {v.sem.major, v.sem.minor, v.sem.patch};
    for (size_t k = 0; k < keep; ++k) *p[k] = q[k];
    ++*p[keep - 1];
    out.sem.prerelease = {"0"};  // X-0 is the lowest version of X
  }
  return out;
}

size_t ReleaseLength(const AnyVersion& v) {
  return v.registry == Registry::kPypi ? v.pep.release.size() : static_cast<size_t>(v.sem.parts);
}

bool SameRelease(const AnyVersion& a, const AnyVersion& b) {
  if (a.registry == Registry::kPypi) {
    Pep440Version x = a.pep, y = b.pep;
    x.pre_kind = y.pre_kind = -1;
    x.post = y.post = std::nullopt;
    x.dev = y.dev = std::nullopt;
    x.local = y.local = "";
    return ComparePep440(x, y) == 0;
  }
  return a.sem.major == b.sem.major && a.sem.minor == b.sem.minor && a.sem.patch == b.sem.patch;
}

bool IsPre(const AnyVersion& v) {
  return v.registry == Registry::kPypi ? v.pep.is_prerelease() : !v.sem.prerelease.empty();
}

bool Satisfies(const AnyVersion& candidate, const Comparison& c) {
  bool wildcard = IsWildcard(c.version);
  auto target = Parse(
      candidate.registry,
      wildcard ? std::string_view(c.version).substr(0, c.version.size() - 2) : c.version, true);
  if (!target) return false;
  AnyVersion cand = candidate;
  if (cand.registry == Registry::kPypi && target->pep.local.empty()) cand.pep.local.clear();
  int order = Compare(cand, *target);
  if (c.op == "==") return wildcard ? PrefixMatches(candidate, *target) : order == 0;
  if (c.op == "!=") return wildcard ? !PrefixMatches(candidate, *target) : order != 0;
  if (c.op == ">=") return order >= 0;
  if (c.op == "<=") return order <= 0;
  // PEP 440: "<V" excludes pre-releases of V, ">V" post-releases of V, unless V is one.
  if (c.op == "<")
    return order < 0 && !(IsPre(cand) && !IsPre(*target) && SameRelease(cand, *target));
  if (c.op == ">") {
    bool post_of_target = cand.registry == Registry::kPypi && cand.pep.post && !target->pep.post &&
                          SameRelease(cand, *target);
    return order > 0 && !post_of_target;
  }
  if (c.op == "~=") {
    size_t n = ReleaseLength(*target);
    return order >= 0 && Compare(cand, BumpPrefix(*target, n - 1)) < 0;
  }
  return false;
}

// A [lo, hi] interval of the version line; nullopt bounds are open ends.
struct Interval {
  std::optional<AnyVersion> lo, hi;
  bool lo_inclusive = true, hi_inclusive = true;
  void Lower(const AnyVersion& v, bool inclusive) {
    int c = lo ? Compare(v, *lo) : 1;
    if (c > 0 || (c == 0 && !inclusive)) lo = v, lo_inclusive = inclusive;
  }
  void Upper(const AnyVersion& v, bool inclusive) {
    int c = hi ? Compare(v, *hi) : -1;
    if (c < 0 || (c == 0 && !inclusive)) hi = v, hi_inclusive = inclusive;
  }
};

Interval ToInterval(Registry r, const std::vector<Comparison>& list) {
  Interval in;
  for (const Comparison& c : list) {
    bool wildcard = IsWildcard(c.version);
    auto v = Parse(r,
                   wildcard ? std::string_view(c.version).substr(0, c.version.size() - 2)
                            : std::string_view(c.version),
                   true);
    if (!v) continue;
    if (c.op == "==" && wildcard) {
      in.Lower(*v, true);
      in.Upper(BumpPrefix(*v, ReleaseLength(*v)), false);
    } else if (c.op == "==") {
      in.Lower(*v, true);
      in.Upper(*v, true);
    } else if (c.op == ">=") {
      in.Lower(*v, true);
    } else if (c.op == ">") {
      in.Lower(*v, false);
    } else if (c.op == "<=") {
      in.Upper(*v, true);
    } else if (c.op == "<") {
      in.Upper(*v, false);
    } else if (c.op == "~=") {
      in.Lower(*v, true);
      in.Upper(BumpPrefix(*v, ReleaseLength(*v) - 1), false);
    }
  }
  return in;
}

}  // namespace

std::string CheckComparison(Registry registry, const Comparison& c) {
  static const char* kOps[] = {"==", "!=", ">=", "<=", ">", "<", "~="};
  if (std::none_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return c.op == op; }))
    return "unknown operator \"" + c.op + "\" (known: ==, !=, >=, <=, >, <, ~=)";
  bool wildcard = IsWildcard(c.version);
  if (wildcard && c.op != "==" && c.op != "!=")
    return "\"" + c.op + c.version + "\": a \".*\" wildcard only goes with == or !=";
  std::string_view v = c.version;
  if (wildcard) v.remove_suffix(2);
  if (registry == Registry::kPypi) {
    auto p = ParsePep440(v);
    if (!p) return p.error().message;
    if (wildcard && (p->pre_kind >= 0 || p->post || p->dev || !p->local.empty()))
      return "\"" + c.version + "\": a wildcard needs a plain release prefix like 1.2.*";
    if (c.op == "~=" && p->release.size() < 2)
      return "\"~=" + c.version + "\": ~= needs at least two release parts (~=1.4)";
  } else {
    if (c.op == "~=") return "\"~=\" is a PEP 440 operator; npm rules use >=, < and ==X.*";
    auto s = ParseSemVer(v, true);
    if (!s) return s.error().message;
    if (wildcard && !s->prerelease.empty())
      return "\"" + c.version + "\": a wildcard needs a plain release prefix like 1.2.*";
  }
  return "";
}

bool SatisfiesAll(Registry registry, const std::vector<Comparison>& comparisons,
                  std::string_view version) {
  auto v = Parse(registry, version, false);
  if (!v) return false;
  return std::all_of(comparisons.begin(), comparisons.end(),
                     [&](const Comparison& c) { return Satisfies(*v, c); });
}

bool MayOverlap(Registry registry, const std::vector<Comparison>& a,
                const std::vector<Comparison>& b) {
  std::vector<Comparison> both = a;
  both.insert(both.end(), b.begin(), b.end());
  Interval in = ToInterval(registry, both);
  if (!in.lo || !in.hi) return true;
  int c = Compare(*in.lo, *in.hi);
  return c < 0 || (c == 0 && in.lo_inclusive && in.hi_inclusive);
}

std::optional<std::string> ExactVersion(const std::vector<Comparison>& comparisons) {
  for (const Comparison& c : comparisons) {
    if (c.op == "==" && !IsWildcard(c.version)) return c.version;
  }
  return std::nullopt;
}

}  // namespace mcpcell::packages
