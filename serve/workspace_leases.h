// What `mcpcell serve` does with named workspaces (serve/workspaces.h) while it runs:
//
// WorkspaceLeases holds each live cell's workspace lock, by cell id: the cell spec factory of
// a policy with `workspace = "persistent:NAME"` takes the lock before the cell is made (so a
// second session is refused, or waits, before anything re-owns the files), the cell hooks
// release it when the cell is destroyed or was never made.
//
// WorkspaceJanitor removes workspaces unused longer than their owner's
// `[time] workspace_retention`, at start and then hourly, on its own thread, reporting each
// removal (the audit trail, serve_audit_ws.cc).
// Threading: WorkspaceLeases is thread-safe; the janitor's thread ends with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "base/status.h"
#include "policies/policy.h"
#include "sandbox/cell_spec.h"
#include "serve/workspaces.h"

namespace mcpcell::serve {

class WorkspaceLeases {
 public:
  explicit WorkspaceLeases(std::string state_dir) : store_(std::move(state_dir)) {}

  // Locks the named workspace of `policy` (its owner's) for cell `cell_id`; under
  // workspace_busy = "wait", for up to the policy's default exec timeout. Nothing to do
  // for other workspaces.
  Status Take(const policies::Policy& policy, const std::string& cell_id);
  // The session that cell `cell_id` now serves, for `workspace list`'s "locked by".
  void NoteSession(const std::string& cell_id, const std::string& session);
  // Releases cell `cell_id`'s lock (recording the workspace's last use), if it holds one.
  void Release(const std::string& cell_id);

  const WorkspaceStore& store() const { return store_; }

 private:
  WorkspaceStore store_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<WorkspaceLock>> held_;  // by cell id
};

class WorkspaceJanitor {
 public:
  using RetentionFn = std::function<std::chrono::seconds(const std::string& owner)>;
  using RemovedFn = std::function<void(const WorkspaceInfo& removed)>;

  WorkspaceJanitor(const WorkspaceStore& store, RetentionFn retention, RemovedFn on_removed,
                   std::chrono::seconds every = std::chrono::hours(1));
  ~WorkspaceJanitor();

 private:
  void Loop(std::stop_token stop);

  const WorkspaceStore& store_;
  RetentionFn retention_;
  RemovedFn on_removed_;
  std::chrono::seconds every_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: starts after the members it reads
};

// The retention of each owner ("_" and tenant names as on disk): the tenant's policy's
// [time] workspace_retention, else the server's.
WorkspaceJanitor::RetentionFn RetentionByOwner(
    const policies::Policy& server_policy,
    const std::map<std::string, policies::Policy>& tenant_policies);

}  // namespace mcpcell::serve
