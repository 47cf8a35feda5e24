#include "serve/workspace_leases.h"

namespace mcpcell::serve {

Status WorkspaceLeases::Take(const policies::Policy& policy, const std::string& cell_id) {
  const policies::FilesystemPolicy& f = policy.filesystem;
  if (f.workspace != policies::WorkspaceMode::kPersistent || f.workspace_name.empty()) return Ok();
  const auto wait = f.workspace_busy == policies::WorkspaceBusy::kWait
                        ? std::chrono::milliseconds(policy.time.exec_default)
                        : std::chrono::milliseconds(0);
  auto lock = store_.Lock(WorkspaceId{f.workspace_owner, f.workspace_name}, cell_id,
                          f.workspace_busy, wait);
  if (!lock) return lock.error();
  std::lock_guard guard(mu_);
  held_[cell_id] = std::move(*lock);
  return Ok();
}

void WorkspaceLeases::NoteSession(const std::string& cell_id, const std::string& session) {
  std::lock_guard guard(mu_);
  auto it = held_.find(cell_id);
  if (it != held_.end()) it->second->NoteSession(cell_id, session);
}

void WorkspaceLeases::Release(const std::string& cell_id) {
  std::unique_ptr<WorkspaceLock> lock;
  {
    std::lock_guard guard(mu_);
    auto it = held_.find(cell_id);
    if (it == held_.end()) return;
    lock = std::move(it->second);
    held_.erase(it);
  }
  // Outside mu_: recording the last use measures the workspace.
  lock.reset();
}

WorkspaceJanitor::WorkspaceJanitor(const WorkspaceStore& store, RetentionFn retention,
                                   RemovedFn on_removed, std::chrono::seconds every)
    : store_(store),
      retention_(std::move(retention)),
      on_removed_(std::move(on_removed)),
      every_(every),
      thread_([this](std::stop_token stop) { Loop(stop); }) {}

WorkspaceJanitor::~WorkspaceJanitor() {
  thread_.request_stop();
  wake_.notify_all();
}

void WorkspaceJanitor::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    for (const WorkspaceInfo& w : store_.RemoveUnused(WallClock::now(), retention_)) {
      if (on_removed_) on_removed_(w);
    }
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, stop, every_, [] { return false; });
  }
}

WorkspaceJanitor::RetentionFn RetentionByOwner(
    const policies::Policy& server_policy,
    const std::map<std::string, policies::Policy>& tenant_policies) {
  std::map<std::string, std::chrono::seconds> by_owner;
  for (const auto& [name, policy] : tenant_policies) {
    by_owner[name] = policy.time.workspace_retention;
  }
  return [by_owner, fallback = server_policy.time.workspace_retention](const std::string& owner) {
    auto it = by_owner.find(owner);
    return it == by_owner.end() ? fallback : it->second;
  };
}

}  // namespace mcpcell::serve
