// The network and packages sections of a policy file, with the checks of their entries
// (allowlist entries, package rules, upstream URLs), each read by the parser that will
// enforce it (see loader_sections.h).
#include <algorithm>
#include <optional>
#include <string>

#include "egress/allowlist.h"
#include "packages/rules.h"
#include "policies/loader_sections.h"
#include "policies/package_upstreams.h"

namespace mcpcell::policies {
namespace {

// One network.allow entry, read exactly as the egress proxy will read it (one parser, so
// what loads is what is enforced).
std::string CheckAllowEntry(const std::string& s) {
  auto entry = egress::ParseAllowEntry(s);
  return entry ? std::string() : "\"" + s + "\": " + entry.error().message;
}

// One packages.allow/deny rule, read exactly as the package service will read it.
std::string CheckPackageRule(const std::string& s) {
  auto rule = packages::ParseRule(s);
  return rule ? std::string() : rule.error().message;
}

// An upstream index URL: https, or http only to a loopback address (a test or a local
// mirror on this host), no credentials, query or fragment, ending in '/'.
std::string CheckUpstreamUrl(const std::string& url) {
  std::string rest;
  bool https = url.rfind("https://", 0) == 0;
  if (https) {
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    return "\"" + url + "\" must start with https:// (http:// only for a loopback address)";
  }
  std::string host = rest.substr(0, rest.find('/'));
  if (host.empty()) return "\"" + url + "\" has no host";
  if (host.find('@') != std::string::npos)
    return "\"" + url + "\": credentials in the URL are not supported";
  if (url.find_first_of("?# \t\r\n") != std::string::npos)
    return "\"" + url + "\": no query, fragment or whitespace";
  if (url.back() != '/') return "\"" + url + "\" must end with '/'";
  std::string name = host;
  if (name[0] == '[') {
    name = name.substr(0, name.find(']') + 1);
  } else {
    name = name.substr(0, name.find(':'));
  }
  bool loopback = name == "localhost" || name == "[::1]" || name.rfind("127.", 0) == 0;
  if (!https && !loopback)
    return "\"" + url + "\": plain http:// is only allowed to a loopback address; use https://";
  return "";
}

std::string CheckAbsoluteDir(const std::string& path) {
  if (path.empty() || path[0] != '/') return "\"" + path + "\" must be an absolute path";
  if (path.find("/../") != std::string::npos || path.ends_with("/.."))
    return "\"" + path + "\" must not contain \"..\"";
  return "";
}

// Every allow/deny rule names a registry that packages.registries lists.
void CheckRuleRegistries(TomlReader& r, const toml::table& t, const PackagesPolicy& p) {
  if (r.failed()) return;
  for (const auto* rules : {&p.allow, &p.deny}) {
    for (const std::string& rule : *rules) {
      std::string registry = rule.substr(0, rule.find(':'));
      if (std::find(p.registries.begin(), p.registries.end(), registry) == p.registries.end()) {
        r.Fail(t.source(), "packages",
               "rule \"" + rule + "\" names registry \"" + registry +
                   "\", which packages.registries does not list");
        return;
      }
    }
  }
}

// What the mode needs: a wheelhouse or npm_offline_dir offline, a registry unless disabled.
void CheckPackagesMode(TomlReader& r, const toml::table& t, const PackagesPolicy& p,
                       const std::string& mode) {
  if (r.failed()) return;
  auto listed = [&](const char* reg) {
    return std::find(p.registries.begin(), p.registries.end(), reg) != p.registries.end();
  };
  if (p.mode == PackagesMode::kOffline && listed("pypi") && p.wheelhouse.empty()) {
    r.Fail(t.source(), "packages.wheelhouse",
           "mode = \"offline\" with registry \"pypi\" needs a wheelhouse directory");
  } else if (p.mode == PackagesMode::kOffline && listed("npm") && p.npm_offline_dir.empty()) {
    r.Fail(t.source(), "packages.npm_offline_dir",
           "mode = \"offline\" with registry \"npm\" needs npm_offline_dir (a directory of "
           ".tgz files)");
  } else if (p.mode != PackagesMode::kDisabled && p.registries.empty()) {
    r.Fail(t.source(), "packages.registries",
           "mode = \"" + mode + "\" needs at least one registry (or mode = \"disabled\")");
  }
}

}  // namespace

void ReadNetwork(TomlReader& r, const toml::table& root, NetworkPolicy* out) {
  const toml::table* t = r.Table(root, "", "network");
  if (!t) return;
  r.OnlyKeys(*t, "network", {"egress", "allow", "max_connections", "idle_connection_timeout"});
  std::string egress = "deny";
  r.String(*t, "network", "egress", &egress, {"deny", "allowlist"});
  out->egress_allowed = egress == "allowlist";
  r.Strings(*t, "network", "allow", &out->allow, CheckAllowEntry);
  uint64_t max_connections = out->max_connections;
  r.Count(*t, "network", "max_connections", 1, 1024, &max_connections);
  out->max_connections = static_cast<uint32_t>(max_connections);
  r.Duration(*t, "network", "idle_connection_timeout", std::chrono::seconds(1),
             std::chrono::seconds(86400), &out->idle_connection_timeout);
  if (r.failed()) return;
  if (!out->egress_allowed && !out->allow.empty()) {
    r.Fail(t->get("allow")->source(), "network.allow",
           "hosts are listed but egress is \"deny\" (set egress = \"allowlist\")");
  } else if (out->egress_allowed && out->allow.empty()) {
    r.Fail(t->source(), "network.allow", "egress = \"allowlist\" needs at least one host");
  }
}

void ReadPackages(TomlReader& r, const toml::table& root, PackagesPolicy* out) {
  const toml::table* t = r.Table(root, "", "packages");
  if (!t) return;
  r.OnlyKeys(*t, "packages",
             {"mode", "registries", "pypi_index", "npm_registry", "wheelhouse", "npm_offline_dir",
              "allow", "deny", "allow_sdist", "allow_install_scripts", "max_artifact_size",
              "allow_direct_registry_access"});
  std::string mode = "disabled";
  r.String(*t, "packages", "mode", &mode, {"disabled", "online", "offline"});
  out->mode = mode == "online"    ? PackagesMode::kOnline
              : mode == "offline" ? PackagesMode::kOffline
                                  : PackagesMode::kDisabled;
  r.Strings(*t, "packages", "registries", &out->registries, [](const std::string& s) {
    if (s == "crates" || s == "debian")
      return "registry \"" + s +
             "\" is not supported yet (the package service serves pypi and npm)";
    const auto& known = KnownRegistries();
    return std::find(known.begin(), known.end(), s) == known.end()
               ? "unknown registry \"" + s + "\" (known: pypi, npm)"
               : std::string();
  });
  auto checked_string = [&](const char* key, std::string* value,
                            std::string (*check)(const std::string&)) {
    r.String(*t, "packages", key, value);
    if (r.failed() || !t->get(key)) return;
    if (std::string why = check(*value); !why.empty())
      r.Fail(t->get(key)->source(), std::string("packages.") + key, why);
  };
  checked_string("pypi_index", &out->pypi_index, CheckUpstreamUrl);
  checked_string("npm_registry", &out->npm_registry, CheckUpstreamUrl);
  checked_string("wheelhouse", &out->wheelhouse, CheckAbsoluteDir);
  checked_string("npm_offline_dir", &out->npm_offline_dir, CheckAbsoluteDir);
  r.Strings(*t, "packages", "allow", &out->allow, CheckPackageRule);
  r.Strings(*t, "packages", "deny", &out->deny, CheckPackageRule);
  r.Bool(*t, "packages", "allow_sdist", &out->allow_sdist);
  r.Bool(*t, "packages", "allow_install_scripts", &out->allow_install_scripts);
  r.Size(*t, "packages", "max_artifact_size", 1 << 20, 4ull << 30, &out->max_artifact_bytes);
  r.Bool(*t, "packages", "allow_direct_registry_access", &out->allow_direct_registry_access);
  if (r.failed()) return;
  CheckRuleRegistries(r, *t, *out);
  CheckPackagesMode(r, *t, *out, mode);
}

void CheckDirectRegistryAccess(TomlReader& r, const toml::table& root, const Policy& policy) {
  if (r.failed()) return;
  std::optional<DirectRegistryAccess> access = FindDirectRegistryAccess(policy);
  if (!access) return;
  const toml::node* entry = root["network"]["allow"][access->entry].node();
  r.Fail(entry ? entry->source() : root.source(),
         "network.allow[" + std::to_string(access->entry) + "]", access->message);
}

}  // namespace mcpcell::policies
