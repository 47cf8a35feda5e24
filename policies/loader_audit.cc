// The [audit] section of a policy file (see loader_sections.h, docs/policies.md "audit").
// The trail is one per server, so a tenant's policy may set only `commands`.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "policies/loader_sections.h"

namespace mcpcell::policies {
namespace {

constexpr const char* kPath = "audit";

// "unix:/absolute/path" or "tcp:host:port" (port 1..65535); the reason, or "".
std::string CheckSyslogTarget(const std::string& target) {
  if (target.rfind("unix:", 0) == 0) {
    return target.size() > 6 && target[5] == '/' ? "" : "a unix: target needs an absolute path";
  }
  if (target.rfind("tcp:", 0) == 0) {
    std::string rest = target.substr(4);
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) return "a tcp: target is tcp:HOST:PORT";
    std::string port = rest.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoul(port) == 0 || std::stoul(port) > 65535) {
      return "port \"" + port + "\" is not a number from 1 to 65535";
    }
    return "";
  }
  return "expected \"unix:/path\" or \"tcp:host:port\"";
}

void ReadSigningKey(TomlReader& r, const toml::table& t, std::string* out) {
  r.String(t, kPath, "signing_key", out);
  if (r.failed() || out->empty()) return;
  const toml::node* n = t.get("signing_key");
  if (out->front() != '/') {
    r.Fail(n->source(), "audit.signing_key", "must be an absolute path, got \"" + *out + "\"");
  } else if (access(out->c_str(), R_OK) != 0) {
    r.Fail(n->source(), "audit.signing_key",
           "cannot read \"" + *out + "\": " + std::strerror(errno));
  }
}

// The keys only the server's own policy may set: refused by name in a tenant's.
void RefuseServerWideKeys(TomlReader& r, const toml::table& t) {
  for (const auto& [key, node] : t) {
    if (key.str() == "commands") continue;
    r.Fail(node.source(), "audit." + std::string(key.str()),
           "is server-wide (one audit trail per server): set it in the server's --policy; a "
           "tenant's policy may set only audit.commands");
    return;
  }
}

}  // namespace

void ReadAudit(TomlReader& r, const toml::table& root, AuditPolicy* out) {
  const toml::table* t = r.Table(root, "", kPath);
  if (!t) return;
  r.OnlyKeys(*t, kPath,
             {"enabled", "commands", "signing_key", "retention", "rotate_size", "rotate_age",
              "checkpoint_every", "required", "usage_interval", "syslog"});
  if (r.options().tenant) RefuseServerWideKeys(r, *t);
  r.Bool(*t, kPath, "enabled", &out->enabled);
  std::string commands = out->commands == AuditCommands::kFull ? "full" : "hash";
  r.String(*t, kPath, "commands", &commands, {"hash", "full"});
  out->commands = commands == "full" ? AuditCommands::kFull : AuditCommands::kHash;
  ReadSigningKey(r, *t, &out->signing_key);
  using std::chrono::seconds;
  r.Duration(*t, kPath, "retention", seconds(3600), seconds(100 * 365 * 86400ll), &out->retention);
  r.Size(*t, kPath, "rotate_size", 4096, 1ull << 40, &out->rotate_bytes);
  r.Duration(*t, kPath, "rotate_age", seconds(60), seconds(365 * 86400), &out->rotate_age);
  r.Count(*t, kPath, "checkpoint_every", 1, 1ull << 32, &out->checkpoint_every);
  r.Bool(*t, kPath, "required", &out->required);
  if (!r.failed() && !out->enabled && out->required) {
    r.Fail(t->get("enabled")->source(), "audit.enabled",
           "is false but audit.required is true: a server cannot require a trail it does not "
           "write");
  }
  r.Duration(*t, kPath, "usage_interval", seconds(10), seconds(86400), &out->usage_interval);
  r.String(*t, kPath, "syslog", &out->syslog);
  if (!r.failed() && !out->syslog.empty()) {
    if (std::string why = CheckSyslogTarget(out->syslog); !why.empty()) {
      r.Fail(t->get("syslog")->source(), "audit.syslog", why + ", got \"" + out->syslog + "\"");
    }
  }
}

}  // namespace mcpcell::policies
