// ServeAudit's named-workspace records (serve_audit.h): workspace.remove, written when the
// server removes a workspace unused past its owner's [time] workspace_retention
// (serve/workspace_leases.h). Apart from serve_audit.cc to keep that file's size.
#include <string>

#include "policies/workspace_name.h"
#include "serve/serve_audit.h"

namespace mcpcell::serve {

void ServeAudit::WorkspaceRemoved(const WorkspaceInfo& w, const std::string& reason) {
  const std::string tenant = w.owner == policies::kNoTenantOwner ? "" : w.owner;
  nlohmann::json fields = {{"workspace", w.name}, {"bytes", w.bytes}, {"reason", reason}};
  if (w.last_used) fields["last_used"] = FormatUtc(*w.last_used);
  Append("workspace.remove", tenant, "", "", fields);
}

}  // namespace mcpcell::serve
