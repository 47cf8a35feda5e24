// Package rules and requirement parsing (see rules.h).
#include "packages/rules.h"

#include <algorithm>
#include <cctype>

#include "packages/versions.h"

namespace mcpcell::packages {

namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 200)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (s.size() > 200) out += "...";
  return out + "\"";
}

// '*' matches any run of characters (including none and '/').
bool GlobMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p, ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool IsOpChar(char c) { return c == '=' || c == '!' || c == '<' || c == '>' || c == '~'; }

// "==1.0, >=2" -> comparisons, each checked for `registry`.
Result<std::vector<Comparison>> ParseComparisons(Registry registry, std::string_view text) {
  std::vector<Comparison> out;
  if (Trim(text).empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part =
        Trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    size_t k = 0;
    while (k < part.size() && IsOpChar(part[k])) ++k;
    Comparison c{std::string(part.substr(0, k)), std::string(Trim(part.substr(k)))};
    if (c.op.empty()) return Error::Msg(Quoted(part) + " has no comparison operator");
    if (c.version.empty()) return Error::Msg(Quoted(part) + " has no version");
    if (c.op == "===")
      return Error::Msg("\"===\" (arbitrary equality) cannot be judged against the rules");
    std::string why = CheckComparison(registry, c);
    if (!why.empty()) return Error::Msg(why);
    out.push_back(std::move(c));
    if (out.size() > 32) return Error::Msg("more than 32 comparisons");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string CheckNpmNameChars(std::string_view part, bool allow_star) {
  if (part.empty()) return "an empty name part";
  if (part[0] == '.' || part[0] == '_') return "a name part starts with '.' or '_'";
  for (char c : part) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_' || c == '~' || (allow_star && c == '*');
    if (!ok) return std::string("character '") + c + "' (lower-case a-z, 0-9, - . _ ~ only)";
  }
  return "";
}

std::string CheckNpmPattern(std::string_view name, bool allow_star) {
  if (name.empty() || name.size() > 214) return "must be 1 to 214 characters";
  if (allow_star && name == "*") return "";
  if (name[0] == '@') {
    size_t slash = name.find('/');
    if (slash == std::string_view::npos) return "a scoped name is \"@scope/name\"";
    std::string why = CheckNpmNameChars(name.substr(1, slash - 1), allow_star);
    if (why.empty()) why = CheckNpmNameChars(name.substr(slash + 1), allow_star);
    return why;
  }
  return CheckNpmNameChars(name, allow_star);
}

bool NameMatches(const Rule& rule, std::string_view name) {
  return GlobMatch(rule.name_pattern, name);
}

std::vector<Rule> RulesFor(const std::vector<std::string>& texts, Registry registry,
                           std::string_view name) {
  std::vector<Rule> out;
  for (const std::string& text : texts) {
    auto rule = ParseRule(text);
    // The loader refused bad rules; one that does not parse here matches nothing.
    if (rule && rule->registry == registry && NameMatches(*rule, name))
      out.push_back(std::move(rule.value()));
  }
  return out;
}

std::string RuleList(const std::vector<Rule>& rules) {
  std::string out;
  for (const Rule& r : rules) out += (out.empty() ? "" : ", ") + Quoted(r.text);
  return out;
}

// "^1.2.3" and friends -> comparisons; refuses what it cannot judge.
Result<std::vector<Comparison>> NpmRangeToComparisons(std::string_view range) {
  range = Trim(range);
  std::vector<Comparison> out;
  if (range.empty() || range == "*" || range == "x" || range == "X" || range == "latest")
    return out;
  if (range.find("||") != std::string_view::npos)
    return Error::Msg("\"||\" ranges are not supported; ask for one range");
  auto full = [](std::string_view v) -> Result<SemVer> { return ParseSemVer(v, false); };
  auto str = [](const SemVer& v) {
    std::string s =
        std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
    for (size_t k = 0; k < v.prerelease.size(); ++k) s += (k == 0 ? "-" : ".") + v.prerelease[k];
    return s;
  };
  size_t hyphen = range.find(" - ");
  if (hyphen != std::string_view::npos) {
    auto lo = full(Trim(range.substr(0, hyphen)));
    auto hi = full(Trim(range.substr(hyphen + 3)));
    if (!lo) return lo.error();
    if (!hi) return hi.error();
    return std::vector<Comparison>{{">=", str(*lo)}, {"<=", str(*hi)}};
  }
  // Space-separated comparators, each "^V", "~V", ">=V", "<V", "=V", "V", "1.x".
  size_t pos = 0;
  while (pos < range.size()) {
    size_t end = range.find(' ', pos);
    if (end == std::string_view::npos) end = range.size();
    std::string_view item = range.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    std::string op;
    size_t k = 0;
    while (k < item.size() && (IsOpChar(item[k]) || item[k] == '^')) ++k;
    op = std::string(item.substr(0, k));
    std::string_view ver = item.substr(k);
    if (!ver.empty() && ver[0] == 'v') ver.remove_prefix(1);
    // x-ranges: "1.x", "1.2.*" -> prefix
    std::string prefix(ver);
    for (const char* x : {".x", ".X", ".*"}) {
      while (prefix.size() > 2 && prefix.ends_with(x)) prefix.resize(prefix.size() - 2);
    }
    auto v = ParseSemVer(prefix, true);
    if (!v) return Error::Msg(Quoted(item) + ": " + v.error().message);
    bool partial = v->parts < 3;
    if (op.empty() || op == "=") {
      if (partial) {
        out.push_back({"==", prefix + ".*"});
      } else {
        out.push_back({"==", str(*v)});
      }
    } else if (op == "^") {
      SemVer hi;
      if (v->major > 0 || v->parts == 1) {
        hi.major = v->major + 1;
      } else if (v->minor > 0 || v->parts == 2) {
        hi.minor = v->minor + 1;
      } else {
        hi.patch = v->patch + 1;
      }
      hi.prerelease = {"0"};
      out.push_back({">=", str(*v)});
      out.push_back({"<", str(hi)});
    } else if (op == "~") {
      SemVer hi;
      hi.major = v->major;
      if (v->parts == 1) {
        hi.major = v->major + 1;
      } else {
        hi.minor = v->minor + 1;
      }
      hi.prerelease = {"0"};
      out.push_back({">=", str(*v)});
      out.push_back({"<", str(hi)});
    } else if (op == ">=" || op == "<=" || op == ">" || op == "<") {
      out.push_back({op, str(*v)});
    } else {
      return Error::Msg(Quoted(item) + ": unknown range operator \"" + op + "\"");
    }
    if (out.size() > 32) return Error::Msg("more than 32 comparators");
  }
  return out;
}

Result<Requirement> ParsePypiRequirement(std::string_view raw) {
  Requirement req{Registry::kPypi, "", "", std::string(raw), {}};
  std::string_view s = raw;
  size_t semi = s.find(';');
  if (semi != std::string_view::npos) s = s.substr(0, semi);  // markers: not judged here
  s = Trim(s);
  size_t k = 0;
  while (k < s.size() && (IsAlnum(s[k]) || s[k] == '-' || s[k] == '_' || s[k] == '.')) ++k;
  std::string_view name = s.substr(0, k);
  std::string why = CheckPypiName(name);
  if (!why.empty()) return Error::Msg(Quoted(raw) + ": " + why);
  req.name = NormalizePypiName(name);
  std::string_view rest = Trim(s.substr(k));
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return Error::Msg(Quoted(raw) + ": unclosed \"[\"");
    for (char c : rest.substr(1, close - 1)) {
      if (!IsAlnum(c) && c != '-' && c != '_' && c != '.' && c != ',' && !IsSpace(c))
        return Error::Msg(Quoted(raw) + ": bad character in the extras");
    }
    rest = Trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest[0] == '@')
    return Error::Msg(Quoted(raw) + ": direct URL requirements are not allowed (use the index)");
  if (!rest.empty() && rest[0] == '(') {
    if (rest.back() != ')') return Error::Msg(Quoted(raw) + ": unclosed \"(\"");
    rest = Trim(rest.substr(1, rest.size() - 2));
  }
  if (!rest.empty() && !IsOpChar(rest[0]))
    return Error::Msg(Quoted(raw) + ": expected a version specifier after the name, got " +
                      Quoted(rest));
  auto comparisons = ParseComparisons(Registry::kPypi, rest);
  if (!comparisons) return Error::Msg(Quoted(raw) + ": " + comparisons.error().message);
  req.constraint = std::string(rest);
  req.comparisons = std::move(comparisons.value());
  return req;
}

Result<Requirement> ParseNpmRequirement(std::string_view raw) {
  Requirement req{Registry::kNpm, "", "", std::string(raw), {}};
  std::string_view s = Trim(raw);
  size_t at = s.find('@', s.empty() || s[0] != '@' ? 0 : 1);
  std::string_view name = s.substr(0, at);
  std::string_view range = at == std::string_view::npos ? "" : s.substr(at + 1);
  std::string why = CheckNpmName(name);
  if (!why.empty()) return Error::Msg(Quoted(raw) + ": " + why);
  if (range.find(':') != std::string_view::npos || range.find('/') != std::string_view::npos ||
      range.find('#') != std::string_view::npos)
    return Error::Msg(Quoted(raw) +
                      ": URLs, paths, git specs and aliases are not allowed (use a version "
                      "range)");
  auto comparisons = NpmRangeToComparisons(range);
  if (!comparisons) return Error::Msg(Quoted(raw) + ": " + comparisons.error().message);
  req.name = std::string(name);
  req.constraint = std::string(Trim(range));
  req.comparisons = std::move(comparisons.value());
  return req;
}

}  // namespace

std::string_view RegistryName(Registry r) { return r == Registry::kPypi ? "pypi" : "npm"; }

std::string NormalizePypiName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

std::string CheckPypiName(std::string_view name) {
  if (name.empty()) return "no package name";
  if (name.size() > 200) return "the name is longer than 200 characters";
  for (char c : name) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.')
      return std::string("character '") + c + "' is not allowed in a package name";
  }
  if (!IsAlnum(name.front()) || !IsAlnum(name.back()))
    return "a package name starts and ends with a letter or digit";
  return "";
}

std::string CheckNpmName(std::string_view name) {
  std::string why = CheckNpmPattern(name, false);
  return why.empty() ? why : "bad npm package name " + Quoted(name) + ": " + why;
}

Result<Rule> ParseRule(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error::Msg(Quoted(text) +
                      " is not a rule \"<registry>:<name pattern>[<constraints>]\": " + why);
  };
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad("no \"<registry>:\"");
  std::string_view reg = text.substr(0, colon);
  Rule rule{Registry::kPypi, "", {}, std::string(text)};
  if (reg == "npm") {
    rule.registry = Registry::kNpm;
  } else if (reg != "pypi") {
    return bad("registry " + Quoted(reg) + " (the package service serves pypi and npm)");
  }
  std::string_view rest = text.substr(colon + 1);
  size_t k = 0;
  while (k < rest.size() && !IsOpChar(rest[k]) && !IsSpace(rest[k])) ++k;
  std::string_view pattern = rest.substr(0, k);
  if (rule.registry == Registry::kPypi) {
    if (pattern.empty()) return bad("no name pattern");
    for (char c : pattern) {
      if (!IsAlnum(c) && c != '-' && c != '_' && c != '.' && c != '*')
        return bad(std::string("character '") + c + "' in the name pattern");
    }
    rule.name_pattern = NormalizePypiName(pattern);
  } else {
    std::string why = CheckNpmPattern(pattern, true);
    if (!why.empty()) return bad("name pattern " + Quoted(pattern) + ": " + why);
    rule.name_pattern = std::string(pattern);
  }
  auto comparisons = ParseComparisons(rule.registry, rest.substr(k));
  if (!comparisons) return bad(comparisons.error().message);
  rule.constraints = std::move(comparisons.value());
  return rule;
}

Result<Requirement> ParseRequirement(Registry registry, std::string_view raw) {
  if (raw.size() > 1024) return Error::Msg("a requirement longer than 1024 characters");
  for (char c : raw) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return Error::Msg(Quoted(raw) + ": control character in the requirement");
  }
  return registry == Registry::kPypi ? ParsePypiRequirement(raw) : ParseNpmRequirement(raw);
}

std::optional<std::string> CheckRegistryEnabled(const PackagesConfig& policy, Registry registry) {
  if (policy.mode == PackagesMode::kDisabled)
    return std::string("packages are disabled by the policy (packages.mode = \"disabled\")");
  std::string name(RegistryName(registry));
  if (std::find(policy.registries.begin(), policy.registries.end(), name) ==
      policy.registries.end())
    return "registry \"" + name + "\" is not in packages.registries";
  return std::nullopt;
}

std::optional<std::string> CheckRequirement(const PackagesConfig& policy,
                                            const Requirement& requirement) {
  if (auto off = CheckRegistryEnabled(policy, requirement.registry)) return off;
  const Registry r = requirement.registry;
  const std::string who = Quoted(requirement.name);
  std::optional<std::string> exact = ExactVersion(requirement.comparisons);
  for (const Rule& rule : RulesFor(policy.deny, r, requirement.name)) {
    if (rule.constraints.empty() || (exact && SatisfiesAll(r, rule.constraints, *exact)))
      return who + " is denied by packages.deny rule " + Quoted(rule.text);
  }
  std::vector<Rule> allow = RulesFor(policy.allow, r, requirement.name);
  if (allow.empty()) return who + " is not in packages.allow";
  for (const Rule& rule : allow) {
    if (exact ? SatisfiesAll(r, rule.constraints, *exact) &&
                    SatisfiesAll(r, requirement.comparisons, *exact)
              : MayOverlap(r, rule.constraints, requirement.comparisons))
      return std::nullopt;
  }
  return Quoted(requirement.raw) + " is outside what packages.allow permits (" + RuleList(allow) +
         ")";
}

std::optional<std::string> CheckVersion(const PackagesConfig& policy, Registry registry,
                                        std::string_view name, std::string_view version) {
  if (auto off = CheckRegistryEnabled(policy, registry)) return off;
  std::string key = registry == Registry::kPypi ? NormalizePypiName(name) : std::string(name);
  std::string who = Quoted(key) + " " + std::string(version.substr(0, 128));
  std::vector<Comparison> none;
  if (!SatisfiesAll(registry, none, version))
    return who + ": the version cannot be read as " +
           (registry == Registry::kPypi ? "PEP 440" : "SemVer");
  for (const Rule& rule : RulesFor(policy.deny, registry, key)) {
    if (SatisfiesAll(registry, rule.constraints, version))
      return who + " is denied by packages.deny rule " + Quoted(rule.text);
  }
  std::vector<Rule> allow = RulesFor(policy.allow, registry, key);
  if (allow.empty()) return Quoted(key) + " is not in packages.allow";
  for (const Rule& rule : allow) {
    if (SatisfiesAll(registry, rule.constraints, version)) return std::nullopt;
  }
  return who + " is outside what packages.allow permits (" + RuleList(allow) + ")";
}

}  // namespace mcpcell::packages
