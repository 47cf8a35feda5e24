// The server's state dir as the cell mechanism lays it out:
//
//   <state_dir>/templates/host-v4-<fingerprint>/  the shared read-only skeleton (overlay.h)
//   <state_dir>/mnt/                 always empty on the host: every cell init mounts its
//                                    scratch tmpfs (uppers, new root) here, each in its
//                                    own mount namespace, so destroy never has to remove
//                                    a directory that is a mount point elsewhere
//   <state_dir>/cells/<id>/          one per live cell: workspace/ (unless the spec names
//                                    a host dir), init (host pid and start time of init)
//   <state_dir>/idranges/<slot>      uid/gid range claims of a root server (user.h)
//
// A crashed server leaves exactly these behind; ReapOrphans (cell.h) reads them. Server
// side; functions are thread-safe with respect to different cells.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace mcpcell::sandbox {

// The default state dir: $MCPCELL_STATE_DIR, else /run/mcpcell for root, else
// $XDG_RUNTIME_DIR/mcpcell, else /tmp/mcpcell-<uid> (EnsureStateDir refuses it if someone
// else made it first). One place, so `serve`, `run` and the tests agree.
std::string DefaultStateDir();

// Creates <state_dir>, <state_dir>/mnt and <state_dir>/cells if missing. Both get o+x (never o+r):
// cell init of a root server runs as an unprivileged host uid and must reach its own cell dir and
// the template by path, without being able to list other cells.
Status EnsureStateDir(const std::string& state_dir);

// Whether cells run as host uids other than the server's: a root server maps every cell to
// an id range of its own (linux/user.h, Cell::Create's id range step); an unprivileged
// server has one uid, and its cells are that uid on the host.
bool CellsRunAsOtherUids();

// Cells reach the state dir by path (cell init mounts its scratch on <state_dir>/mnt and
// reads the template). A root server's cells are host uids that own no host directory, so
// every directory from / to the state dir must let others search it (x), or every cell
// fails at its first mount with EACCES. Call after EnsureStateDir; Ok when the cells run as
// the server's own uid. The error names the first directory that does not and the fix.
Status CheckCellsCanReachStateDir(const std::string& state_dir);

// The walk itself, whoever the cells are: every directory from / to `dir` (an existing
// path; symlinks resolved with realpath, and each directory of `dir` as written checked
// too) must have the others' search bit.
Status CheckSearchableByOthers(const std::string& dir);

// Removes a cell dir recursively without following symlinks, making directories the
// sandbox user left unwritable or unsearchable (chmod 0) writable first.
Status RemoveCellDir(const std::string& dir);

// <cell_dir>/init: "<pid> <start time>" of cell init, so a later server can tell a live
// orphan from a reused pid. Records are 64 bytes, padded with spaces, written over in
// place (never truncated: on a disk-backed state dir that frees a block, and with ext4's
// discard option waits for the disk).
struct InitRecord {
  pid_t pid = -1;
  std::string start_time;
};
Status WriteInitRecord(const std::string& cell_dir, pid_t pid);
Result<InitRecord> ReadInitRecord(const std::string& cell_dir);

// <cell_dir>/owner: "<pid> <start time>" of the server that created the cell. Several
// servers may share a state dir (stdio clients each start their own `mcpcell serve`), so
// orphan reaping must only take cells whose owner is gone.
Status WriteOwnerRecord(const std::string& cell_dir);
// True when the cell's owner (per its owner record) is a live process other than this
// one. A cell without a readable owner record counts as orphaned.
bool OwnedByAnotherLiveServer(const std::string& cell_dir);

// Field 22 of /proc/<pid>/stat, "" when the process does not exist.
std::string ProcStartTime(pid_t pid);

// "" when `state_dir` sits on a tmpfs; otherwise a line for `mcpcell doctor` and the
// server's start-up log saying that it is on a disk filesystem (its type) and that a
// tmpfs state dir, like one under /run, creates and removes cells faster: every cell
// makes and removes directories and files there, which on a disk (ext4 with discard in
// particular) waits for the disk.
std::string StateDirFilesystemNote(const std::string& state_dir);

}  // namespace mcpcell::sandbox
