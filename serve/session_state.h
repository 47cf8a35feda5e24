// SessionState: the sessions' filesystem state in `mcpcell serve` — tools::SnapshotsView
// (snapshot_create/list/restore/delete) over one snapshot store at <state_dir>/snapshots and
// the cell sessions, and the cells' hibernation hooks (sandbox::CellHooks::hibernate,
// on_base_released).
//
// - Create freezes the session's cell, captures its writable layers over the snapshot the
//   session runs over (so every snapshot is whole), thaws it. A persistent workspace (a
//   host dir) is not captured: it is the session's own and survives cells anyway.
// - Restore verifies the snapshot and restarts the session over it (CellSession::
//   RestartOver); in another session of the tenant it is a fork.
// - Delete refuses a snapshot a live session runs over: its dirs are the lower layers of
//   that session's overlays, and overlayfs leaves changes to a mounted lower undefined.
// - Hibernation: at idle expiry the cell's files become a hidden snapshot (kind
//   "hibernation": never listed, restored or deleted by the tools), the next cell's base;
//   it is deleted when replaced by the next one or when the session ends, and kept at
//   server shutdown (what a restart brings back: serve/session_resume.h). Park keeps a
//   session's files the same way on request (shutdown, an HTTP session's expiry), and
//   ResumeOver makes a revived session's cells over them.
//
// - Processes: the sessions' background processes and python interpreters
//   (tools::ProcessTable, ToolEnv::processes) are kept here and end with their session
//   (ServeAudit's session-ending hook), each end written to the trail as exec.end.
//
// Tenants: a session's tenant ("" without one) names its cell profile; in the store the
// tenantless sessions are tenant "default" (the `mcpcell snapshot` CLI's default).
// Quota: the tenant's policy's [limits] snapshot_storage bounds its snapshots, and bounds
// its hibernation snapshots again, apart: neither kind's use counts against the other, so a
// tenant whose snapshots fill its quota still hibernates (docs/snapshots.md, "Quota").
// In-use marks: every snapshot a session has as its base (restored, resumed or its
// hibernation) is marked in the store (SnapshotStore::MarkInUse) until that base is
// released, so `mcpcell snapshot delete` in another process refuses it too.
// Locking: Restore and Delete lock the one snapshot they act on (a snapshot is not deleted
// while it becomes a base); different snapshots proceed at once.
// Threading: thread-safe; outlives the cell manager whose hooks call it, and is outlived by
// the ServeAudit it writes to.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "sandbox/snapshot_store.h"
#include "tools/process_table.h"
#include "tools/snapshots_view.h"

namespace mcpcell::serve {

class ServeAudit;

// A live session's resumability (serve/session_resume.h), for session_info.
struct ResumeFacts {
  std::string resume_id;
  std::string transport;
  bool recorded = false;  // a record on disk (the session hibernated at least once)
  std::string hibernated_at;
};

struct SessionStateOptions {
  std::string state_dir;
  const policies::Policy* server_policy = nullptr;
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  ServeAudit* audit = nullptr;  // may be null (tests)
};

class SessionState : public tools::SnapshotsView {
 public:
  explicit SessionState(SessionStateOptions options);
  ~SessionState();
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;
  // The sessions Create and Restore act on; before the first call.
  void Attach(sandbox::CellSessionManager* cells) { cells_ = cells; }

  Result<tools::SnapshotCreated> Create(const std::string& session_key, const std::string& tenant,
                                        const std::string& name) override;
  Result<std::vector<tools::SnapshotSummary>> List(const std::string& tenant) override;
  Result<tools::SnapshotRestored> Restore(const std::string& session_key, const std::string& tenant,
                                          const std::string& id_or_name) override;
  Status Delete(const std::string& tenant, const std::string& id_or_name) override;
  tools::SessionKept Kept(const std::string& session_key, const std::string& tenant) override;
  void SetResumeFacts(std::function<std::optional<ResumeFacts>(const std::string& key)> fn) {
    resume_facts_ = std::move(fn);
  }

  // sandbox::CellHooks::hibernate and on_base_released (a session's profile is its tenant).
  Result<sandbox::SessionBase> Hibernate(sandbox::CellInstance& cell, const std::string& key,
                                         const std::string& tenant,
                                         const sandbox::SessionBase* base, bool frozen);
  void BaseReleased(const std::string& key, const std::string& tenant,
                    const sandbox::SessionBase& base);

  // Called with every hibernation snapshot made (by Hibernate or Park), before the session's
  // previous base is released; set before the first session.
  using HibernatedFn = std::function<void(const std::string& key, const std::string& tenant,
                                          const sandbox::SnapshotInfo& snapshot)>;
  void SetHibernationListener(HibernatedFn fn) { on_hibernated_ = std::move(fn); }
  // Keeps session `key`'s files in a hidden snapshot now and ends its cell (its base is
  // then that snapshot): when it has a cell, or runs over a snapshot of the tenant's. Returns
  // the hibernation snapshot its files are in (a hibernated session's own, already), or ""
  // when there is nothing to keep (no cell was ever made).
  Result<std::string> Park(const std::string& key, const std::string& tenant);
  // Session `key`'s next cell (and every later one) is made over hibernation snapshot
  // `snapshot_id` of `tenant`, its first call told `note`: a revived session.
  Status ResumeOver(const std::string& key, const std::string& tenant,
                    const std::string& snapshot_id, const std::string& note);
  // The tenant's hibernation snapshots together, and their bound (0: none).
  Result<uint64_t> HibernationBytes(const std::string& tenant);
  uint64_t QuotaBytes(const std::string& tenant) const;

  sandbox::SnapshotStore& store() { return store_; }
  // The sessions' background processes and interpreters (ToolEnv::processes).
  tools::ProcessTable& processes() { return processes_; }

 private:
  const policies::Policy* PolicyOf(const std::string& tenant) const;
  Result<std::shared_ptr<sandbox::CellSession>> SessionOf(const std::string& key,
                                                          const std::string& tenant);
  // The layers of `cell` to capture; `notes` gets what is left out.
  Result<std::vector<sandbox::LayerSource>> Sources(sandbox::CellInstance& cell,
                                                    const sandbox::CellWritableLayers& layers,
                                                    std::vector<std::string>* notes) const;
  // Captures `cell` (frozen or not) over `base`.
  Result<sandbox::CaptureReport> CaptureCell(sandbox::CellInstance& cell, const std::string& tenant,
                                             const std::string& name,
                                             const sandbox::SessionBase* base,
                                             const std::string& kind,
                                             std::vector<std::string>* notes);
  Result<sandbox::SessionBase> BaseOf(const std::string& id, bool hibernation);
  // A snapshot the tools may see (not a hibernation one): "not found" otherwise.
  Result<sandbox::SnapshotInfo> Visible(const std::string& tenant, const std::string& id_or_name);
  // The in-use mark of snapshot `id` as session `key`'s base (uses_); Unmark drops it.
  Status MarkBase(const std::string& key, const std::string& id);
  void UnmarkBase(const std::string& key, const std::string& id);
  // Stored bytes of the tenant's snapshots of one kind ("" or hibernation).
  Result<uint64_t> UsedBytes(const std::string& tenant, bool hibernation = false);

  // Holds snapshot `id` for a Restore or Delete; others of the same id wait.
  class SnapshotLock {
   public:
    SnapshotLock(SessionState& state, std::string id);
    ~SnapshotLock();
    SnapshotLock(const SnapshotLock&) = delete;
    SnapshotLock& operator=(const SnapshotLock&) = delete;

   private:
    SessionState& state_;
    std::string id_;
  };

  const SessionStateOptions options_;
  sandbox::SnapshotStore store_;
  sandbox::CellSessionManager* cells_ = nullptr;
  HibernatedFn on_hibernated_;
  std::function<std::optional<ResumeFacts>(const std::string& key)> resume_facts_;
  std::mutex mu_;
  std::condition_variable unlocked_;
  std::set<std::string> busy_;  // snapshot ids held by a SnapshotLock, under mu_
  // (session key, snapshot id) -> the store's in-use mark of that base, under mu_
  std::map<std::pair<std::string, std::string>, sandbox::SnapshotUse> uses_;
  tools::ProcessTable processes_;
};

// The tenant's name in the snapshot store ("" -> "default").
std::string StoreTenant(const std::string& tenant);

}  // namespace mcpcell::serve
