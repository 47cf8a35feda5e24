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

}  // namespace

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
    if (key != "http" && key != "tenant") {
      return fail("unknown section \"" + std::string(key.str()) +
                  "\" (expected [http], [[tenant]])");
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
            k != "max_concurrent_calls" && k != "max_body_bytes") {
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
      std::string err;
      if (!Count(*t, "max_sessions", tc.quotas.max_sessions, err) ||
          !Count(*t, "max_concurrent_calls", tc.quotas.max_concurrent_calls, err) ||
          !Count(*t, "max_body_bytes", tc.quotas.max_body_bytes, err)) {
        return fail(where + ": " + err);
      }
      std::vector<std::string> hashes;
      if (!StringList(t->get("token_sha256"), "token_sha256", hashes, err)) {
        return fail(where + ": " + err);
      }
      if (hashes.empty()) return fail(where + ": token_sha256 needs at least one hash");
      for (std::string h : hashes) {
        for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (h.size() != 64 || h.find_first_not_of("0123456789abcdef") != std::string::npos) {
          return fail(where + ": token_sha256 entry \"" + h +
                      "\" is not a SHA-256 hex digest (64 hex digits)");
        }
        if (!config.token_hashes.emplace(h, *name).second) {
          return fail(where + ": a token hash is listed twice");
        }
      }
      if (!config.tenants.emplace(*name, tc).second) {
        return fail("tenant \"" + *name + "\" is defined twice");
      }
    }
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
