#include "policies/workspace_name.h"

namespace mcpcell::policies {

Status CheckWorkspaceName(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return Error::Msg("\"" + name + "\" is not a workspace name: it must be 1-64 characters");
  }
  if (name.front() == '.') {
    return Error::Msg("\"" + name + "\" is not a workspace name: it must not start with \".\"");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Error::Msg("\"" + name +
                        "\" is not a workspace name: only letters, digits, '.', '_' and '-'");
    }
  }
  return Ok();
}

std::string WorkspaceOwnerDir(const std::string& owner) {
  return owner.empty() ? std::string(kNoTenantOwner) : owner;
}

std::string WorkspacesRoot(const std::string& state_dir) { return state_dir + "/workspaces"; }

std::string NamedWorkspaceDir(const std::string& state_dir, const std::string& owner,
                              const std::string& name) {
  return WorkspacesRoot(state_dir) + "/" + WorkspaceOwnerDir(owner) + "/" + name;
}

}  // namespace mcpcell::policies
