// Per-tenant policies of `mcpcell serve --http`: every tenant of the HTTP config gets the
// policy its `policy` key names, resolved exactly like --policy (a shipped profile or a
// .toml file, the same loader checks) and used as written: the command-line policy flags
// (--memory-mib, --mount, --output, --workspace, ...) compose into the server's own policy
// only. A tenant without a `policy` key gets the server's policy, flags included.
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
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "serve/http_config.h"
#include "tools/tool_env.h"

namespace mcpcell::serve {

// The tools' part of a policy: enabled tools, exec timeouts, output kept, name, network.
tools::CellToolsConfig ToolsConfigFromPolicy(const policies::Policy& policy);

// Each tenant's effective policy, by tenant name. `server_policy` is the server's own
// (--policy with its flags), for tenants without a `policy` key. Errors read
// `tenant "bob": policy "./b.toml": <the loader's message>`.
Result<std::map<std::string, policies::Policy>> ResolveTenantPolicies(
    const HttpConfig& config, const policies::Policy& server_policy, const std::string& state_dir);

// Registers each tenant's cells profile on `cells` (spec compiled from its policy, its
// session idle and lifetime) and its tools config in `env.tenants`. Compiles one trial
// spec per tenant first, so a policy that cannot become a cell refuses the start.
Status InstallTenantProfiles(const std::map<std::string, policies::Policy>& tenants,
                             const std::string& state_dir, const std::string& skeleton_dir,
                             sandbox::CellSessionManager& cells, tools::ToolEnv& env);

// The spec factory of cells under `policy`: its compiled spec plus the package service's
// environment (policies/package_env.h).
sandbox::CellSpecFactory PolicySpecFactory(policies::Policy policy, std::string state_dir,
                                           std::string skeleton_dir);

}  // namespace mcpcell::serve
