#include "mcp/schema.h"

#include <cmath>
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

class Validator {
 public:
  std::vector<std::string> errors;

  void Check(const Json& s, const Json& v, const std::string& path) {
    if (!s.is_object()) return;  // `true` / `{}`: anything goes
    if (auto t = s.find("type"); t != s.end() && t->is_string()) {
      if (!IsType(v, t->get<std::string>())) {
        Add(path, "expected " + t->get<std::string>() + ", got " + Describe(v));
        return;
      }
    }
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

class FlatChecker {
 public:
  std::string error;

  bool Check(const Json& s, const std::string& path) {
    if (!s.is_object()) return Fail(path, "a schema must be a JSON object");
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& key = it.key();
      if (kCompositeKeywords.count(key)) {
        return Fail(path, "\"" + key +
                              "\" is not supported: schemas must be flat (no $ref, "
                              "anyOf, oneOf, allOf, not, nullable)");
      }
      if (!kKnownKeywords.count(key)) return Fail(path, "unknown keyword \"" + key + "\"");
    }
    auto type = s.find("type");
    if (type != s.end()) {
      if (type->is_array()) {
        return Fail(path,
                    "type arrays (e.g. [\"string\", \"null\"]) are not supported; use one type");
      }
      if (!type->is_string() || !kTypes.count(type->get<std::string>())) {
        return Fail(path,
                    "\"type\" must be one of object, string, integer, number, boolean, "
                    "array, null; got " +
                        Short(*type));
      }
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
    bool is_array = type != s.end() && *type == "array";
    if (is_array && !s.contains("items")) {
      return Fail(path, "an array schema needs \"items\"");
    }
    if (auto items = s.find("items"); items != s.end() && !Check(*items, path + ".items")) {
      return false;
    }
    return CheckObjectKeywords(s, path);
  }

 private:
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
        if (props == s.end() || !props->contains(name.get<std::string>())) {
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
};

}  // namespace

std::vector<std::string> ValidateJson(const Json& schema, const Json& value,
                                      std::string_view root) {
  Validator v;
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
  FlatChecker checker;
  if (!checker.Check(schema, std::string(where))) return Status::Error(checker.error);
  return Status::Ok();
}

}  // namespace mcp
