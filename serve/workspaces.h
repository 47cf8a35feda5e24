// Named workspaces on the host (`filesystem.workspace = "persistent:NAME"`, docs/lifecycle.md):
// the directory <state_dir>/workspaces/<owner>/<NAME> (policies/workspace_name.h), made on
// first use, and beside it in <owner>/.meta/:
//   <NAME>.lock  flock(2)ed LOCK_EX by the server while a live cell holds the workspace; its
//                text says who ({"pid", "cell", "session", "since"}), emptied at release.
//                flock, not fcntl locks: two opens in one process conflict too, so one lock
//                serves the server's own sessions and other servers sharing the state dir.
//   <NAME>.json  {"tenant", "name", "last_used", "bytes"}: written at lock and at release.
// A lock file that was unlinked (delete, retention) while someone waited on it is noticed
// after locking (its inode is no longer the path's) and locking starts over.
// Threading: WorkspaceStore is stateless (every call works on the files), so any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "policies/policy.h"

namespace mcpcell::serve {

using WallClock = std::chrono::system_clock;

struct WorkspaceId {
  std::string owner;  // tenant name; "" = the server's own sessions ("_" on disk)
  std::string name;
};

// Who holds a workspace's lock (its lock file's text).
struct WorkspaceHolder {
  int64_t pid = 0;
  std::string cell;
  std::string session;  // empty until the cell is bound to its session
  std::string since;    // UTC, ISO 8601
};

struct WorkspaceInfo {
  std::string owner;  // as on disk ("_" for the server's own sessions)
  std::string name;
  std::string dir;
  std::optional<WallClock::time_point> last_used;  // none: never recorded
  uint64_t bytes = 0;                              // regular files' sizes at last use
  std::optional<WorkspaceHolder> holder;           // set while locked
};

// A held workspace lock. Destroying it records the last use (now, the directory's size),
// empties the holder text and unlocks.
class WorkspaceLock {
 public:
  WorkspaceLock(WorkspaceId id, std::string dir, std::string meta_path, UniqueFd fd);
  ~WorkspaceLock();
  WorkspaceLock(const WorkspaceLock&) = delete;
  WorkspaceLock& operator=(const WorkspaceLock&) = delete;

  const WorkspaceId& id() const { return id_; }
  const std::string& dir() const { return dir_; }
  // Rewrites the holder text with the session's key (the cell's was written at lock).
  void NoteSession(const std::string& cell_id, const std::string& session);

 private:
  WorkspaceId id_;
  std::string dir_;
  std::string meta_path_;
  UniqueFd fd_;
};

class WorkspaceStore {
 public:
  explicit WorkspaceStore(std::string state_dir);

  // Makes the workspace if missing and locks it for cell `cell_id`. Held by someone else:
  // kRefuse fails at once, kWait tries again until `wait_for` has passed; the error names
  // the workspace and says it is in use by another session (and by which cell).
  Result<std::unique_ptr<WorkspaceLock>> Lock(const WorkspaceId& id, const std::string& cell_id,
                                              policies::WorkspaceBusy busy,
                                              std::chrono::milliseconds wait_for) const;
  // Every named workspace, or one owner's ("" = all; "_" = the server's own), by owner
  // then name.
  Result<std::vector<WorkspaceInfo>> List(const std::string& owner = "") const;
  // Removes a workspace with its files and records; refused while it is locked.
  Status Delete(const WorkspaceId& id) const;
  // Removes every unlocked workspace last used before `now - retention(owner)` (owner as on
  // disk); returns what it removed. A workspace never recorded counts from its directory's
  // modification time.
  std::vector<WorkspaceInfo> RemoveUnused(
      WallClock::time_point now,
      const std::function<std::chrono::seconds(const std::string& owner)>& retention) const;

 private:
  Result<WorkspaceInfo> Inspect(const std::string& owner, const std::string& name) const;
  std::string root_;
};

// "2026-01-02T03:04:05Z" and back (nullopt when it is not that shape).
std::string FormatUtc(WallClock::time_point t);
std::optional<WallClock::time_point> ParseUtc(const std::string& text);

}  // namespace mcpcell::serve
