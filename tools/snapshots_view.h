// SnapshotsView: what the snapshot tools (snapshot_create, snapshot_list, snapshot_restore,
// snapshot_delete; tools/snapshot_tools.cc) use of a session's filesystem state, by MCP
// session id (the cells' session key) and tenant. `mcpcell serve` implements it
// (serve/session_state.h) over the snapshot store (sandbox/snapshot_store.h) and the cell
// sessions; the tools never see the store. A snapshot belongs to its tenant: another
// tenant's id or name is "not found", the same error as an unknown one.
// Threading: implementations are thread-safe. The callers hold NO cell lease while calling
// (Restore ends the session's cell, which waits for leases).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::tools {

struct SnapshotSummary {
  std::string id;       // 32 hex digits
  std::string name;     // may be empty
  std::string created;  // RFC 3339 UTC
  std::string digest;   // SHA-256 over the snapshot's entries
  uint64_t files = 0;
  uint64_t stored_bytes = 0;  // what the tenant's snapshot_storage quota counts
};

struct SnapshotCreated {
  SnapshotSummary snapshot;
  uint64_t files_hashed = 0;       // read now (the rest were unchanged since the last one)
  uint64_t new_object_bytes = 0;   // storage this snapshot added
  uint64_t quota_used_bytes = 0;   // the tenant's snapshots together, after this one
  uint64_t quota_bytes = 0;        // 0: no quota
  std::vector<std::string> notes;  // setuid bits stripped, special files skipped, ...
};

struct SnapshotRestored {
  SnapshotSummary snapshot;
  // The session's programs that were running and were ended (0 when none).
  uint64_t programs_ended = 0;
  std::vector<std::string> notes;
};

// What session_info shows of the session's kept files (hibernation, docs/lifecycle.md).
struct SessionKept {
  std::string resume_id;      // names the session after a restart ("" = not resumable)
  std::string resume_hint;    // how: "mcpcell serve --resume ID" or the HTTP session id
  std::string hibernated_at;  // its last hibernation (RFC 3339 UTC), "" = never
  bool hibernated = false;    // no cell now: the next call's cell starts over the kept files
  std::string snapshot_id;    // the hidden snapshot the session's cells run over ("" = none)
  uint64_t files = 0;         // in it
  uint64_t stored_bytes = 0;  // its storage
  uint64_t tenant_hibernation_bytes = 0;  // every hidden snapshot of the tenant
  uint64_t quota_bytes = 0;  // their bound, apart from the tenant's snapshots (0: none)
};

class SnapshotsView {
 public:
  virtual ~SnapshotsView() = default;
  // Freezes the session's cell (made now if it has none), captures its files (over the
  // snapshot it was made from, so every snapshot is whole), thaws it. `name` may be empty.
  virtual Result<SnapshotCreated> Create(const std::string& session_key, const std::string& tenant,
                                         const std::string& name) = 0;
  virtual Result<std::vector<SnapshotSummary>> List(const std::string& tenant) = 0;
  // Verifies the snapshot, ends the session's cell (its programs) and makes its next cell
  // over the snapshot's files (copy-on-write). In a session other than the one that made
  // it, this is a fork: the files are shared, changes stay in each session.
  virtual Result<SnapshotRestored> Restore(const std::string& session_key,
                                           const std::string& tenant,
                                           const std::string& id_or_name) = 0;
  virtual Status Delete(const std::string& tenant, const std::string& id_or_name) = 0;
  // The session's kept files and how to resume it; never makes a cell.
  virtual SessionKept Kept(const std::string& session_key, const std::string& tenant) {
    (void)session_key;
    (void)tenant;
    return {};
  }
};

}  // namespace mcpcell::tools
