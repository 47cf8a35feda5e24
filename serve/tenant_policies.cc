#include "serve/tenant_policies.h"

#include "policies/compiler.h"
#include "policies/loader.h"
#include "policies/package_env.h"
#include "policies/workspace_name.h"

namespace mcpcell::serve {
namespace {
constexpr const char* kWarmPoolIdPrefix = "w";
}  // namespace

using tools::CellToolsConfig;
using tools::ToolEnv;

CellToolsConfig ToolsConfigFromPolicy(const policies::Policy& policy) {
  CellToolsConfig config;
  config.keep_bytes_per_stream = policy.limits.output_keep_bytes;
  config.default_timeout = policy.time.exec_default;
  config.max_timeout = policy.time.exec_max;
  config.enabled_tools.insert(policy.tools.enabled.begin(), policy.tools.enabled.end());
  config.toolset = policy.tools.toolset;
  const auto& toolset = policies::ToolsetTools(policy.tools.toolset);
  config.toolset_tools.insert(toolset.begin(), toolset.end());
  config.archive_bytes = policy.limits.archive_bytes;
  config.archive_ratio = policy.limits.archive_ratio;
  config.archive_entries = policy.limits.archive_entries;
  config.policy_name = policy.name;
  config.template_name = policy.filesystem.template_name;
  config.network_summary = policies::NetworkSummary(policy);
  config.packages = policy.packages;
  config.packages_summary = policies::PackagesSummary(policy.packages);
  config.audit_command_text = policy.audit.commands == policies::AuditCommands::kFull;
  return config;
}

policies::PolicyOverrides HostDirOverrides(const policies::PolicyOverrides& flags) {
  return policies::PolicyOverrides{
      .mounts = flags.mounts, .output_dir = flags.output_dir, .workspace_dir = flags.workspace_dir};
}

policies::PolicyOverrides WithoutHostDirs(policies::PolicyOverrides flags) {
  flags.mounts.clear();
  flags.output_dir.clear();
  flags.workspace_dir.clear();
  return flags;
}

namespace {

// One tenant's policy: its own (as written) or the server's, plus the server's host
// directories when the config lets it inherit them; it owns its named workspaces.
Result<policies::Policy> ResolveTenant(const std::string& name, const TenantConfig& tenant,
                                       const policies::Policy& server_policy,
                                       const policies::PolicyOverrides& server_host_dirs,
                                       const std::string& state_dir) {
  policies::Policy base = server_policy;
  if (!tenant.policy.empty()) {
    auto loaded = policies::ResolvePolicy(tenant.policy, {.state_dir = state_dir, .tenant = true});
    if (!loaded) return loaded.error();
    base = std::move(*loaded);
  }
  // The same composition checks (and a persistent workspace_dir made) as the server's own.
  auto composed = policies::ApplyOverrides(
      std::move(base),
      tenant.inherit_server_mounts ? server_host_dirs : policies::PolicyOverrides{}, state_dir);
  if (!composed) return composed.error();
  composed->filesystem.workspace_owner = name;
  if (!composed->filesystem.workspace_name.empty()) {
    if (Status s = policies::CheckWorkspaceName(name); !s || name == policies::kNoTenantOwner) {
      return Error::Msg("workspace \"persistent:" + composed->filesystem.workspace_name +
                        "\": a tenant that owns named workspaces needs a name of 1-64 "
                        "[A-Za-z0-9._-], not starting with \".\" and not \"_\"");
    }
  }
  return composed;
}

}  // namespace

Result<std::map<std::string, policies::Policy>> ResolveTenantPolicies(
    const HttpConfig& config, const policies::Policy& server_policy,
    const policies::PolicyOverrides& server_host_dirs, const std::string& state_dir) {
  std::map<std::string, policies::Policy> out;
  for (const auto& [name, tenant] : config.tenants) {
    auto policy = ResolveTenant(name, tenant, server_policy, server_host_dirs, state_dir);
    if (!policy) {
      const std::string where =
          "tenant \"" + name + "\"" +
          (tenant.policy.empty() ? std::string() : ": policy \"" + tenant.policy + "\"");
      return policy.error().Wrap(where);
    }
    out.emplace(name, std::move(*policy));
  }
  return out;
}

sandbox::CellSpecFactory PolicySpecFactory(policies::Policy policy, std::string state_dir,
                                           std::string skeleton_dir, WorkspaceLeases* workspaces) {
  return [policy = std::move(policy), state_dir = std::move(state_dir),
          skeleton = std::move(skeleton_dir),
          workspaces](const std::string& id) -> Result<sandbox::CellSpec> {
    auto spec = policies::CompileCellSpec(policy, id, state_dir, skeleton);
    // The warm pool asks for a spec only to learn that a persistent workspace turns it off
    // (sandbox/warm_pool.cc) and never makes that cell: its ids (GenerateCellId('w')) lock
    // nothing, or the lock would outlive a cell that never existed.
    if (!spec || !workspaces || id.starts_with(kWarmPoolIdPrefix)) return spec;
    if (Status s = workspaces->Take(policy, id); !s) return s.error();
    return spec;
  };
}

Status InstallTenantProfiles(const std::map<std::string, policies::Policy>& tenants,
                             const std::string& state_dir, const std::string& skeleton_dir,
                             sandbox::CellSessionManager& cells, ToolEnv& env,
                             WorkspaceLeases* workspaces) {
  for (const auto& [name, policy] : tenants) {
    const std::string where = "tenant \"" + name + "\": policy \"" + policy.name + "\"";
    if (auto trial = policies::CompileCellSpec(policy, "tenant-check", state_dir, skeleton_dir);
        !trial) {
      return trial.error().Wrap(where);
    }
    sandbox::CellSessionProfile profile;
    profile.factory = PolicySpecFactory(policy, state_dir, skeleton_dir, workspaces);
    profile.idle_timeout = policy.time.session_idle;
    profile.max_lifetime = policy.time.session_max;
    profile.pause_idle = policy.time.session_pause_idle;
    if (auto st = cells.AddProfile(name, std::move(profile)); !st) return st.error().Wrap(where);
    env.tenants[name] = ToolsConfigFromPolicy(policy);
  }
  return Ok();
}

}  // namespace mcpcell::serve
