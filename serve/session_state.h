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
//   server shutdown (what a restart would bring back; sessions are not resumable yet).
//
// Tenants: a session's tenant ("" without one) names its cell profile; in the store the
// tenantless sessions are tenant "default" (the `mcpcell snapshot` CLI's default). The quota
// is the tenant's policy's [limits] snapshot_storage (the server policy's without tenant),
// hibernation snapshots included. Threading: thread-safe; outlives the cell manager whose
// hooks call it, and is outlived by the ServeAudit it writes to.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "policies/policy.h"
#include "sandbox/cell_session.h"
#include "sandbox/snapshot_store.h"
#include "tools/snapshots_view.h"

namespace mcpcell::serve {

class ServeAudit;

struct SessionStateOptions {
  std::string state_dir;
  const policies::Policy* server_policy = nullptr;
  const std::map<std::string, policies::Policy>* tenant_policies = nullptr;
  ServeAudit* audit = nullptr;  // may be null (tests)
};

class SessionState : public tools::SnapshotsView {
 public:
  explicit SessionState(SessionStateOptions options);
  // The sessions Create and Restore act on; before the first call.
  void Attach(sandbox::CellSessionManager* cells) { cells_ = cells; }

  Result<tools::SnapshotCreated> Create(const std::string& session_key, const std::string& tenant,
                                        const std::string& name) override;
  Result<std::vector<tools::SnapshotSummary>> List(const std::string& tenant) override;
  Result<tools::SnapshotRestored> Restore(const std::string& session_key,
                                          const std::string& tenant,
                                          const std::string& id_or_name) override;
  Status Delete(const std::string& tenant, const std::string& id_or_name) override;

  // sandbox::CellHooks::hibernate and on_base_released (a session's profile is its tenant).
  Result<sandbox::SessionBase> Hibernate(sandbox::CellInstance& cell, const std::string& key,
                                         const std::string& tenant,
                                         const sandbox::SessionBase* base, bool frozen);
  void BaseReleased(const std::string& key, const std::string& tenant,
                    const sandbox::SessionBase& base);

  sandbox::SnapshotStore& store() { return store_; }

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
  Result<uint64_t> UsedBytes(const std::string& tenant);

  const SessionStateOptions options_;
  sandbox::SnapshotStore store_;
  sandbox::CellSessionManager* cells_ = nullptr;
  std::mutex mu_;  // Restore and Delete: a snapshot is not deleted while it becomes a base
};

// The tenant's name in the snapshot store ("" -> "default").
std::string StoreTenant(const std::string& tenant);

}  // namespace mcpcell::serve
