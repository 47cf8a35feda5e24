// TomlReader (see toml_reader.h): typed reads with ranges, and the error with its place.
#include "policies/toml_reader.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "base/units.h"

namespace mcpcell::policies {

void TomlReader::Fail(const toml::source_region& where, const std::string& path,
                      const std::string& what) {
  if (failed()) return;
  error_ = source_ + ":" + std::to_string(where.begin.line) + ":" +
           std::to_string(where.begin.column) + ": " + (path.empty() ? "" : path + ": ") + what;
}

void TomlReader::FailFile(const std::string& what) {
  if (failed()) return;
  error_ = source_ + ": " + what;
}

void TomlReader::OnlyKeys(const toml::table& table, const std::string& path,
                          std::initializer_list<const char*> known) {
  for (auto&& [key, node] : table) {
    const std::string_view name = key.str();  // clang 14 cannot capture a structured binding
    bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return name == k; });
    if (!ok) {
      std::string names;
      for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
      Fail(key.source(), Join(path, std::string(key.str())),
           "unknown key (known here: " + names + ")");
      return;
    }
  }
}

std::string TomlReader::TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    default:
      return "a date or time";
  }
}

std::string TomlReader::Shown(const toml::node& n) {
  if (auto s = n.as_string()) return "\"" + s->get() + "\"";
  std::ostringstream out;
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  n.visit([&](auto&& v) { out << v; });
  return out.str();
}

const toml::table* TomlReader::Table(const toml::table& parent, const std::string& path,
                                     const char* key) {
  const toml::node* n = parent.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) {
    Fail(n->source(), Join(path, key), "expected a table, got " + TypeName(*n));
    return nullptr;
  }
  return n->as_table();
}

void TomlReader::String(const toml::table& t, const std::string& path, const char* key,
                        std::string* out, std::initializer_list<const char*> allowed) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  if (!n->is_string()) {
    Fail(n->source(), Join(path, key), "expected a string, got " + TypeName(*n));
    return;
  }
  std::string v = n->as_string()->get();
  if (allowed.size() != 0 &&
      std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; })) {
    std::string names;
    for (const char* a : allowed) names += std::string(names.empty() ? "\"" : ", \"") + a + "\"";
    Fail(n->source(), Join(path, key), "expected one of " + names + ", got \"" + v + "\"");
    return;
  }
  *out = v;
}

void TomlReader::Bool(const toml::table& t, const std::string& path, const char* key, bool* out) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  if (!n->is_boolean()) {
    Fail(n->source(), Join(path, key), "expected true or false, got " + TypeName(*n));
    return;
  }
  *out = n->as_boolean()->get();
}

void TomlReader::Count(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
                       uint64_t hi, uint64_t* out) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  if (!n->is_integer()) {
    Fail(n->source(), Join(path, key),
         "expected an integer, got " + TypeName(*n) + " " + Shown(*n));
    return;
  }
  int64_t v = n->as_integer()->get();
  if (v < 0 || static_cast<uint64_t>(v) < lo || static_cast<uint64_t>(v) > hi) {
    Fail(n->source(), Join(path, key),
         "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
             std::to_string(v));
    return;
  }
  *out = static_cast<uint64_t>(v);
}

void TomlReader::Size(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
                      uint64_t hi, uint64_t* out) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  std::optional<uint64_t> v;
  if (n->is_string()) v = ParseSize(n->as_string()->get());
  if (!v) {
    Fail(n->source(), Join(path, key), "expected a size like \"512MiB\", got " + Shown(*n));
    return;
  }
  if (*v < lo || *v > hi) {
    Fail(n->source(), Join(path, key),
         "must be between " + FormatSize(lo) + " and " + FormatSize(hi) + ", got " + Shown(*n));
    return;
  }
  *out = *v;
}

void TomlReader::Duration(const toml::table& t, const std::string& path, const char* key,
                          std::chrono::seconds lo, std::chrono::seconds hi,
                          std::chrono::seconds* out) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  std::optional<std::chrono::seconds> v;
  if (n->is_string()) v = ParseDuration(n->as_string()->get());
  if (!v) {
    Fail(n->source(), Join(path, key),
         "expected a duration like \"30s\", \"15m\" or \"2h\", got " + Shown(*n));
    return;
  }
  if (*v < lo || *v > hi) {
    Fail(n->source(), Join(path, key),
         "must be between " + FormatDuration(lo) + " and " + FormatDuration(hi) + ", got " +
             Shown(*n));
    return;
  }
  *out = *v;
}

void TomlReader::Strings(const toml::table& t, const std::string& path, const char* key,
                         std::vector<std::string>* out,
                         const std::function<std::string(const std::string&)>& check) {
  const toml::node* n = t.get(key);
  if (!n || failed()) return;
  if (!n->is_array()) {
    Fail(n->source(), Join(path, key), "expected an array of strings, got " + TypeName(*n));
    return;
  }
  std::vector<std::string> v;
  std::set<std::string> seen;
  size_t i = 0;
  for (const toml::node& el : *n->as_array()) {
    std::string at = Join(path, key) + "[" + std::to_string(i++) + "]";
    if (!el.is_string()) {
      Fail(el.source(), at, "expected a string, got " + TypeName(el));
      return;
    }
    std::string s = el.as_string()->get();
    if (check) {
      if (std::string why = check(s); !why.empty()) {
        Fail(el.source(), at, why);
        return;
      }
    }
    if (!seen.insert(s).second) {
      Fail(el.source(), at, "\"" + s + "\" is listed twice");
      return;
    }
    v.push_back(s);
  }
  *out = std::move(v);
}

}  // namespace mcpcell::policies
