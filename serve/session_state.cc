#include "serve/session_state.h"

#include <utility>

#include "mcp/log.h"
#include "serve/serve_audit.h"

namespace mcpcell::serve {
namespace {

// The store's layer names and the cell paths they are mounted at.
const std::map<std::string, std::string>& LayerTargets() {
  static const std::map<std::string, std::string> targets = {
      {"root", "/"}, {"usr", "/usr"}, {"workspace", "/workspace"}};
  return targets;
}

tools::SnapshotSummary Summary(const sandbox::SnapshotInfo& info) {
  return {.id = info.id,
          .name = info.name,
          .created = info.created,
          .digest = info.digest,
          .files = info.files,
          .stored_bytes = info.stored_bytes};
}

std::vector<std::string> CaptureNotes(const sandbox::CaptureReport& report) {
  std::vector<std::string> notes;
  for (const std::string& p : report.setid_stripped)
    notes.push_back("setuid/setgid bit not kept: " + p);
  for (const std::string& p : report.skipped) notes.push_back("not captured: " + p);
  if (report.mapped_to_nobody > 0)
    notes.push_back(std::to_string(report.mapped_to_nobody) +
                    " file(s) owned by ids outside the cell's range are kept as nobody");
  return notes;
}

}  // namespace

std::string StoreTenant(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }

SessionState::SessionState(SessionStateOptions options)
    : options_(std::move(options)), store_(options_.state_dir + "/snapshots") {}

const policies::Policy* SessionState::PolicyOf(const std::string& tenant) const {
  if (tenant.empty()) return options_.server_policy;
  if (!options_.tenant_policies) return nullptr;
  auto it = options_.tenant_policies->find(tenant);
  return it == options_.tenant_policies->end() ? nullptr : &it->second;
}

Result<std::shared_ptr<sandbox::CellSession>> SessionState::SessionOf(const std::string& key,
                                                                      const std::string& tenant) {
  if (!cells_) return Error::Msg("snapshots: the server has no cells");
  if (!PolicyOf(tenant)) return Error::Msg("tenant \"" + tenant + "\" has no policy");
  return cells_->Get(key, tenant);  // a session's cell profile is its tenant (ToolEnv)
}

Result<std::vector<sandbox::LayerSource>> SessionState::Sources(
    sandbox::CellInstance& cell, const sandbox::CellWritableLayers& layers,
    std::vector<std::string>* notes) const {
  if (layers.single_mapping)
    return Error::Msg("snapshots need a server running as root (cells with their own id range)");
  auto source = [&layers](std::string name, std::string dir) {
    return sandbox::LayerSource{.layer = std::move(name),
                                .dir = std::move(dir),
                                .uid_base = layers.uid_base,
                                .gid_base = layers.gid_base,
                                .exclude = {}};
  };
  std::vector<sandbox::LayerSource> out = {source("root", layers.root_upper)};
  for (const auto& [path, upper] : layers.system_uppers) {
    if (path == "/usr") {
      out.push_back(source("usr", upper));
    } else {
      notes->push_back(path + " is not captured (snapshots hold /, /usr and /workspace)");
    }
  }
  if (!cell.spec().workspace_host_dir.empty()) {
    notes->push_back("the persistent workspace is not in the snapshot: it is kept apart, and a "
                     "restore leaves it as it is");
  } else if (!layers.workspace.empty()) {
    out.push_back(source("workspace", layers.workspace));
  }
  return out;
}

Result<sandbox::CaptureReport> SessionState::CaptureCell(sandbox::CellInstance& cell,
                                                         const std::string& tenant,
                                                         const std::string& name,
                                                         const sandbox::SessionBase* base,
                                                         const std::string& kind,
                                                         std::vector<std::string>* notes) {
  const policies::Policy* policy = PolicyOf(tenant);
  if (!policy) return Error::Msg("tenant \"" + tenant + "\" has no policy");
  Result<sandbox::CellWritableLayers> layers = cell.WritableLayers();
  if (!layers) return layers.error();
  auto sources = Sources(cell, *layers, notes);
  if (!sources) return sources.error();
  sandbox::SnapshotLimits limits{.storage_bytes = policy->limits.snapshot_storage_bytes};
  return store_.Capture(StoreTenant(tenant), name, *sources, limits,
                        base ? base->snapshot_id : "", kind);
}

Result<sandbox::SessionBase> SessionState::BaseOf(const std::string& id, bool hibernation) {
  auto dirs = store_.LayerDirs(id);
  if (!dirs) return dirs.error();
  sandbox::SessionBase base{.snapshot_id = id, .layers = {}, .hibernation = hibernation};
  for (const auto& [name, dir] : *dirs) {
    auto target = LayerTargets().find(name);
    if (target == LayerTargets().end())
      return Error::Msg("snapshot " + id + ": unknown layer \"" + name + "\"");
    base.layers.push_back({.target = target->second, .host_dir = dir});
  }
  return base;
}

Result<sandbox::SnapshotInfo> SessionState::Visible(const std::string& tenant,
                                                    const std::string& id_or_name) {
  auto info = store_.Get(StoreTenant(tenant), id_or_name);
  if (!info) return info.error();
  if (!info->kind.empty()) return Error::Msg("snapshot \"" + id_or_name + "\" not found");
  return info;
}

Result<uint64_t> SessionState::UsedBytes(const std::string& tenant) {
  auto all = store_.List(StoreTenant(tenant));
  if (!all) return all.error();
  uint64_t used = 0;
  for (const sandbox::SnapshotInfo& s : *all) used += s.stored_bytes;
  return used;
}

Result<tools::SnapshotCreated> SessionState::Create(const std::string& session_key,
                                                    const std::string& tenant,
                                                    const std::string& name) {
  if (!name.empty())
    if (Status s = sandbox::CheckSnapshotName(name); !s) return s.error().Wrap("snapshot name");
  auto session = SessionOf(session_key, tenant);
  if (!session) return session.error();
  tools::SnapshotCreated out;
  Result<sandbox::CaptureReport> report = Error::Msg("the capture did not run");
  Status st = (*session)->WithFrozenCell(
      [&](sandbox::CellInstance& cell, const sandbox::SessionBase* base, bool frozen) -> Status {
        if (!frozen)
          out.notes.push_back("the cell could not be paused for the capture: files changed by "
                              "running programs meanwhile may be caught half-written");
        report = CaptureCell(cell, tenant, name, base, "", &out.notes);
        if (!report) return report.error();
        return Ok();
      });
  if (!st) return st.error().Wrap("snapshot_create");
  for (std::string& n : CaptureNotes(*report)) out.notes.push_back(std::move(n));
  out.snapshot = Summary(report->info);
  out.files_hashed = report->files_hashed;
  out.new_object_bytes = report->new_object_bytes;
  const policies::Policy* policy = PolicyOf(tenant);
  out.quota_bytes = policy ? policy->limits.snapshot_storage_bytes : 0;
  if (auto used = UsedBytes(tenant); used) out.quota_used_bytes = *used;
  if (options_.audit) options_.audit->SnapshotCreated(tenant, session_key, report->info);
  return out;
}

Result<std::vector<tools::SnapshotSummary>> SessionState::List(const std::string& tenant) {
  auto all = store_.List(StoreTenant(tenant));
  if (!all) return all.error();
  std::vector<tools::SnapshotSummary> out;
  for (const sandbox::SnapshotInfo& info : *all)
    if (info.kind.empty()) out.push_back(Summary(info));
  return out;
}

Result<tools::SnapshotRestored> SessionState::Restore(const std::string& session_key,
                                                      const std::string& tenant,
                                                      const std::string& id_or_name) {
  auto session = SessionOf(session_key, tenant);
  if (!session) return session.error();
  std::lock_guard lock(mu_);
  auto info = Visible(tenant, id_or_name);
  if (!info) return info.error();
  if (Status ok = store_.Verify(info->id); !ok)
    return ok.error().Wrap("snapshot " + info->id + " is damaged and was not restored");
  auto base = BaseOf(info->id, false);
  if (!base) return base.error();
  auto restarted = (*session)->RestartOver(std::move(*base));
  if (!restarted) return restarted.error().Wrap("snapshot_restore");
  tools::SnapshotRestored out;
  info->layers.clear();
  out.snapshot = Summary(*info);
  out.programs_ended = restarted->programs_ended;
  if (!restarted->counted)
    out.notes.push_back("how many programs were running is not known (the cell was paused or "
                        "did not answer); any that ran were ended");
  if (options_.audit)
    options_.audit->SnapshotRestored(tenant, session_key, *info, out.programs_ended);
  return out;
}

Status SessionState::Delete(const std::string& tenant, const std::string& id_or_name) {
  std::lock_guard lock(mu_);
  auto info = Visible(tenant, id_or_name);
  if (!info) return info.error();
  if (cells_ && cells_->BaseInUse(info->id)) {
    return Error::Msg("snapshot " + info->id +
                      " is in use: a live session runs over it (its files are that session's "
                      "lower layers); restore another snapshot there or end it first");
  }
  if (Status st = store_.Delete(StoreTenant(tenant), info->id); !st) return st;
  if (options_.audit) options_.audit->SnapshotDeleted(tenant, *info);
  return Ok();
}

Result<sandbox::SessionBase> SessionState::Hibernate(sandbox::CellInstance& cell,
                                                     const std::string& key,
                                                     const std::string& tenant,
                                                     const sandbox::SessionBase* base, bool frozen) {
  std::vector<std::string> notes;
  auto report = CaptureCell(cell, tenant, "", base, sandbox::kSnapshotKindHibernation, &notes);
  if (!report) return report.error().Wrap("hibernate");
  auto kept = BaseOf(report->info.id, true);
  if (!kept) {
    (void)store_.Delete(StoreTenant(tenant), report->info.id);
    return kept.error().Wrap("hibernate");
  }
  if (options_.audit)
    options_.audit->SessionHibernated(tenant, key, cell.id(), report->info, frozen);
  return kept;
}

void SessionState::BaseReleased(const std::string& key, const std::string& tenant,
                                const sandbox::SessionBase& base) {
  if (!base.hibernation) return;  // the tenant's own snapshot: it stays
  if (Status st = store_.Delete(StoreTenant(tenant), base.snapshot_id); !st) {
    mcp::log::Warn("session " + key + ": hibernation snapshot " + base.snapshot_id +
                   " not deleted: " + st.error().message);
  }
}

}  // namespace mcpcell::serve
