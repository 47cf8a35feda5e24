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
    : options_(std::move(options)), store_(options_.state_dir + "/snapshots") {
  if (!options_.audit) return;
  ServeAudit* audit = options_.audit;
  processes_.SetEndListener(
      [audit](const tools::BackgroundProcess& p, const tools::ProcessState& s) {
        audit->BackgroundExecEnded(p, s);
      });
  // A session's processes end with it, recorded before its session.end.
  audit->SetSessionEnding(
      [this](const std::string& id, const std::string& why) { processes_.EndSession(id, why); });
}

SessionState::~SessionState() {
  // The cells are gone by now (they go before this): what is left ends with the server.
  processes_.EndAll("server shutdown");
  if (options_.audit) options_.audit->SetSessionEnding(nullptr);
}

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
    notes->push_back(
        "the persistent workspace is not in the snapshot: it is kept apart, and a "
        "restore leaves it as it is");
  } else if (!layers.workspace.empty()) {
    out.push_back(source("workspace", layers.workspace));
  }
  return out;
}

Result<sandbox::CaptureReport> SessionState::CaptureCell(
    sandbox::CellInstance& cell, const std::string& tenant, const std::string& name,
    const sandbox::SessionBase* base, const std::string& kind, std::vector<std::string>* notes) {
  const policies::Policy* policy = PolicyOf(tenant);
  if (!policy) return Error::Msg("tenant \"" + tenant + "\" has no policy");
  Result<sandbox::CellWritableLayers> layers = cell.WritableLayers();
  if (!layers) return layers.error();
  auto sources = Sources(cell, *layers, notes);
  if (!sources) return sources.error();
  // The store counts every snapshot of the tenant; each kind is bounded apart, so the
  // bound handed to it is the quota plus what the other kind uses.
  const bool hibernation = kind == sandbox::kSnapshotKindHibernation;
  sandbox::SnapshotLimits limits{.storage_bytes = policy->limits.snapshot_storage_bytes};
  if (limits.storage_bytes > 0) {
    auto other = UsedBytes(tenant, !hibernation);
    if (!other) return other.error();
    limits.storage_bytes += *other;
  }
  auto report = store_.Capture(StoreTenant(tenant), name, *sources, limits,
                               base ? base->snapshot_id : "", kind);
  if (!report && hibernation && report.error().message.find("quota") != std::string::npos)
    return report.error().Wrap(
        "the tenant's hibernated sessions together exceed [limits] "
        "snapshot_storage (counted apart from its snapshots)");
  return report;
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

Result<uint64_t> SessionState::UsedBytes(const std::string& tenant, bool hibernation) {
  auto all = store_.List(StoreTenant(tenant));
  if (!all) return all.error();
  uint64_t used = 0;
  for (const sandbox::SnapshotInfo& s : *all)
    if ((s.kind == sandbox::kSnapshotKindHibernation) == hibernation) used += s.stored_bytes;
  return used;
}

Result<uint64_t> SessionState::HibernationBytes(const std::string& tenant) {
  return UsedBytes(tenant, true);
}

uint64_t SessionState::QuotaBytes(const std::string& tenant) const {
  const policies::Policy* policy = PolicyOf(tenant);
  return policy ? policy->limits.snapshot_storage_bytes : 0;
}

Status SessionState::MarkBase(const std::string& key, const std::string& id) {
  auto use = store_.MarkInUse(id);
  if (!use) return use.error().Wrap("mark snapshot " + id + " in use");
  std::lock_guard lock(mu_);
  uses_[{key, id}] = std::move(*use);
  return Ok();
}

void SessionState::UnmarkBase(const std::string& key, const std::string& id) {
  std::lock_guard lock(mu_);
  uses_.erase({key, id});
}

SessionState::SnapshotLock::SnapshotLock(SessionState& state, std::string id)
    : state_(state), id_(std::move(id)) {
  std::unique_lock lock(state_.mu_);
  state_.unlocked_.wait(lock, [&] { return !state_.busy_.count(id_); });
  state_.busy_.insert(id_);
}

SessionState::SnapshotLock::~SnapshotLock() {
  std::lock_guard lock(state_.mu_);
  state_.busy_.erase(id_);
  state_.unlocked_.notify_all();
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
          out.notes.push_back(
              "the cell could not be paused for the capture: files changed by "
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
  auto info = Visible(tenant, id_or_name);
  if (!info) return info.error();
  SnapshotLock held(*this, info->id);  // not deleted while it becomes the session's base
  if (Status ok = store_.Verify(info->id); !ok)
    return ok.error().Wrap("snapshot " + info->id + " is damaged and was not restored");
  auto base = BaseOf(info->id, false);
  if (!base) return base.error();
  if (Status marked = MarkBase(session_key, info->id); !marked)
    return marked.error().Wrap("snapshot_restore");
  auto restarted = (*session)->RestartOver(std::move(*base));
  if (!restarted) {
    std::optional<sandbox::SessionBase> now = (*session)->base();
    if (!now || now->snapshot_id != info->id) UnmarkBase(session_key, info->id);
    return restarted.error().Wrap("snapshot_restore");
  }
  tools::SnapshotRestored out;
  info->layers.clear();
  out.snapshot = Summary(*info);
  out.programs_ended = restarted->programs_ended;
  if (!restarted->counted)
    out.notes.push_back(
        "how many programs were running is not known (the cell was paused or "
        "did not answer); any that ran were ended");
  if (options_.audit)
    options_.audit->SnapshotRestored(tenant, session_key, *info, out.programs_ended);
  return out;
}

Status SessionState::Delete(const std::string& tenant, const std::string& id_or_name) {
  auto info = Visible(tenant, id_or_name);
  if (!info) return info.error();
  SnapshotLock held(*this, info->id);  // after a Restore of it: BaseInUse then says so
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
                                                     const sandbox::SessionBase* base,
                                                     bool frozen) {
  std::vector<std::string> notes;
  auto report = CaptureCell(cell, tenant, "", base, sandbox::kSnapshotKindHibernation, &notes);
  if (!report) return report.error().Wrap("hibernate");
  auto kept = BaseOf(report->info.id, true);
  Status marked = kept ? MarkBase(key, report->info.id) : Status(kept.error());
  if (!marked) {
    (void)store_.Delete(StoreTenant(tenant), report->info.id);
    return marked.error().Wrap("hibernate");
  }
  if (options_.audit)
    options_.audit->SessionHibernated(tenant, key, cell.id(), report->info, frozen);
  if (on_hibernated_) on_hibernated_(key, tenant, report->info);
  return kept;
}

Result<std::string> SessionState::Park(const std::string& key, const std::string& tenant) {
  auto session = SessionOf(key, tenant);
  if (!session) return session.error();
  const sandbox::CellSessionInfo info = (*session)->Info();
  std::optional<sandbox::SessionBase> base = (*session)->base();
  if (info.cell_id.empty() && base && base->hibernation) return base->snapshot_id;
  if (info.cell_id.empty() && !base) return std::string();  // nothing was ever written
  // A cell (or a base of the tenant's own, which a cell made now shows): captured frozen.
  std::optional<sandbox::SessionBase> kept;
  Status st = (*session)->WithFrozenCell(
      [&](sandbox::CellInstance& cell, const sandbox::SessionBase* over, bool frozen) -> Status {
        auto made = Hibernate(cell, key, tenant, over, frozen);
        if (!made) return made.error();
        kept = std::move(*made);
        return Ok();
      });
  if (!st) return st.error().Wrap("keep the files of session " + key);
  const std::string id = kept->snapshot_id;
  // Ends the cell; the base it replaces is released (a previous hibernation's is deleted).
  auto restarted = (*session)->RestartOver(std::move(*kept));
  if (!restarted) return restarted.error().Wrap("keep the files of session " + key);
  return id;
}

Status SessionState::ResumeOver(const std::string& key, const std::string& tenant,
                                const std::string& snapshot_id, const std::string& note) {
  auto session = SessionOf(key, tenant);
  if (!session) return session.error();
  auto info = store_.Get(StoreTenant(tenant), snapshot_id);
  if (!info) return info.error();
  if (info->kind != sandbox::kSnapshotKindHibernation)
    return Error::Msg("snapshot " + snapshot_id + " is not a hibernated session's");
  auto base = BaseOf(snapshot_id, true);
  if (!base) return base.error();
  if (Status marked = MarkBase(key, snapshot_id); !marked) return marked;
  auto restarted = (*session)->RestartOver(std::move(*base), note);
  if (!restarted) {
    std::optional<sandbox::SessionBase> now = (*session)->base();
    if (!now || now->snapshot_id != snapshot_id) UnmarkBase(key, snapshot_id);
    return restarted.error();
  }
  return Ok();
}

void SessionState::BaseReleased(const std::string& key, const std::string& tenant,
                                const sandbox::SessionBase& base) {
  UnmarkBase(key, base.snapshot_id);  // before the Delete below, which the mark would refuse
  if (!base.hibernation) return;      // the tenant's own snapshot: it stays
  if (Status st = store_.Delete(StoreTenant(tenant), base.snapshot_id); !st) {
    mcp::log::Warn("session " + key + ": hibernation snapshot " + base.snapshot_id +
                   " not deleted: " + st.error().message);
  }
}

tools::SessionKept SessionState::Kept(const std::string& session_key, const std::string& tenant) {
  tools::SessionKept kept;
  if (resume_facts_) {
    if (auto facts = resume_facts_(session_key)) {
      kept.resume_id = facts->resume_id;
      kept.resume_hint = facts->transport == "stdio"
                             ? "mcpcell serve --resume " + facts->resume_id
                             : "reconnect with Mcp-Session-Id " + facts->resume_id;
      kept.hibernated_at = facts->hibernated_at;
    }
  }
  kept.quota_bytes = QuotaBytes(tenant);
  if (auto used = HibernationBytes(tenant); used) kept.tenant_hibernation_bytes = *used;
  auto session = SessionOf(session_key, tenant);
  if (!session) return kept;
  kept.hibernated = (*session)->Info().hibernated;
  std::optional<sandbox::SessionBase> base = (*session)->base();
  if (!base || !base->hibernation) return kept;
  kept.snapshot_id = base->snapshot_id;
  if (auto info = store_.Get(StoreTenant(tenant), base->snapshot_id); info) {
    kept.files = info->files;
    kept.stored_bytes = info->stored_bytes;
  }
  return kept;
}

}  // namespace mcpcell::serve
