// The snapshot store: immutable, content-addressed freezes of a cell's writable layers
// (the overlay uppers of "/" and "/usr", and the workspace), each usable as read-only lower
// layers of a new cell (restore, fork and hibernation are "a new cell over snapshot S").
//
//   <root>/objects/<sha256>-<mode>-<uid>-<gid>  one read-only file per content and metadata;
//                                               identical files are stored once across
//                                               snapshots (and hard-linked into each)
//   <root>/snaps/<id>/manifest.json             tenant, name, created, digest, entries
//   <root>/snaps/<id>/info.json                 the same without the entries (for List)
//   <root>/snaps/<id>/layers/<layer>/           the tree, hard links to the objects, usable
//                                               directly as an overlay lower dir
//   <root>/cache.json                           (source path, dev, ino, size, mtime, ctime)
//                                               -> sha256, so unchanged files are not
//                                               re-read by the next capture
//   <root>/verified.json                        object -> its stat stamp when a Verify
//                                               last hashed it (see Verify)
//   <root>/inuse/<id>                           flocked (shared) by every process whose
//                                               live cell or session has snapshot <id> as
//                                               its base (MarkInUse); Delete refuses while
//                                               anyone holds it
//
// Ownership on disk is canonical: the in-cell uid/gid raw (a cell's host uid minus its base;
// ids outside the cell's 65536 range become nobody, counted in the report). The cell that
// mounts a snapshot maps them with an idmapped mount. The root dir is 0700 root, so no host
// user reaches a file that happens to carry its uid.
//
// Quota: a snapshot's size is the sum of the sizes of the distinct contents (sha256) it
// references; a tenant's usage is the sum over its snapshots (shared contents count in each).
//
// Threading: mutating calls (Capture, Import, Delete) take an exclusive flock on <root>/lock,
// so several stores (servers, the CLI) may share a root; readers take a shared one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::sandbox {

// One writable layer of a cell to capture. Host ids in [uid_base, uid_base + 65536) are the
// cell's ids 0..65535.
struct LayerSource {
  std::string layer;  // "root", "usr" or "workspace"
  std::string dir;    // host directory (the layer's top)
  uid_t uid_base = 0;
  gid_t gid_base = 0;
  // Layer-relative paths ("var/cache/x") left out with everything under them. The root
  // layer's "run" (secrets, sockets; a tmpfs in cells) and kIdentityPaths are always left
  // out.
  std::vector<std::string> exclude;
};

// Root-layer paths that make up a machine's identity (systemd's machine id, the random
// seed it carries across boots): never captured, so a cell over a snapshot (a fork) does
// not share them with its parent or siblings. Cells have neither unless a program in them
// writes one (the host template leaves /etc/machine-id out).
inline constexpr const char* kIdentityPaths[] = {"etc/machine-id", "var/lib/dbus/machine-id",
                                                 "var/lib/systemd/random-seed"};

struct SnapshotLimits {
  uint64_t storage_bytes = 0;  // the tenant's snapshots together; 0 = no limit
};

// One path of a layer, as the manifest records it.
struct SnapshotEntry {
  enum class Type { kFile, kDir, kSymlink, kWhiteout };
  std::string path;  // layer-relative, no leading "/", "" is the layer's top dir
  Type type = Type::kFile;
  uint32_t mode = 0;  // permission bits (07777 minus setuid/setgid for files)
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;
  std::string sha256;   // files
  std::string target;   // symlinks
  bool opaque = false;  // dirs: user.overlay.opaque=y
  int64_t mtime_ns = 0;
};

struct SnapshotLayer {
  std::string name;
  std::vector<SnapshotEntry> entries;  // sorted by path, parents first
};

// SnapshotInfo::kind of the snapshot a session's files are kept in while it hibernates
// (serve/session_state.h): the server hides it from the session's snapshot list and
// replaces or deletes it itself.
inline constexpr const char* kSnapshotKindHibernation = "hibernation";

struct SnapshotInfo {
  std::string id;  // 32 hex digits, random
  std::string tenant;
  std::string name;           // may be empty
  std::string kind;           // "" (made on request) or kSnapshotKindHibernation
  std::string created;        // RFC 3339, UTC, milliseconds
  std::string digest;         // SHA-256 over the canonical entries (mtimes excluded)
  uint64_t stored_bytes = 0;  // what the quota counts (see above)
  uint64_t files = 0;
  std::vector<SnapshotLayer> layers;  // filled by Get, empty in List
};

// What Capture did beyond the snapshot itself.
struct CaptureReport {
  SnapshotInfo info;
  uint64_t files_hashed = 0;                // read and hashed (not found in the cache)
  uint64_t files_from_cache = 0;            // unchanged since the last capture: not read
  uint64_t new_object_bytes = 0;            // bytes of objects this capture added to the store
  std::vector<std::string> setid_stripped;  // "layer:path" whose setuid/setgid bit was removed
  std::vector<std::string> skipped;         // "layer:path (fifo)": device nodes, fifos, sockets
  uint64_t mapped_to_nobody = 0;            // entries whose owner was outside the cell's id range
};

// A process's mark that a snapshot is the base of one of its live cells or sessions (its
// layers are their overlays' lower dirs, which must not change under them): a shared flock
// on <root>/inuse/<id>, seen by every process sharing the store, dropped with the object
// (or the process). Movable; not thread-safe itself.
class SnapshotUse {
 public:
  SnapshotUse() = default;
  explicit SnapshotUse(UniqueFd fd) : fd_(std::move(fd)) {}
  bool held() const { return fd_.get() >= 0; }

 private:
  UniqueFd fd_;
};

// Snapshot names: 1-64 characters of [A-Za-z0-9._-] (so never "/"), not "." or "..".
Status CheckSnapshotName(const std::string& name);

class SnapshotStore {
 public:
  // `root` is usually <state_dir>/snapshots; created 0700 on first use.
  explicit SnapshotStore(std::string root);

  // `parent`: the snapshot (id or name, the tenant's) the cell runs over, its layers the
  // cell's lowers; the new snapshot is the parent's entries with the sources applied as the
  // cell's overlay shows them. "" when the cell runs over no snapshot.
  // `kind`: SnapshotInfo::kind of the new snapshot ("" or kSnapshotKindHibernation).
  Result<CaptureReport> Capture(const std::string& tenant, const std::string& name,
                                const std::vector<LayerSource>& sources,
                                const SnapshotLimits& limits, const std::string& parent = "",
                                const std::string& kind = "");
  // The tenant's snapshots (layers not filled), oldest first.
  Result<std::vector<SnapshotInfo>> List(const std::string& tenant);
  // By id or name. Another tenant's snapshot is "not found", like an unknown one.
  Result<SnapshotInfo> Get(const std::string& tenant, const std::string& id_or_name);
  // Removes the snapshot, then every object no snapshot links any more. Refused while a
  // process holds its in-use mark (MarkInUse), this one included.
  Status Delete(const std::string& tenant, const std::string& id_or_name);
  // Marks snapshot `id` in use until the result is destroyed (see SnapshotUse); taken under
  // the store's lock, so a Delete either ran before (then "not found") or sees the mark.
  Result<SnapshotUse> MarkInUse(const std::string& id);
  // Checks the layer trees against the manifest and every object's content against its
  // sha256; the error names the first bad path. An object an earlier Verify hashed and that
  // was not written since (same inode, size, mtime and ctime: <root>/verified.json) is not
  // read again, so a restore or fork costs the same for 1 MiB and 1 GiB; `rehash_all`
  // reads every byte (damage below the filesystem changes no stamp). Capture and Import
  // record the objects they hash themselves, so a Verify right after them reads nothing.
  // *bytes_hashed (optional): the content bytes this call read.
  Status Verify(const std::string& id, bool rehash_all = false, uint64_t* bytes_hashed = nullptr);
  // layer name -> absolute dir, for a cell's lower layers.
  Result<std::map<std::string, std::string>> LayerDirs(const std::string& id);

  // A tar.gz holding manifest.json then objects/<sha256> (each content once).
  Status Export(const std::string& tenant, const std::string& id_or_name, const std::string& path);
  // Reads an Export back as a new snapshot of `tenant` (new id, same name): every path,
  // size and digest is checked; on any error nothing is left behind.
  Result<SnapshotInfo> Import(const std::string& tenant, const std::string& path,
                              const SnapshotLimits& limits);

  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace mcpcell::sandbox
