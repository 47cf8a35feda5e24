#include "serve/http_config.h"

#include <openssl/evp.h>
#include <toml++/toml.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace mcpcell::serve {

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::optional<TenantConfig> HttpConfig::Authenticate(const std::string& token) const {
  auto it = token_hashes.find(Sha256Hex(token));
  if (it == token_hashes.end()) return std::nullopt;
  return tenants.at(it->second);
}

namespace {

bool StringList(const toml::node* node, const std::string& key, std::vector<std::string>& out,
                std::string& error) {
  if (!node) return true;
  const toml::array* arr = node->as_array();
  if (!arr) {
    error = key + " must be an array of strings";
    return false;
  }
  for (const auto& v : *arr) {
    auto s = v.value<std::string>();
    if (!s) {
      error = key + " must be an array of strings";
      return false;
    }
    out.push_back(*s);
  }
  return true;
}

bool Count(const toml::table& t, const std::string& key, size_t& out, std::string& error) {
  const toml::node* n = t.get(key);
  if (!n) return true;
  auto v = n->value<int64_t>();
  if (!v || *v < 0) {
    error = key + " must be a non-negative integer";
    return false;
  }
  out = static_cast<size_t>(*v);
  return true;
}

// token_sha256 of a [[tenant]] or [[operator]]: at least one SHA-256 hex digest, lower-cased.
bool TokenHashes(const toml::table& t, std::vector<std::string>& out, std::string& error) {
  if (!StringList(t.get("token_sha256"), "token_sha256", out, error)) return false;
  if (out.empty()) {
    error = "token_sha256 needs at least one hash";
    return false;
  }
  for (std::string& h : out) {
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (h.size() != 64 || h.find_first_not_of("0123456789abcdef") != std::string::npos) {
      error = "token_sha256 entry \"" + h + "\" is not a SHA-256 hex digest (64 hex digits)";
      return false;
    }
  }
  return true;
}

// `tenants = "*"` or a list of configured tenants' names.
bool OperatorScope(const toml::node* node, const HttpConfig& config, audit::TenantScope& scope,
                   std::string& error) {
  if (!node) {
    error = "tenants (\"*\" or a list of tenant names) is required";
    return false;
  }
  if (auto all = node->value<std::string>()) {
    if (*all != "*") {
      error = "tenants must be \"*\" or a list of tenant names, got \"" + *all + "\"";
      return false;
    }
    scope.all_tenants = true;
    return true;
  }
  std::vector<std::string> names;
  if (!StringList(node, "tenants", names, error)) {
    error = "tenants must be \"*\" or a list of tenant names";
    return false;
  }
  if (names.empty()) {
    error = "tenants is empty (give tenant names, or \"*\" for all)";
    return false;
  }
  for (const std::string& name : names) {
    if (!config.tenants.count(name)) {
      error = "tenants entry \"" + name + "\" is not a [[tenant]] of this file";
      return false;
    }
    scope.tenants.insert(name);
  }
  return true;
}

// One [[operator]] table into config; errors name the operator (or its index).
bool ParseOperator(const toml::table& t, size_t index, HttpConfig& config, std::string& error) {
  std::string where = "operator #" + std::to_string(index);
  auto name = t.get("name") ? t.get("name")->value<std::string>() : std::nullopt;
  if (!name || name->empty()) {
    error = where + ": name (a non-empty string) is required";
    return false;
  }
  where = "operator \"" + *name + "\"";
  for (const auto& [key, v] : t) {
    std::string k(key.str());
    if (k != "name" && k != "token_sha256" && k != "tenants") {
      error = where + ": unknown key \"" + k + "\" (expected name, token_sha256, tenants)";
      return false;
    }
  }
  OperatorConfig op;
  op.name = *name;
  std::vector<std::string> hashes;
  std::string err;
  if (!TokenHashes(t, hashes, err) || !OperatorScope(t.get("tenants"), config, op.scope, err)) {
    error = where + ": " + err;
    return false;
  }
  for (const std::string& h : hashes) {
    if (config.token_hashes.count(h)) {
      error = where + ": a token_sha256 is also tenant \"" + config.token_hashes.at(h) +
              "\"'s token (operator tokens must differ from every tenant's)";
      return false;
    }
    if (!config.operator_token_hashes.emplace(h, *name).second) {
      error = where + ": a token hash is listed twice";
      return false;
    }
  }
  if (!config.operators.emplace(*name, op).second) {
    error = where + " is defined twice";
    return false;
  }
  return true;
}

// All [[operator]] tables, after the tenants (their names and tokens are checked against
// them); errors carry the line of the table.
bool ParseOperators(const toml::node& node, const std::string& source, HttpConfig& config,
                    std::string& error) {
  const toml::array* arr = node.as_array();
  if (!arr) {
    error = source + ": operator must be an array of tables ([[operator]])";
    return false;
  }
  size_t index = 0;
  for (const auto& entry : *arr) {
    ++index;
    const toml::table* t = entry.as_table();
    std::string err;
    if (!t) {
      err = "operator #" + std::to_string(index) + " must be a table";
    } else if (ParseOperator(*t, index, config, err)) {
      continue;
    }
    error = source + ":" + std::to_string(entry.source().begin.line) + ": " + err;
    return false;
  }
  return true;
}

}  // namespace

std::optional<OperatorConfig> HttpConfig::AuthenticateOperator(const std::string& token) const {
  auto it = operator_token_hashes.find(Sha256Hex(token));
  if (it == operator_token_hashes.end()) return std::nullopt;
  return operators.at(it->second);
}

std::optional<HttpConfig> ParseHttpConfig(const std::string& text, const std::string& source,
                                          std::string& error) {
  HttpConfig config;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ": " << e.description();
    error = os.str();
    return std::nullopt;
  }
  auto fail = [&](const std::string& what) {
    error = source + ": " + what;
    return std::nullopt;
  };
  for (const auto& [key, node] : root) {
    if (key != "http" && key != "tenant" && key != "operator") {
      return fail("unknown section \"" + std::string(key.str()) +
                  "\" (expected [http], [[tenant]], [[operator]])");
    }
  }
  if (const toml::node* http = root.get("http")) {
    const toml::table* t = http->as_table();
    if (!t) return fail("[http] must be a table");
    for (const auto& [key, node] : *t) {
      std::string k(key.str());
      if (k != "allowed_hosts" && k != "allowed_origins" && k != "tls_cert" && k != "tls_key") {
        return fail("[http]: unknown key \"" + k + "\"");
      }
    }
    std::string err;
    if (!StringList(t->get("allowed_hosts"), "[http].allowed_hosts", config.allowed_hosts, err) ||
        !StringList(t->get("allowed_origins"), "[http].allowed_origins", config.allowed_origins,
                    err)) {
      return fail(err);
    }
    config.tls_cert = t->get("tls_cert") ? t->get("tls_cert")->value_or(std::string()) : "";
    config.tls_key = t->get("tls_key") ? t->get("tls_key")->value_or(std::string()) : "";
    if (config.tls_cert.empty() != config.tls_key.empty()) {
      return fail("[http]: tls_cert and tls_key must be given together");
    }
  }
  if (const toml::node* tenants = root.get("tenant")) {
    const toml::array* arr = tenants->as_array();
    if (!arr) return fail("tenant must be an array of tables ([[tenant]])");
    size_t index = 0;
    for (const auto& node : *arr) {
      ++index;
      const toml::table* t = node.as_table();
      std::string where = "tenant #" + std::to_string(index);
      if (!t) return fail(where + " must be a table");
      TenantConfig tc;
      auto name = t->get("name") ? t->get("name")->value<std::string>() : std::nullopt;
      if (!name || name->empty()) return fail(where + ": name (a non-empty string) is required");
      where = "tenant \"" + *name + "\"";
      tc.quotas.name = *name;
      for (const auto& [key, v] : *t) {
        std::string k(key.str());
        if (k != "name" && k != "token_sha256" && k != "policy" && k != "max_sessions" &&
            k != "max_concurrent_calls" && k != "max_body_bytes" && k != "inherit_server_mounts") {
          return fail(where + ": unknown key \"" + k + "\"");
        }
      }
      if (t->get("policy")) {
        auto p = t->get("policy")->value<std::string>();
        if (!p || p->empty()) {
          return fail(where + ": policy must be a profile name or a .toml path");
        }
        tc.policy = *p;
      }
      if (const toml::node* inherit = t->get("inherit_server_mounts")) {
        auto b = inherit->value<bool>();
        if (!b || !inherit->is_boolean()) {
          return fail(where + ": inherit_server_mounts must be true or false");
        }
        tc.inherit_server_mounts = *b;
      }
      std::string err;
      if (!Count(*t, "max_sessions", tc.quotas.max_sessions, err) ||
          !Count(*t, "max_concurrent_calls", tc.quotas.max_concurrent_calls, err) ||
          !Count(*t, "max_body_bytes", tc.quotas.max_body_bytes, err)) {
        return fail(where + ": " + err);
      }
      std::vector<std::string> hashes;
      if (!TokenHashes(*t, hashes, err)) return fail(where + ": " + err);
      for (const std::string& h : hashes) {
        if (!config.token_hashes.emplace(h, *name).second) {
          return fail(where + ": a token hash is listed twice");
        }
      }
      if (!config.tenants.emplace(*name, tc).second) {
        return fail("tenant \"" + *name + "\" is defined twice");
      }
    }
  }
  if (const toml::node* operators = root.get("operator")) {
    if (!ParseOperators(*operators, source, config, error)) return std::nullopt;
  }
  return config;
}

std::optional<HttpConfig> LoadHttpConfig(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot read the config file";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseHttpConfig(ss.str(), path, error);
}

}  // namespace mcpcell::serve
