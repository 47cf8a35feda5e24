// Named workspaces (`filesystem.workspace = "persistent:NAME"`): the grammar of a name and
// where a named workspace lives on the host. A name is 1-64 of [A-Za-z0-9._-], not starting
// with "." (so never "." or "..", and never the owner directory's own ".meta"); the same
// rule applies to the owner (a tenant name), whose sessions' workspaces are
// <state_dir>/workspaces/<owner>/<NAME>, the server's own sessions' under "_".
// serve/workspaces.h locks, records and removes them. Threading: stateless functions.
#pragma once

#include <string>

#include "base/status.h"

namespace mcpcell::policies {

// The owner directory of the server's own sessions (no tenant).
inline constexpr const char* kNoTenantOwner = "_";

// Ok when `name` may name a workspace (or an owner); else the reason, quoting it.
Status CheckWorkspaceName(const std::string& name);

// "_" for an empty owner, else `owner`.
std::string WorkspaceOwnerDir(const std::string& owner);

// <state_dir>/workspaces
std::string WorkspacesRoot(const std::string& state_dir);

// <state_dir>/workspaces/<owner or "_">/<name>
std::string NamedWorkspaceDir(const std::string& state_dir, const std::string& owner,
                              const std::string& name);

}  // namespace mcpcell::policies
