#include "serve/tenant_policies.h"

#include "policies/compiler.h"
#include "policies/loader.h"
#include "policies/package_env.h"

namespace mcpcell::serve {

using tools::CellToolsConfig;
using tools::ToolEnv;

CellToolsConfig ToolsConfigFromPolicy(const policies::Policy& policy) {
  CellToolsConfig config;
  config.keep_bytes_per_stream = policy.limits.output_keep_bytes;
  config.default_timeout = policy.time.exec_default;
  config.max_timeout = policy.time.exec_max;
  config.enabled_tools.insert(policy.tools.enabled.begin(), policy.tools.enabled.end());
  config.policy_name = policy.name;
  config.template_name = policy.filesystem.template_name;
  config.network_summary = policies::NetworkSummary(policy);
  config.packages = policy.packages;
  config.packages_summary = policies::PackagesSummary(policy.packages);
  config.audit_command_text = policy.audit.commands == policies::AuditCommands::kFull;
  return config;
}

Result<std::map<std::string, policies::Policy>> ResolveTenantPolicies(
    const HttpConfig& config, const policies::Policy& server_policy, const std::string& state_dir) {
  std::map<std::string, policies::Policy> out;
  for (const auto& [name, tenant] : config.tenants) {
    if (tenant.policy.empty()) {
      out.emplace(name, server_policy);
      continue;
    }
    const std::string where = "tenant \"" + name + "\": policy \"" + tenant.policy + "\"";
    auto loaded = policies::ResolvePolicy(tenant.policy, {.state_dir = state_dir, .tenant = true});
    if (!loaded) return loaded.error().Wrap(where);
    // No overrides: the policy as written, with the same composition checks (and its
    // persistent workspace made) as the server's own.
    auto composed = policies::ApplyOverrides(std::move(*loaded), {}, state_dir);
    if (!composed) return composed.error().Wrap(where);
    out.emplace(name, std::move(*composed));
  }
  return out;
}

sandbox::CellSpecFactory PolicySpecFactory(policies::Policy policy, std::string state_dir,
                                           std::string skeleton_dir) {
  return [policy = std::move(policy), state_dir = std::move(state_dir),
          skeleton = std::move(skeleton_dir)](const std::string& id) -> Result<sandbox::CellSpec> {
    return policies::CompileCellSpec(policy, id, state_dir, skeleton);
  };
}

Status InstallTenantProfiles(const std::map<std::string, policies::Policy>& tenants,
                             const std::string& state_dir, const std::string& skeleton_dir,
                             sandbox::CellSessionManager& cells, ToolEnv& env) {
  for (const auto& [name, policy] : tenants) {
    const std::string where = "tenant \"" + name + "\": policy \"" + policy.name + "\"";
    if (auto trial = policies::CompileCellSpec(policy, "tenant-check", state_dir, skeleton_dir);
        !trial) {
      return trial.error().Wrap(where);
    }
    sandbox::CellSessionProfile profile;
    profile.factory = PolicySpecFactory(policy, state_dir, skeleton_dir);
    profile.idle_timeout = policy.time.session_idle;
    profile.max_lifetime = policy.time.session_max;
    profile.pause_idle = policy.time.session_pause_idle;
    if (auto st = cells.AddProfile(name, std::move(profile)); !st) return st.error().Wrap(where);
    env.tenants[name] = ToolsConfigFromPolicy(policy);
  }
  return Ok();
}

}  // namespace mcpcell::serve
