// `mcpcell session list|delete`: the hibernated sessions a restarted server can bring back
// (serve/session_records.h, <state_dir>/sessions): each one's id (what `serve --resume` or an
// HTTP client's Mcp-Session-Id names), tenant, transport, age and the storage of its files.
// delete ends one for good (its record and its hidden snapshot); with no server running on
// the state dir, or the server's copy of a live session's record comes back at its next
// hibernation.
//
// Exit status: 0 done, 2 anything else (unknown session, bad arguments).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "sandbox/snapshot_store.h"
#include "sandbox/state_dir.h"
#include "serve/session_records.h"
#include "serve/session_state.h"
#include "serve/workspaces.h"

namespace mcpcell::cli {
namespace {

constexpr int kUsage = 2;

struct SessionOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string tenant;  // list: only this tenant's ("_" = the server's own)
  std::string id;      // delete
  bool all_tenants = true;
  bool json = false;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "mcpcell session: %s\n", what.c_str());
  return kUsage;
}

// "3d4h", "12m", "40s" since `utc`; "?" when it cannot be read.
std::string Age(const std::string& utc) {
  auto t = serve::ParseUtc(utc);
  if (!t) return "?";
  long long s =
      std::chrono::duration_cast<std::chrono::seconds>(serve::WallClock::now() - *t).count();
  if (s < 0) s = 0;
  if (s >= 86400) return std::to_string(s / 86400) + "d" + std::to_string(s % 86400 / 3600) + "h";
  if (s >= 3600) return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
  if (s >= 60) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

int RunList(const SessionOptions& o) {
  serve::SessionRecords records(o.state_dir + "/sessions");
  sandbox::SnapshotStore store(o.state_dir + "/snapshots");
  std::vector<std::string> warnings;
  std::vector<serve::SessionRecord> all = records.List(&warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "mcpcell session: %s\n", w.c_str());
  const std::string only = o.tenant == "_" ? "" : o.tenant;
  nlohmann::json out = nlohmann::json::array();
  if (!o.json)
    std::printf("%-32s  %-16s  %-5s  %-8s  %12s  %s\n", "SESSION", "TENANT", "VIA", "AGE", "BYTES",
                "HIBERNATED AT");
  for (const serve::SessionRecord& r : all) {
    if (!o.tenant.empty() && r.tenant != only) continue;
    auto snap = store.Get(serve::StoreTenant(r.tenant), r.snapshot_id);
    const long long bytes = snap ? static_cast<long long>(snap->stored_bytes) : -1;
    if (o.json) {
      out.push_back({{"session", r.resume_id},
                     {"tenant", r.tenant},
                     {"transport", r.transport},
                     {"created", r.created},
                     {"hibernated_at", r.hibernated_at},
                     {"snapshot_id", r.snapshot_id},
                     {"stored_bytes", snap ? nlohmann::json(snap->stored_bytes) : nullptr},
                     {"files", snap ? nlohmann::json(snap->files) : nullptr},
                     {"policy", r.policy_name}});
      continue;
    }
    std::printf("%-32s  %-16s  %-5s  %-8s  %12s  %s\n", r.resume_id.c_str(),
                r.tenant.empty() ? "_" : r.tenant.c_str(), r.transport.c_str(),
                Age(r.created).c_str(), bytes < 0 ? "missing" : std::to_string(bytes).c_str(),
                r.hibernated_at.c_str());
  }
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int RunDelete(const SessionOptions& o) {
  serve::SessionRecords records(o.state_dir + "/sessions");
  auto record = records.Read(o.id);
  if (!record) return Fail("delete: " + record.error().message);
  sandbox::SnapshotStore store(o.state_dir + "/snapshots");
  if (Status st = store.Delete(serve::StoreTenant(record->tenant), record->snapshot_id);
      !st && st.error().message.find("not found") == std::string::npos)
    return Fail("delete " + o.id + ": its files: " + st.error().message);
  if (Status st = records.Remove(o.id); !st)
    return Fail("delete " + o.id + ": " + st.error().message);
  std::printf("deleted hibernated session %s\n", o.id.c_str());
  return 0;
}

const bool kRegistered = RegisterCommand("session", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<SessionOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "session",
      "List and delete hibernated sessions (what `serve --resume` and HTTP clients resume)");
  cmd->require_subcommand(1);
  cmd->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();

  CLI::App* list = cmd->add_subcommand(
      "list", "Each hibernated session's id, tenant, transport, age and the size of its files");
  list->add_option("--state-dir", o->state_dir, "The server's state dir");
  list->add_option("--tenant", o->tenant, "Only this tenant's (\"_\": the server's own)");
  list->add_flag("--json", o->json, "One JSON array instead of a table");
  list->callback([o, exit_code] { *exit_code = RunList(*o); });

  CLI::App* del = cmd->add_subcommand(
      "delete", "End a hibernated session for good: its record and its kept files");
  del->add_option("--state-dir", o->state_dir, "The server's state dir");
  del->add_option("session", o->id, "The session's id (32 hex digits)")->required();
  del->callback([o, exit_code] { *exit_code = RunDelete(*o); });
});

}  // namespace
}  // namespace mcpcell::cli
