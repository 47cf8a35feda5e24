// The sections of a policy file, each read by its own function into its part of the
// Policy (policies/policy.h) with a shared TomlReader. ParsePolicy (loader.cc) calls them
// in order. Internal to policies/.
//   loader_limits.cc      isolation, limits, time
//   loader_filesystem.cc  filesystem (template, workspace, mounts)
//   loader_network.cc     network, packages, and the check that no network.allow entry
//                         reaches a package upstream directly
//   loader_secrets.cc     [[secrets]] (after network: their hosts must be within its allow)
//   loader_audit.cc       audit (the server's trail; a tenant may set only `commands`)
#pragma once

#include "policies/policy.h"
#include "policies/toml_reader.h"

namespace mcpcell::policies {

void ReadIsolation(TomlReader& r, const toml::table& root, IsolationPolicy* out);
void ReadLimits(TomlReader& r, const toml::table& root, LimitsPolicy* out);
void ReadTime(TomlReader& r, const toml::table& root, TimePolicy* out);
void ReadFilesystem(TomlReader& r, const toml::table& root, FilesystemPolicy* out);
void ReadNetwork(TomlReader& r, const toml::table& root, NetworkPolicy* out);
void ReadPackages(TomlReader& r, const toml::table& root, PackagesPolicy* out);
// A network.allow entry that lets the cell reach the package service's upstreams itself,
// past every package rule (policies/package_upstreams.h), refused at the entry.
// [[secrets]]; `network` is the policy's, already read.
void ReadSecrets(TomlReader& r, const toml::table& root, const NetworkPolicy& network,
                 std::vector<SecretPolicy>* out);
void ReadAudit(TomlReader& r, const toml::table& root, AuditPolicy* out);
void CheckDirectRegistryAccess(TomlReader& r, const toml::table& root, const Policy& policy);

}  // namespace mcpcell::policies
