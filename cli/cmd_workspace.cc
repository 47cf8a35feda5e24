// `mcpcell workspace list|delete`: the operator's view of the named workspaces
// (`filesystem.workspace = "persistent:NAME"`) in <state_dir>/workspaces (serve/workspaces.h),
// on the host, with or without a running server: each one's owner, last use, size, and the
// session whose cell holds it now. delete is refused while a cell holds the workspace.
//
// Exit status: 0 done, 2 anything else (unknown workspace, a locked one, bad arguments).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "policies/workspace_name.h"
#include "sandbox/state_dir.h"
#include "serve/workspaces.h"

namespace mcpcell::cli {
namespace {

constexpr int kUsage = 2;

struct WorkspaceOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string tenant;  // list: one owner ("_" = the server's own sessions); "" = all
  std::string target;  // delete: TENANT/NAME
  bool json = false;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "mcpcell workspace: %s\n", what.c_str());
  return kUsage;
}

std::string LockedBy(const serve::WorkspaceInfo& w) {
  if (!w.holder) return "-";
  std::string by = "pid " + std::to_string(w.holder->pid) + " cell " + w.holder->cell;
  if (!w.holder->session.empty()) by += " session " + w.holder->session;
  return by;
}

nlohmann::json ToJson(const serve::WorkspaceInfo& w) {
  nlohmann::json j = {{"tenant", w.owner}, {"name", w.name}, {"dir", w.dir}, {"bytes", w.bytes}};
  j["last_used"] = w.last_used ? nlohmann::json(serve::FormatUtc(*w.last_used)) : nullptr;
  if (w.holder) {
    j["locked_by"] = {{"pid", w.holder->pid},
                      {"cell", w.holder->cell},
                      {"session", w.holder->session},
                      {"since", w.holder->since}};
  } else {
    j["locked_by"] = nullptr;
  }
  return j;
}

int RunList(const WorkspaceOptions& o) {
  if (!o.tenant.empty()) {
    if (Status s = policies::CheckWorkspaceName(o.tenant); !s)
      return Fail("--tenant: " + s.error().message);
  }
  auto list = serve::WorkspaceStore(o.state_dir).List(o.tenant);
  if (!list) return Fail(list.error().message);
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& w : *list) all.push_back(ToJson(w));
    std::printf("%s\n", all.dump(2).c_str());
    return 0;
  }
  std::printf("%-16s  %-24s  %-20s  %12s  %s\n", "TENANT", "NAME", "LAST USED", "BYTES",
              "LOCKED BY");
  for (const auto& w : *list) {
    std::printf("%-16s  %-24s  %-20s  %12llu  %s\n", w.owner.c_str(), w.name.c_str(),
                w.last_used ? serve::FormatUtc(*w.last_used).c_str() : "-",
                static_cast<unsigned long long>(w.bytes), LockedBy(w).c_str());
  }
  return 0;
}

int RunDelete(const WorkspaceOptions& o) {
  const size_t slash = o.target.find('/');
  if (slash == std::string::npos || o.target.find('/', slash + 1) != std::string::npos) {
    return Fail("delete " + o.target + ": expected TENANT/NAME (\"_/NAME\" for the server's own)");
  }
  std::string owner = o.target.substr(0, slash);
  if (owner == policies::kNoTenantOwner) owner.clear();
  if (owner.empty() && slash != 1) return Fail("delete " + o.target + ": no tenant before '/'");
  serve::WorkspaceId id{owner, o.target.substr(slash + 1)};
  if (Status s = serve::WorkspaceStore(o.state_dir).Delete(id); !s) {
    return Fail("delete " + o.target + ": " + s.error().message);
  }
  std::printf("deleted %s\n", o.target.c_str());
  return 0;
}

const bool kRegistered = RegisterCommand("workspace", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<WorkspaceOptions>();
  CLI::App* ws = parent.add_subcommand(
      "workspace", "List and delete tenants' named workspaces (workspace = \"persistent:NAME\")");
  ws->require_subcommand(1);
  ws->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();

  CLI::App* list = ws->add_subcommand(
      "list", "Each workspace's tenant, last use, size and the session holding it now");
  list->add_option("--state-dir", o->state_dir, "The server's state dir");
  list->add_option("--tenant", o->tenant, "Only this tenant's (\"_\": the server's own)");
  list->add_flag("--json", o->json, "One JSON array instead of a table");
  list->callback([o, exit_code] { *exit_code = RunList(*o); });

  CLI::App* del = ws->add_subcommand(
      "delete", "Remove a workspace and its files; refused while a live cell holds it");
  del->add_option("--state-dir", o->state_dir, "The server's state dir");
  del->add_option("workspace", o->target, "TENANT/NAME")->required();
  del->callback([o, exit_code] { *exit_code = RunDelete(*o); });
});

}  // namespace
}  // namespace mcpcell::cli
