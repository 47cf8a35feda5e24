#include "mcp/schema.h"

#include <cmath>
#include <functional>
#include <regex>
#include <set>

namespace mcp {
namespace {

// `x-mcp-header` (2026-07-28) names the Mcp-Param-{Name} header an argument is mirrored to:
// a header name's token characters, on a primitive argument. "" when fine, else why not.
std::string CheckMcpHeader(const Json& name, const Json& type) {
  static const std::string kTokenChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~";
  if (!name.is_string() || name.get<std::string>().empty() ||
      name.get<std::string>().find_first_not_of(kTokenChars) != std::string::npos) {
    return "\"x-mcp-header\" must be a non-empty HTTP header name token, got " + name.dump();
  }
  if (!type.is_string() ||
      (type != "string" && type != "integer" && type != "number" && type != "boolean")) {
    return "\"x-mcp-header\" marks a string, integer, number or boolean argument only";
  }
  return "";
}

const std::set<std::string, std::less<>> kTypes = {"object",  "string", "integer", "number",
                                                   "boolean", "array",  "null"};
const std::set<std::string, std::less<>> kKnownKeywords = {"type",
                                                           "properties",
                                                           "required",
                                                           "additionalProperties",
                                                           "enum",
                                                           "const",
                                                           "minimum",
                                                           "maximum",
                                                           "exclusiveMinimum",
                                                           "exclusiveMaximum",
                                                           "minLength",
                                                           "maxLength",
                                                           "pattern",
                                                           "minItems",
                                                           "maxItems",
                                                           "items",
                                                           "description",
                                                           "title",
                                                           "default",
                                                           "examples",
                                                           "format",
                                                           "$schema",
                                                           "$comment",
                                                           "$id",
                                                           "x-mcp-header"};
const std::set<std::string, std::less<>> kCompositeKeywords = {"$ref",
                                                               "anyOf",
                                                               "oneOf",
                                                               "allOf",
                                                               "not",
                                                               "if",
                                                               "then",
                                                               "else",
                                                               "$defs",
                                                               "definitions",
                                                               "nullable",
                                                               "patternProperties",
                                                               "dependentSchemas",
                                                               "prefixItems"};

std::string Preview(const std::string& s) {
  constexpr size_t kMax = 40;
  Json j = s.size() > kMax ? s.substr(0, kMax) + "..." : s;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// "string \"x\"", "integer 3", "object", ... : what the model sent, briefly.
std::string Describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "string " + Preview(v.get<std::string>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer " + v.dump();
    case Json::value_t::number_float:
      return "number " + v.dump();
    case Json::value_t::boolean:
      return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    default:
      return "a value of unknown type";
  }
}

bool IsType(const Json& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return true;  // unknown types are refused at registration
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Short(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

// The schema `ref` points to within `root`: "#", "#/json/pointer" or "#anchor" (an
// $anchor anywhere in the schema); nullptr when it names nothing there.
const Json* Resolve(const Json& root, const std::string& ref) {
  if (ref == "#") return &root;
  if (ref.rfind("#/", 0) == 0) {
    try {
      const Json& target = root.at(Json::json_pointer(ref.substr(1)));
      return &target;
    } catch (const Json::exception&) {
      return nullptr;
    }
  }
  if (ref.size() < 2 || ref[0] != '#') return nullptr;  // only references within the schema
  const std::string anchor = ref.substr(1);
  const Json* found = nullptr;
  std::function<void(const Json&)> walk = [&](const Json& node) {
    if (found) return;
    if (node.is_object()) {
      if (auto a = node.find("$anchor"); a != node.end() && *a == anchor) {
        found = &node;
        return;
      }
      for (const auto& [key, child] : node.items()) {
        if (key != "enum" && key != "const" && key != "default" && key != "examples") walk(child);
      }
    } else if (node.is_array()) {
      for (const Json& child : node) walk(child);
    }
  };
  walk(root);
  return found;
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}
  std::vector<std::string> errors;

  void Check(const Json& s, const Json& v, const std::string& path) {
    if (s.is_boolean() && !s.get<bool>()) Add(path, "no value is allowed here (schema false)");
    if (!s.is_object()) return;  // `true` / `{}`: anything goes
    if (!CheckType(s, v, path)) return;
    CheckComposition(s, v, path);
    if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
      if (std::find(e->begin(), e->end(), v) == e->end()) {
        Add(path, "must be one of " + Short(*e) + ", got " + Describe(v));
      }
    }
    if (auto c = s.find("const"); c != s.end() && *c != v) {
      Add(path, "must be " + Short(*c) + ", got " + Describe(v));
    }
    if (v.is_number()) CheckNumber(s, v, path);
    if (v.is_string()) CheckString(s, v.get<std::string>(), path);
    if (v.is_array()) CheckArray(s, v, path);
    if (v.is_object()) CheckObject(s, v, path);
  }

 private:
  static constexpr int kMaxRefDepth = 64;  // a $ref cycle must end in an error, not a crash

  // "type": one name or an array of them (2020-12 unions such as ["string", "null"]).
  bool CheckType(const Json& s, const Json& v, const std::string& path) {
    auto t = s.find("type");
    if (t == s.end()) return true;
    if (t->is_string() && !IsType(v, t->get<std::string>())) {
      Add(path, "expected " + t->get<std::string>() + ", got " + Describe(v));
      return false;
    }
    if (t->is_array()) {
      for (const Json& name : *t) {
        if (name.is_string() && IsType(v, name.get<std::string>())) return true;
      }
      Add(path, "expected one of " + Short(*t) + ", got " + Describe(v));
      return false;
    }
    return true;
  }

  // The violations of `v` against `s` alone, for the subschemas of anyOf, oneOf, not, if.
  std::vector<std::string> Trial(const Json& s, const Json& v, const std::string& path) {
    Validator trial(root_);
    trial.depth_ = depth_;
    trial.Check(s, v, path);
    return std::move(trial.errors);
  }

  void CheckComposition(const Json& s, const Json& v, const std::string& path) {
    if (auto r = s.find("$ref"); r != s.end() && r->is_string()) {
      const Json* target = Resolve(root_, r->get<std::string>());
      if (!target) {
        Add(path, "the schema's $ref " + r->dump() + " names nothing in the schema");
      } else if (depth_ >= kMaxRefDepth) {
        Add(path, "the schema's $ref " + r->dump() + " nests deeper than 64 (a cycle?)");
      } else {
        ++depth_;
        Check(*target, v, path);
        --depth_;
      }
    }
    if (auto all = s.find("allOf"); all != s.end() && all->is_array()) {
      for (const Json& sub : *all) Check(sub, v, path);
    }
    if (auto any = s.find("anyOf"); any != s.end() && any->is_array()) {
      std::string why;
      bool matched = false;
      for (size_t i = 0; i < any->size() && !matched; ++i) {
        auto e = Trial((*any)[i], v, path);
        matched = e.empty();
        why += (i ? "; " : "") + ("#" + std::to_string(i) + ": " + JoinErrors(e));
      }
      if (!matched) Add(path, "must match at least one schema of anyOf (" + why + ")");
    }
    if (auto one = s.find("oneOf"); one != s.end() && one->is_array()) {
      std::string why;
      size_t matches = 0;
      for (size_t i = 0; i < one->size(); ++i) {
        auto e = Trial((*one)[i], v, path);
        matches += e.empty() ? 1 : 0;
        if (!e.empty())
          why += (why.empty() ? "" : "; ") + ("#" + std::to_string(i) + ": " + JoinErrors(e));
      }
      if (matches == 0)
        Add(path, "must match exactly one schema of oneOf, matched none (" + why + ")");
      if (matches > 1) {
        Add(path, "must match exactly one schema of oneOf, matched " + std::to_string(matches));
      }
    }
    if (auto n = s.find("not"); n != s.end() && Trial(*n, v, path).empty()) {
      Add(path, "must not match the schema " + Short(*n) + " (\"not\")");
    }
    if (auto cond = s.find("if"); cond != s.end()) {
      const bool holds = Trial(*cond, v, path).empty();
      if (auto branch = s.find(holds ? "then" : "else"); branch != s.end()) {
        Check(*branch, v, path);
      }
    }
  }

  const Json& root_;
  int depth_ = 0;

  void Add(const std::string& path, const std::string& message) {
    errors.push_back(path + ": " + message);
  }

  void CheckNumber(const Json& s, const Json& v, const std::string& path) {
    double d = v.get<double>();
    auto bound = [&](const char* key, auto fails, const char* words) {
      auto it = s.find(key);
      if (it == s.end() || !it->is_number()) return;
      if (fails(d, it->get<double>())) {
        Add(path, std::string("must be ") + words + " " + it->dump() + ", got " + v.dump());
      }
    };
    bound(
        "minimum", [](double x, double b) { return x < b; }, ">=");
    bound(
        "maximum", [](double x, double b) { return x > b; }, "<=");
    bound(
        "exclusiveMinimum", [](double x, double b) { return x <= b; }, ">");
    bound(
        "exclusiveMaximum", [](double x, double b) { return x >= b; }, "<");
  }

  void CheckString(const Json& s, const std::string& str, const std::string& path) {
    size_t len = CodePoints(str);
    if (auto m = s.find("minLength");
        m != s.end() && m->is_number_integer() && *m >= 0 && len < m->get<size_t>()) {
      Add(path, "must be at least " + m->dump() + " characters long, got " + std::to_string(len));
    }
    if (auto m = s.find("maxLength");
        m != s.end() && m->is_number_integer() && *m >= 0 && len > m->get<size_t>()) {
      Add(path, "must be at most " + m->dump() + " characters long, got " + std::to_string(len));
    }
    if (auto p = s.find("pattern"); p != s.end() && p->is_string()) {
      try {
        if (!std::regex_search(str, std::regex(p->get<std::string>(), std::regex::ECMAScript))) {
          Add(path, "must match the pattern " + p->dump() + ", got " + Describe(str));
        }
      } catch (const std::regex_error&) {
        Add(path, "the schema's pattern " + p->dump() + " is not a valid regular expression");
      }
    }
  }

  void CheckArray(const Json& s, const Json& v, const std::string& path) {
    if (auto m = s.find("minItems");
        m != s.end() && m->is_number_integer() && *m >= 0 && v.size() < m->get<size_t>()) {
      Add(path, "must have at least " + m->dump() + " items, got " + std::to_string(v.size()));
    }
    if (auto m = s.find("maxItems");
        m != s.end() && m->is_number_integer() && *m >= 0 && v.size() > m->get<size_t>()) {
      Add(path, "must have at most " + m->dump() + " items, got " + std::to_string(v.size()));
    }
    if (auto items = s.find("items"); items != s.end()) {
      for (size_t i = 0; i < v.size(); ++i) {
        Check(*items, v[i], path + "[" + std::to_string(i) + "]");
      }
    }
  }

  void CheckObject(const Json& s, const Json& v, const std::string& path) {
    const Json* props = nullptr;
    if (auto p = s.find("properties"); p != s.end() && p->is_object()) props = &*p;
    if (auto r = s.find("required"); r != s.end() && r->is_array()) {
      for (const Json& name : *r) {
        if (name.is_string() && !v.contains(name.get<std::string>())) {
          Add(path + "." + name.get<std::string>(), "is required but missing");
        }
      }
    }
    auto additional = s.find("additionalProperties");
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string child = path + "." + it.key();
      if (props && props->contains(it.key())) {
        Check((*props)[it.key()], it.value(), child);
      } else if (additional != s.end() && additional->is_boolean() && !additional->get<bool>()) {
        std::string allowed;
        if (props) {
          for (auto p = props->begin(); p != props->end(); ++p) {
            allowed += (allowed.empty() ? "" : ", ") + p.key();
          }
        }
        Add(child, "unknown field (allowed: " + (allowed.empty() ? "none" : allowed) + ")");
      } else if (additional != s.end() && additional->is_object()) {
        Check(*additional, it.value(), child);
      }
    }
  }
};

// The JSON Schema 2020-12 keywords that CheckSchema accepts beyond the flat ones, and the
// validator applies (schema.h).
const std::set<std::string, std::less<>> k2020Keywords = {
    "$ref",  "$defs", "definitions", "$anchor", "allOf", "anyOf",
    "oneOf", "not",   "if",          "then",    "else"};

class SchemaChecker {
 public:
  // `root`: the whole schema ($ref targets); `flat`: CheckFlatSchema's rules, else
  // CheckSchema's.
  SchemaChecker(const Json& root, bool flat) : root_(root), flat_(flat) {}
  std::string error;

  bool Check(const Json& s, const std::string& path) {
    if (!flat_ && s.is_boolean()) return true;  // 2020-12: true / false are schemas
    if (!s.is_object()) return Fail(path, "a schema must be a JSON object");
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& key = it.key();
      if (!flat_ && k2020Keywords.count(key)) continue;
      if (kCompositeKeywords.count(key)) {
        return Fail(path, "\"" + key +
                              (flat_ ? "\" is not supported: schemas must be flat (no $ref, "
                                       "anyOf, oneOf, allOf, not, nullable)"
                                     : "\" is not supported by this server's validator"));
      }
      if (!kKnownKeywords.count(key)) return Fail(path, "unknown keyword \"" + key + "\"");
    }
    if (!flat_ && !Check2020(s, path)) return false;
    auto type = s.find("type");
    if (type != s.end()) {
      if (type->is_array() && flat_) {
        return Fail(path,
                    "type arrays (e.g. [\"string\", \"null\"]) are not supported; use one type");
      }
      if (type->is_array()) {
        if (type->empty()) return Fail(path, "\"type\" must not be an empty array");
        for (const Json& t : *type) {
          if (!t.is_string() || !kTypes.count(t.get<std::string>())) {
            return Fail(path, "\"type\" lists an unknown type " + Short(t));
          }
        }
        type = s.end();  // x-mcp-header needs one primitive type; checked below as absent
      } else if (!type->is_string() || !kTypes.count(type->get<std::string>())) {
        return Fail(path,
                    "\"type\" must be one of object, string, integer, number, boolean, "
                    "array, null; got " +
                        Short(*type));
      }
    }
    if (type == s.end() && s.contains("type")) {
      if (s.contains("x-mcp-header")) {
        return Fail(path,
                    "\"x-mcp-header\" marks a string, integer, number or boolean "
                    "argument only");
      }
      return CheckRest(s, path, /*is_array=*/false);
    }
    if (auto h = s.find("x-mcp-header"); h != s.end()) {
      if (std::string why = CheckMcpHeader(*h, type == s.end() ? Json() : *type); !why.empty()) {
        return Fail(path, why);
      }
    }
    if (auto e = s.find("enum"); e != s.end() && (!e->is_array() || e->empty())) {
      return Fail(path, "\"enum\" must be a non-empty array");
    }
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) return Fail(path, "\"pattern\" must be a string");
      try {
        std::regex re(p->get<std::string>(), std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        return Fail(path, "\"pattern\" " + p->dump() + " is not a valid regular expression");
      }
    }
    for (const char* key : {"minLength", "maxLength", "minItems", "maxItems"}) {
      if (auto m = s.find(key);
          m != s.end() && !(m->is_number_integer() && m->get<int64_t>() >= 0)) {
        return Fail(path, "\"" + std::string(key) + "\" must be a non-negative integer");
      }
    }
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (auto m = s.find(key); m != s.end() && !m->is_number()) {
        return Fail(path, "\"" + std::string(key) + "\" must be a number");
      }
    }
    return CheckRest(s, path, type != s.end() && *type == "array");
  }

 private:
  bool CheckRest(const Json& s, const std::string& path, bool is_array) {
    if (is_array && !s.contains("items")) {
      return Fail(path, "an array schema needs \"items\"");
    }
    if (auto items = s.find("items"); items != s.end() && !Check(*items, path + ".items")) {
      return false;
    }
    return CheckObjectKeywords(s, path);
  }

  // $ref resolves within the schema; $defs hold schemas; composition keywords hold schemas.
  bool Check2020(const Json& s, const std::string& path) {
    if (auto r = s.find("$ref"); r != s.end()) {
      if (!r->is_string() || !Resolve(root_, r->get<std::string>())) {
        return Fail(path, "\"$ref\" " + Short(*r) +
                              " must name a schema within this one (\"#/$defs/name\" or "
                              "\"#anchor\")");
      }
    }
    if (auto a = s.find("$anchor"); a != s.end() && !a->is_string()) {
      return Fail(path, "\"$anchor\" must be a string");
    }
    for (const char* key : {"$defs", "definitions"}) {
      auto defs = s.find(key);
      if (defs == s.end()) continue;
      if (!defs->is_object()) return Fail(path, "\"" + std::string(key) + "\" must be an object");
      for (const auto& [name, sub] : defs->items()) {
        if (!Check(sub, path + "." + key + "." + name)) return false;
      }
    }
    for (const char* key : {"allOf", "anyOf", "oneOf"}) {
      auto list = s.find(key);
      if (list == s.end()) continue;
      if (!list->is_array() || list->empty()) {
        return Fail(path, "\"" + std::string(key) + "\" must be a non-empty array of schemas");
      }
      for (size_t i = 0; i < list->size(); ++i) {
        if (!Check((*list)[i], path + "." + key + "[" + std::to_string(i) + "]")) return false;
      }
    }
    for (const char* key : {"not", "if", "then", "else"}) {
      auto sub = s.find(key);
      if (sub != s.end() && !Check(*sub, path + "." + key)) return false;
    }
    return true;
  }

  bool Fail(const std::string& path, const std::string& message) {
    error = path + ": " + message;
    return false;
  }

  bool CheckObjectKeywords(const Json& s, const std::string& path) {
    auto props = s.find("properties");
    if (props != s.end()) {
      if (!props->is_object()) return Fail(path, "\"properties\" must be an object");
      for (auto it = props->begin(); it != props->end(); ++it) {
        if (!Check(it.value(), path + ".properties." + it.key())) return false;
      }
    }
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return Fail(path, "\"required\" must be an array of property names");
      for (const Json& name : *r) {
        if (!name.is_string()) return Fail(path, "\"required\" must list property names");
        // A 2020-12 subschema may require what a sibling schema declares
        // (anyOf: [{required: [...]}]); a flat one may not.
        if (flat_ && (props == s.end() || !props->contains(name.get<std::string>()))) {
          return Fail(path,
                      "\"required\" names " + name.dump() + ", which is not in \"properties\"");
        }
      }
    }
    if (auto a = s.find("additionalProperties"); a != s.end()) {
      if (a->is_object()) return Check(*a, path + ".additionalProperties");
      if (!a->is_boolean()) {
        return Fail(path, "\"additionalProperties\" must be a boolean or a schema");
      }
    }
    return true;
  }

  const Json& root_;
  const bool flat_;
};

}  // namespace

std::vector<std::string> ValidateJson(const Json& schema, const Json& value,
                                      std::string_view root) {
  Validator v(schema);
  v.Check(schema, value, std::string(root));
  return std::move(v.errors);
}

std::string JoinErrors(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "; ") + e;
  return out;
}

Status CheckFlatSchema(const Json& schema, std::string_view where) {
  if (!schema.is_object() || schema.value("type", Json()) != "object") {
    return Status::Error(std::string(where) +
                         ": must be a JSON object schema with \"type\": \"object\"");
  }
  SchemaChecker checker(schema, /*flat=*/true);
  if (!checker.Check(schema, std::string(where))) return Status::Error(checker.error);
  return Status::Ok();
}

Status CheckSchema(const Json& schema, std::string_view where) {
  if (!schema.is_object() || schema.value("type", Json()) != "object") {
    return Status::Error(std::string(where) +
                         ": must be a JSON object schema with \"type\": \"object\"");
  }
  SchemaChecker checker(schema, /*flat=*/false);
  if (!checker.Check(schema, std::string(where))) return Status::Error(checker.error);
  return Status::Ok();
}

}  // namespace mcp
