// The [[secrets]] section (policy.h SecretPolicy, docs/secrets.md): what the operator grants
// to every session of the policy. Read after [network], whose allowlist bounds each
// secret's hosts. Every problem is reported at the entry or key that causes it.
#include <unistd.h>

#include <algorithm>
#include <set>

#include "egress/allowlist.h"
#include "policies/compiler.h"
#include "policies/loader_sections.h"
#include "policies/package_env.h"
#include "policies/secret_source.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::policies {
namespace {

bool IsSecretName(const std::string& name) {
  if (name.empty() || name.size() > 64 || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The variables the compiler sets in every cell (whatever the policy enables): a secret
// by one of these names would change what the cell's programs rely on.
const std::set<std::string>& CompilerEnvNames() {
  static const std::set<std::string> names = [] {
    std::vector<std::string> vars = sandbox::DefaultCellSpec("x", "/").env;
    for (std::string& v : EgressProxyEnv()) vars.push_back(std::move(v));
    for (std::string& v : CaBundleEnv()) vars.push_back(std::move(v));
    PackagesPolicy all;
    all.mode = PackagesMode::kOnline;
    all.registries = KnownRegistries();
    for (std::string& v : PackageCellEnv(all)) vars.push_back(std::move(v));
    vars.push_back("MCPCELL_POLICY=");
    std::set<std::string> out;
    for (const std::string& v : vars) out.insert(v.substr(0, v.find('=')));
    return out;
  }();
  return names;
}

// Why the secret's host entry reaches past network.allow, or "". A placeholder only goes
// over TLS, so an entry without a port is checked for 443.
std::string OutsideAllow(const egress::AllowEntry& h, const egress::Allowlist& allow) {
  const uint16_t port = h.port.value_or(443);
  const egress::AllowEntry* by = nullptr;
  switch (h.kind) {
    case egress::AllowEntry::Kind::kHost:
      by = allow.Match(h.name, port);
      break;
    case egress::AllowEntry::Kind::kWildcard:
      // Any name under the suffix is matched only by a wildcard covering all of them.
      by = allow.Match("mcpcell-probe." + h.name, port);
      break;
    case egress::AllowEntry::Kind::kAddress:
      by = allow.NamesAddress(h.address, port);
      break;
    case egress::AllowEntry::Kind::kCidr:
      by = allow.NamesAddress(h.address, port);
      if (by && !(by->kind == egress::AllowEntry::Kind::kCidr && by->prefix_len <= h.prefix_len))
        by = nullptr;
      break;
  }
  if (by) return "";
  return "\"" + h.text + "\" is not within network.allow" +
         (h.port ? std::string() : std::string(" (checked for port 443)")) +
         ": a secret may only go where the cell may connect";
}

std::string CheckSurface(const std::string& s) {
  static const char* kKnown[] = {"header", "basic_auth", "query", "body"};
  if (std::find(std::begin(kKnown), std::end(kKnown), s) != std::end(kKnown)) return "";
  return "unknown surface \"" + s + "\" (known: header, basic_auth, query, body)";
}

// The source: its kind and, for a file or a variable, that it can be read now.
void ReadSource(TomlReader& r, const toml::table& t, const std::string& at, SecretPolicy* out) {
  r.String(t, at, "source", &out->source);
  if (r.failed()) return;
  const toml::node* n = t.get("source");
  auto source = ParseSecretSource(out->source);
  if (!source) {
    r.Fail(n->source(), at + ".source", source.error().message);
  } else if (source->kind == SecretSource::Kind::kFile && ::access(source->path.c_str(), R_OK)) {
    r.Fail(n->source(), at + ".source",
           "\"" + source->path + "\" cannot be read: " + Error::Sys("access").message);
  } else if (source->kind == SecretSource::Kind::kEnv && !::getenv(source->variable.c_str())) {
    r.Fail(n->source(), at + ".source", "the server's environment has no " + source->variable);
  } else if (source->kind == SecretSource::Kind::kCommand &&
             ::access(source->argv[0].c_str(), X_OK)) {
    r.Fail(n->source(), at + ".source",
           "\"" + source->argv[0] + "\" cannot be run: " + Error::Sys("access").message);
  }
}

// Hosts and surfaces: required for and only allowed on a placeholder secret.
void ReadHosts(TomlReader& r, const toml::table& t, const std::string& at,
               const NetworkPolicy& network, SecretPolicy* out) {
  const bool placeholder = out->mode == SecretMode::kPlaceholder;
  for (const char* key : {"hosts", "surfaces", "on_violation"}) {
    if (!r.failed() && !placeholder && t.get(key)) {
      r.Fail(t.get(key)->source(), at + "." + key,
             "only a placeholder secret has " + std::string(key) + " (mode is \"" +
                 SecretModeName(out->mode) + "\")");
    }
  }
  auto allow =
      egress::Allowlist::Parse(network.egress_allowed ? network.allow : std::vector<std::string>{});
  r.Strings(t, at, "hosts", &out->hosts, [&](const std::string& s) {
    auto entry = egress::ParseAllowEntry(s);
    if (!entry) return "\"" + s + "\": " + entry.error().message;
    return allow ? OutsideAllow(*entry, *allow) : std::string();
  });
  r.Strings(t, at, "surfaces", &out->surfaces, CheckSurface);
  if (r.failed() || !placeholder) return;
  if (out->hosts.empty()) {
    r.Fail(t.get("hosts") ? t.get("hosts")->source() : t.source(), at + ".hosts",
           "a placeholder secret needs hosts (where the proxy may put its value)");
  } else if (out->surfaces.empty()) {
    r.Fail(t.get("surfaces")->source(), at + ".surfaces",
           "is empty: the placeholder could never be replaced");
  }
  std::string on_violation = "block";
  r.String(t, at, "on_violation", &on_violation, {"block", "block_and_end_session"});
  out->end_session_on_violation = on_violation == "block_and_end_session";
}

void ReadSecret(TomlReader& r, const toml::node& node, const std::string& at,
                const NetworkPolicy& network, SecretPolicy* out) {
  if (!node.is_table()) {
    r.Fail(node.source(), at, "expected a table ([[secrets]]), got " + TomlReader::TypeName(node));
    return;
  }
  const toml::table& t = *node.as_table();
  r.OnlyKeys(t, at, {"name", "source", "mode", "hosts", "surfaces", "ttl", "on_violation"});
  for (const char* required : {"name", "source"}) {
    if (!r.failed() && !t.get(required))
      r.Fail(t.source(), at, std::string("missing \"") + required + "\"");
  }
  r.String(t, at, "name", &out->name);
  if (!r.failed() && !IsSecretName(out->name)) {
    r.Fail(t.get("name")->source(), at + ".name",
           "\"" + out->name + "\" must be 1 to 64 of [A-Z0-9_], not starting with a digit");
  } else if (!r.failed() && CompilerEnvNames().count(out->name)) {
    r.Fail(t.get("name")->source(), at + ".name",
           "\"" + out->name + "\" is a variable mcpcell sets in every cell; choose another name");
  }
  ReadSource(r, t, at, out);
  std::string mode = "placeholder";
  r.String(t, at, "mode", &mode, {"placeholder", "env", "file"});
  out->mode = mode == "env"    ? SecretMode::kEnv
              : mode == "file" ? SecretMode::kFile
                               : SecretMode::kPlaceholder;
  ReadHosts(r, t, at, network, out);
  if (const toml::node* ttl = t.get("ttl"); ttl && !r.failed()) {
    std::chrono::seconds v{0};
    r.Duration(t, at, "ttl", std::chrono::seconds(1), std::chrono::seconds(30 * 86400), &v);
    out->ttl = v;
  }
}

}  // namespace

bool HasPlaceholderSecrets(const Policy& policy) {
  return std::any_of(policy.secrets.begin(), policy.secrets.end(),
                     [](const SecretPolicy& s) { return s.mode == SecretMode::kPlaceholder; });
}

std::string SecretModeName(SecretMode mode) {
  switch (mode) {
    case SecretMode::kEnv:
      return "env";
    case SecretMode::kFile:
      return "file";
    case SecretMode::kPlaceholder:
      break;
  }
  return "placeholder";
}

void ReadSecrets(TomlReader& r, const toml::table& root, const NetworkPolicy& network,
                 std::vector<SecretPolicy>* out) {
  const toml::node* secrets = root.get("secrets");
  if (!secrets || r.failed()) return;
  if (!secrets->is_array()) {
    r.Fail(secrets->source(), "secrets",
           "expected an array of tables ([[secrets]]), got " + TomlReader::TypeName(*secrets));
    return;
  }
  std::set<std::string> names;
  size_t i = 0;
  for (const toml::node& node : *secrets->as_array()) {
    const std::string at = "secrets[" + std::to_string(i++) + "]";
    SecretPolicy secret;
    ReadSecret(r, node, at, network, &secret);
    if (r.failed()) return;
    if (!names.insert(secret.name).second) {
      r.Fail(node.as_table()->get("name")->source(), at + ".name",
             "\"" + secret.name + "\" is granted twice");
      return;
    }
    out->push_back(std::move(secret));
  }
}

}  // namespace mcpcell::policies
