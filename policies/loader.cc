// The strict policy loader (see loader.h): ParsePolicy reads the sections in order
// (loader_sections.h, one file per group of sections) with one TomlReader
// (toml_reader.h), whose first problem becomes the error with the node's file:line:column.
// Here: the top level, the name, the tools section and finding a policy by name or path.
#include "policies/loader.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "policies/loader_sections.h"
#include "policies/toml_reader.h"

namespace mcpcell::policies {

namespace {

void ReadTools(TomlReader& r, const toml::table& root, ToolsPolicy* out) {
  const toml::table* t = r.Table(root, "", "tools");
  if (!t) return;
  r.OnlyKeys(*t, "tools", {"enabled", "toolset"});
  r.String(*t, "tools", "toolset", &out->toolset, {"core", "full"});
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
  // tools.enabled picks within the toolset: a tool outside it would silently stay off.
  const auto& in_set = ToolsetTools(out->toolset);
  for (const std::string& name : out->enabled) {
    if (r.failed()) break;
    if (std::find(in_set.begin(), in_set.end(), name) != in_set.end()) continue;
    r.Fail(t->get("enabled")->source(), "tools.enabled",
           "\"" + name + "\" is not in tools.toolset \"" + out->toolset +
               "\" (set toolset = \"full\" to offer it)");
  }
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
void ReadName(TomlReader& r, const toml::table& root, const std::string& source, std::string* out) {
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
  static const std::vector<std::string> kTools = {
      "run_code",       "run_command",     "python",        "process",          "read_file",
      "write_file",     "edit_file",       "list_files",    "session_info",     "pip_install",
      "npm_install",    "snapshot_create", "snapshot_list", "snapshot_restore", "snapshot_delete",
      "upload_archive", "download_archive"};
  return kTools;
}

const std::vector<std::string>& KnownToolsets() {
  static const std::vector<std::string> kToolsets = {"core", "full"};
  return kToolsets;
}

const std::vector<std::string>& ToolsetTools(const std::string& toolset) {
  // `process` goes with `python` and run_command's `background`: without it a background
  // program could be started but never read or stopped.
  static const std::vector<std::string> kCore = {
      "run_code",  "run_command", "python",       "process",     "read_file",  "write_file",
      "edit_file", "list_files",  "session_info", "pip_install", "npm_install"};
  return toolset == "full" ? KnownToolNames() : kCore;
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
  TomlReader r(source_name, options);
  Policy policy;
  policy.source = source_name;
  r.OnlyKeys(root, "",
             {"name", "description", "isolation", "limits", "time", "filesystem", "network",
              "packages", "tools", "secrets", "audit"});
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
  ReadSecrets(r, root, policy.network, &policy.secrets);
  ReadAudit(r, root, &policy.audit);
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
