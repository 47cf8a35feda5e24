// Per-tenant policies of `mcpcell serve --http`: every tenant of the HTTP config gets the
// policy its `policy` key names, resolved exactly like --policy (a shipped profile or a
// .toml file, the same loader checks) and used as written: the command-line policy flags
// (--memory-mib, --mount, --output, --workspace, ...) compose into the server's own policy
// only. A tenant without a `policy` key gets the server's policy with its limit flags.
// Nothing of the server's host directories (--mount, --output, --workspace) reaches a
// tenant unless its [[tenant]] entry says `inherit_server_mounts = true`. Each tenant owns
// its named workspaces (`workspace = "persistent:NAME"`, serve/workspaces.h).
//
// At start, serve resolves every tenant (ResolveTenantPolicies: a tenant whose policy
// does not load or check refuses the start, naming the tenant), then installs them
// (InstallTenantProfiles): the tenant's cells come from a CellSessionManager profile named
// after it, its tools' limits from ToolEnv::tenants. A session finds both through
// mcp::Session::tenant() (tools/tool_env.h).
// Threading: start-up only, before serving.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "policies/compiler.h"
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "serve/http_config.h"
#include "serve/workspace_leases.h"
#include "tools/tool_env.h"

namespace mcpcell::serve {

// The tools' part of a policy: enabled tools, exec timeouts, output kept, name, network.
tools::CellToolsConfig ToolsConfigFromPolicy(const policies::Policy& policy);

// Each tenant's effective policy, by tenant name. `server_policy` is the server's own
// (--policy with its limit flags, without its host directories), for tenants without a
// `policy` key; `server_host_dirs` holds the server's --mount, --output and --workspace,
// applied only to tenants with inherit_server_mounts. Errors read
// `tenant "bob": policy "./b.toml": <the loader's message>`.
Result<std::map<std::string, policies::Policy>> ResolveTenantPolicies(
    const HttpConfig& config, const policies::Policy& server_policy,
    const policies::PolicyOverrides& server_host_dirs, const std::string& state_dir);

// The part of `flags` that names host directories (--mount, --output, --workspace).
policies::PolicyOverrides HostDirOverrides(const policies::PolicyOverrides& flags);
// `flags` without that part (the limits and timeouts).
policies::PolicyOverrides WithoutHostDirs(policies::PolicyOverrides flags);

// Registers each tenant's cells profile on `cells` (spec compiled from its policy, its
// session idle and lifetime) and its tools config in `env.tenants`. Compiles one trial
// spec per tenant first, so a policy that cannot become a cell refuses the start.
// `workspaces` (may be null: then a named workspace is not locked) serves their factories.
Status InstallTenantProfiles(const std::map<std::string, policies::Policy>& tenants,
                             const std::string& state_dir, const std::string& skeleton_dir,
                             sandbox::CellSessionManager& cells, tools::ToolEnv& env,
                             WorkspaceLeases* workspaces = nullptr);

// The spec factory of cells under `policy`: its compiled spec plus the package service's
// environment (policies/package_env.h). With a named workspace, each cell first locks it
// through `workspaces` (the cell hooks release it); a busy one fails the factory with
// WorkspaceStore::Lock's error.
sandbox::CellSpecFactory PolicySpecFactory(policies::Policy policy, std::string state_dir,
                                           std::string skeleton_dir,
                                           WorkspaceLeases* workspaces = nullptr);

}  // namespace mcpcell::serve
