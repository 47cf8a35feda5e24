// The strict policy loader (see loader.h). One Reader walks the TOML tree; every read
// checks the type, every table checks that it holds no key it does not know, and the first
// problem becomes the error with the node's file:line:column.
#include "policies/loader.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "base/units.h"
#include "egress/allowlist.h"
#include "packages/rules.h"
#include "policies/mount_check.h"
#include "policies/package_upstreams.h"

namespace mcpcell::policies {

namespace {

class Reader {
 public:
  Reader(std::string source, const LoadOptions& options)
      : source_(std::move(source)), options_(options) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  void Fail(const toml::source_region& where, const std::string& path, const std::string& what) {
    if (failed()) return;
    error_ = source_ + ":" + std::to_string(where.begin.line) + ":" +
             std::to_string(where.begin.column) + ": " + (path.empty() ? "" : path + ": ") + what;
  }

  // A problem that has no place in the text (the name made from the file name).
  void FailFile(const std::string& what) {
    if (failed()) return;
    error_ = source_ + ": " + what;
  }

  // Refuses keys of `table` outside `known`.
  void OnlyKeys(const toml::table& table, const std::string& path,
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

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  static std::string TypeName(const toml::node& n) {
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

  static std::string Shown(const toml::node& n) {
    if (auto s = n.as_string()) return "\"" + s->get() + "\"";
    std::ostringstream out;
    if (n.is_table()) return "a table";
    if (n.is_array()) return "an array";
    n.visit([&](auto&& v) { out << v; });
    return out.str();
  }

  const toml::table* Table(const toml::table& parent, const std::string& path, const char* key) {
    const toml::node* n = parent.get(key);
    if (!n) return nullptr;
    if (!n->is_table()) {
      Fail(n->source(), Join(path, key), "expected a table, got " + TypeName(*n));
      return nullptr;
    }
    return n->as_table();
  }

  void String(const toml::table& t, const std::string& path, const char* key, std::string* out,
              std::initializer_list<const char*> allowed = {}) {
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

  void Bool(const toml::table& t, const std::string& path, const char* key, bool* out) {
    const toml::node* n = t.get(key);
    if (!n || failed()) return;
    if (!n->is_boolean()) {
      Fail(n->source(), Join(path, key), "expected true or false, got " + TypeName(*n));
      return;
    }
    *out = n->as_boolean()->get();
  }

  void Count(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
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

  void Size(const toml::table& t, const std::string& path, const char* key, uint64_t lo,
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

  void Duration(const toml::table& t, const std::string& path, const char* key,
                std::chrono::seconds lo, std::chrono::seconds hi, std::chrono::seconds* out) {
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

  // An array of strings; `check` may refuse one element (returns the reason or "").
  void Strings(const toml::table& t, const std::string& path, const char* key,
               std::vector<std::string>* out,
               const std::function<std::string(const std::string&)>& check = {}) {
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

  const LoadOptions& options() const { return options_; }

 private:
  std::string source_;
  const LoadOptions& options_;
  std::string error_;
};

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

void ReadIsolation(Reader& r, const toml::table& root, IsolationPolicy* out) {
  const toml::table* t = r.Table(root, "", "isolation");
  if (!t) return;
  r.OnlyKeys(*t, "isolation", {"backend", "seccomp"});
  const toml::node* backend = t->get("backend");
  r.String(*t, "isolation", "backend", &out->backend, {"namespaces", "microvm"});
  if (!r.failed() && out->backend == "microvm") {
    r.Fail(backend->source(), "isolation.backend",
           "\"microvm\" is reserved for a future backend; only \"namespaces\" exists today");
  }
  r.Bool(*t, "isolation", "seccomp", &out->seccomp);
}

void ReadLimits(Reader& r, const toml::table& root, LimitsPolicy* out) {
  const toml::table* t = r.Table(root, "", "limits");
  if (!t) return;
  const std::string p = "limits";
  r.OnlyKeys(
      *t, p,
      {"memory", "pids", "cpus", "disk", "tmp", "open_files", "max_file_size", "output_kept"});
  r.Size(*t, p, "memory", 16ull << 20, 1ull << 40, &out->memory_bytes);
  r.Count(*t, p, "pids", 8, 1 << 22, &out->pids);
  if (const toml::node* n = t->get("cpus"); n && !r.failed()) {
    double cpus = 0;
    if (n->is_integer())
      cpus = static_cast<double>(n->as_integer()->get());
    else if (n->is_floating_point())
      cpus = n->as_floating_point()->get();
    else
      r.Fail(n->source(), "limits.cpus",
             "expected a number of CPUs like 1 or 0.5, got " + Reader::TypeName(*n));
    if (!r.failed() && !(cpus >= 0.01 && cpus <= 1024)) {
      r.Fail(n->source(), "limits.cpus", "must be between 0.01 and 1024, got " + Reader::Shown(*n));
    }
    if (!r.failed()) out->cpu_millicores = static_cast<uint32_t>(cpus * 1000 + 0.5);
  }
  r.Size(*t, p, "disk", 16ull << 20, 1ull << 40, &out->disk_bytes);
  r.Size(*t, p, "tmp", 1ull << 20, 1ull << 40, &out->tmp_bytes);
  r.Count(*t, p, "open_files", 16, 1 << 20, &out->open_files);
  r.Size(*t, p, "max_file_size", 4096, 1ull << 42, &out->file_size_bytes);
  r.Size(*t, p, "output_kept", 256, 16ull << 20, &out->output_keep_bytes);
}

void ReadTime(Reader& r, const toml::table& root, TimePolicy* out) {
  const toml::table* t = r.Table(root, "", "time");
  if (!t) return;
  const std::string p = "time";
  using std::chrono::seconds;
  r.OnlyKeys(*t, p, {"exec_default", "exec_max", "session_idle", "session_max"});
  r.Duration(*t, p, "exec_default", seconds(1), seconds(86400), &out->exec_default);
  r.Duration(*t, p, "exec_max", seconds(1), seconds(86400), &out->exec_max);
  r.Duration(*t, p, "session_idle", seconds(1), seconds(30 * 86400), &out->session_idle);
  r.Duration(*t, p, "session_max", seconds(1), seconds(30 * 86400), &out->session_max);
  if (!r.failed() && out->exec_default > out->exec_max) {
    r.Fail(t->get("exec_default") ? t->get("exec_default")->source() : t->source(),
           "time.exec_default",
           "is longer than time.exec_max (" + FormatDuration(out->exec_default) + " > " +
               FormatDuration(out->exec_max) + ")");
  }
  if (!r.failed() && out->session_idle > out->session_max) {
    r.Fail(t->get("session_idle") ? t->get("session_idle")->source() : t->source(),
           "time.session_idle", "is longer than time.session_max");
  }
}

void ReadMount(Reader& r, const toml::node& node, const std::string& at, MountPolicy* out) {
  if (!node.is_table()) {
    r.Fail(node.source(), at,
           "expected a table {source, target, mode}, got " + Reader::TypeName(node));
    return;
  }
  const toml::table& t = *node.as_table();
  r.OnlyKeys(t, at, {"source", "target", "mode"});
  for (const char* required : {"source", "target"}) {
    if (!r.failed() && !t.get(required))
      r.Fail(t.source(), at, std::string("missing \"") + required + "\"");
  }
  r.String(t, at, "source", &out->source);
  r.String(t, at, "target", &out->target);
  std::string mode = "ro";
  r.String(t, at, "mode", &mode, {"ro", "rw"});
  out->writable = mode == "rw";
  if (r.failed()) return;
  if (Status s = CheckMountSource(out->source, r.options().state_dir); !s) {
    r.Fail(t.get("source")->source(), at + ".source", s.error().message);
    return;
  }
  if (Status s = CheckMountTarget(out->target); !s) {
    r.Fail(t.get("target")->source(), at + ".target", s.error().message);
  }
}

void ReadFilesystem(Reader& r, const toml::table& root, FilesystemPolicy* out) {
  const toml::table* t = r.Table(root, "", "filesystem");
  if (!t) return;
  const std::string p = "filesystem";
  r.OnlyKeys(*t, p, {"template", "workspace", "workspace_dir", "mounts"});
  r.String(*t, p, "template", &out->template_name, {"host"});
  std::string ws = "ephemeral";
  r.String(*t, p, "workspace", &ws, {"ephemeral", "persistent"});
  out->workspace = ws == "persistent" ? WorkspaceMode::kPersistent : WorkspaceMode::kEphemeral;
  r.String(*t, p, "workspace_dir", &out->workspace_dir);
  if (r.failed()) return;
  const toml::node* dir = t->get("workspace_dir");
  if (out->workspace == WorkspaceMode::kPersistent && out->workspace_dir.empty()) {
    r.Fail(t->source(), "filesystem.workspace_dir",
           "a persistent workspace needs workspace_dir (a host directory)");
    return;
  }
  if (dir && out->workspace == WorkspaceMode::kEphemeral) {
    r.Fail(dir->source(), "filesystem.workspace_dir",
           "only a persistent workspace has a host directory (set workspace = \"persistent\")");
    return;
  }
  if (dir && out->workspace_dir.front() != '/') {
    r.Fail(dir->source(), "filesystem.workspace_dir",
           "\"" + out->workspace_dir + "\" is not an absolute path");
    return;
  }
  const toml::node* mounts = t->get("mounts");
  if (!mounts) return;
  if (!mounts->is_array()) {
    r.Fail(mounts->source(), "filesystem.mounts",
           "expected an array of tables ([[filesystem.mounts]]), got " + Reader::TypeName(*mounts));
    return;
  }
  size_t i = 0;
  std::set<std::string> targets;
  for (const toml::node& m : *mounts->as_array()) {
    std::string at = "filesystem.mounts[" + std::to_string(i++) + "]";
    MountPolicy mount;
    ReadMount(r, m, at, &mount);
    if (r.failed()) return;
    if (!targets.insert(mount.target).second) {
      r.Fail(m.source(), at + ".target", "\"" + mount.target + "\" is mounted twice");
      return;
    }
    out->mounts.push_back(std::move(mount));
  }
}

void ReadNetwork(Reader& r, const toml::table& root, NetworkPolicy* out) {
  const toml::table* t = r.Table(root, "", "network");
  if (!t) return;
  r.OnlyKeys(*t, "network", {"egress", "allow", "max_connections"});
  std::string egress = "deny";
  r.String(*t, "network", "egress", &egress, {"deny", "allowlist"});
  out->egress_allowed = egress == "allowlist";
  r.Strings(*t, "network", "allow", &out->allow, CheckAllowEntry);
  uint64_t max_connections = out->max_connections;
  r.Count(*t, "network", "max_connections", 1, 1024, &max_connections);
  out->max_connections = static_cast<uint32_t>(max_connections);
  if (r.failed()) return;
  if (!out->egress_allowed && !out->allow.empty()) {
    r.Fail(t->get("allow")->source(), "network.allow",
           "hosts are listed but egress is \"deny\" (set egress = \"allowlist\")");
  } else if (out->egress_allowed && out->allow.empty()) {
    r.Fail(t->source(), "network.allow", "egress = \"allowlist\" needs at least one host");
  }
}

void ReadPackages(Reader& r, const toml::table& root, PackagesPolicy* out) {
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
  for (const auto* rules : {&out->allow, &out->deny}) {
    for (const std::string& rule : *rules) {
      std::string registry = rule.substr(0, rule.find(':'));
      if (std::find(out->registries.begin(), out->registries.end(), registry) ==
          out->registries.end()) {
        r.Fail(t->source(), "packages",
               "rule \"" + rule + "\" names registry \"" + registry +
                   "\", which packages.registries does not list");
        return;
      }
    }
  }
  auto listed = [&](const char* reg) {
    return std::find(out->registries.begin(), out->registries.end(), reg) != out->registries.end();
  };
  if (out->mode == PackagesMode::kOffline && listed("pypi") && out->wheelhouse.empty()) {
    r.Fail(t->source(), "packages.wheelhouse",
           "mode = \"offline\" with registry \"pypi\" needs a wheelhouse directory");
  } else if (out->mode == PackagesMode::kOffline && listed("npm") && out->npm_offline_dir.empty()) {
    r.Fail(t->source(), "packages.npm_offline_dir",
           "mode = \"offline\" with registry \"npm\" needs npm_offline_dir (a directory of "
           ".tgz files)");
  } else if (out->mode != PackagesMode::kDisabled && out->registries.empty()) {
    r.Fail(t->source(), "packages.registries",
           "mode = \"" + mode + "\" needs at least one registry (or mode = \"disabled\")");
  }
}

void ReadTools(Reader& r, const toml::table& root, ToolsPolicy* out) {
  const toml::table* t = r.Table(root, "", "tools");
  if (!t) return;
  r.OnlyKeys(*t, "tools", {"enabled"});
  r.Strings(*t, "tools", "enabled", &out->enabled, [](const std::string& s) {
    const auto& known = KnownToolNames();
    if (std::find(known.begin(), known.end(), s) != known.end()) return std::string();
    std::string names;
    for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
    return "unknown tool \"" + s + "\" (known: " + names + ")";
  });
  if (!r.failed() && t->get("enabled") && out->enabled.empty()) {
    r.Fail(t->get("enabled")->source(), "tools.enabled",
           "is empty: a profile with no tools is useless (omit the key to enable every tool)");
  }
}

// A network.allow entry that lets the cell reach the package service's upstreams itself,
// past every package rule (policies/package_upstreams.h), refused at the entry.
void CheckDirectRegistryAccess(Reader& r, const toml::table& root, const Policy& policy) {
  if (r.failed()) return;
  std::optional<DirectRegistryAccess> access = FindDirectRegistryAccess(policy);
  if (!access) return;
  const toml::node* entry = root["network"]["allow"][access->entry].node();
  r.Fail(entry ? entry->source() : root.source(),
         "network.allow[" + std::to_string(access->entry) + "]", access->message);
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool IsValidName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), IsNameChar);
}

std::string FileNameOf(const std::string& source) { return source.substr(source.rfind('/') + 1); }

// The name of a policy without a `name` key, made from where it came from: a shipped
// profile's own name, or the file name without ".toml", lower case, each run of characters
// outside [a-z0-9_-] one '-', no '-' at either end, at most 64 characters ("My.Policy.toml"
// -> "my-policy"). "" when nothing is left ("....toml").
std::string NameFromSource(const std::string& source) {
  if (source.rfind("<builtin:", 0) == 0 && source.back() == '>')
    return source.substr(9, source.size() - 10);
  std::string stem = FileNameOf(source);
  if (stem.size() > 5 && stem.ends_with(".toml")) stem.resize(stem.size() - 5);
  std::string name;
  bool in_run = false;  // inside a run of characters that became one '-'
  for (char c : stem) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (IsNameChar(c)) {
      name += c;
    } else if (!in_run) {
      name += '-';
    }
    in_run = !IsNameChar(c);
  }
  name.erase(0, name.find_first_not_of('-'));
  if (name.size() > 64) name.resize(64);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

// `name`, checked as written, or made from the file name when the key is absent: a name
// the user never wrote must not fail the load at a line that does not exist.
void ReadName(Reader& r, const toml::table& root, const std::string& source, std::string* out) {
  const toml::node* n = root.get("name");
  if (!n) {
    *out = NameFromSource(source);
    if (out->empty()) {
      r.FailFile("no name key, and none can be made from the file name \"" + FileNameOf(source) +
                 "\": add name = \"...\" (1 to 64 of [a-z0-9_-])");
    }
    return;
  }
  r.String(root, "", "name", out);
  if (!r.failed() && !IsValidName(*out))
    r.Fail(n->source(), "name", "\"" + *out + "\" must be 1 to 64 of [a-z0-9_-]");
}

}  // namespace

const std::vector<std::string>& KnownToolNames() {
  static const std::vector<std::string> kTools = {"run_code",     "run_command", "read_file",
                                                  "write_file",   "edit_file",   "list_files",
                                                  "session_info", "pip_install", "npm_install"};
  return kTools;
}

const std::vector<std::string>& KnownRegistries() {
  static const std::vector<std::string> kRegistries = {"pypi", "npm"};
  return kRegistries;
}

Result<Policy> ParsePolicy(std::string_view text, const std::string& source_name,
                           const LoadOptions& options) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    return Error::Msg(source_name + ":" + std::to_string(e.source().begin.line) + ":" +
                      std::to_string(e.source().begin.column) + ": " +
                      std::string(e.description()));
  }
  Reader r(source_name, options);
  Policy policy;
  policy.source = source_name;
  r.OnlyKeys(root, "",
             {"name", "description", "isolation", "limits", "time", "filesystem", "network",
              "packages", "tools"});
  ReadName(r, root, source_name, &policy.name);
  r.String(root, "", "description", &policy.description);
  ReadIsolation(r, root, &policy.isolation);
  ReadLimits(r, root, &policy.limits);
  ReadTime(r, root, &policy.time);
  ReadFilesystem(r, root, &policy.filesystem);
  ReadNetwork(r, root, &policy.network);
  ReadPackages(r, root, &policy.packages);
  CheckDirectRegistryAccess(r, root, policy);
  ReadTools(r, root, &policy.tools);
  if (r.failed()) return Error::Msg(r.error());
  return policy;
}

Result<Policy> LoadPolicyFile(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::Sys("open(\"" + path + "\")");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1 << 20)) return Error::Msg(path + ": larger than 1 MiB");
  return ParsePolicy(text.str(), path, options);
}

Result<Policy> ResolvePolicy(const std::string& name_or_file, const LoadOptions& options) {
  bool is_file =
      name_or_file.find('/') != std::string::npos ||
      (name_or_file.size() > 5 && name_or_file.compare(name_or_file.size() - 5, 5, ".toml") == 0);
  if (is_file) return LoadPolicyFile(name_or_file, options);
  std::string_view text = ShippedPolicyText(name_or_file);
  if (text.empty()) {
    std::string names;
    for (const auto& n : ShippedPolicyNames()) names += (names.empty() ? "" : ", ") + n;
    return Error::Msg("no shipped policy named \"" + name_or_file + "\" (shipped: " + names +
                      "; or give a path to a .toml file)");
  }
  return ParsePolicy(text, "<builtin:" + name_or_file + ">", options);
}

}  // namespace mcpcell::policies
