// The snapshot store's parts below SnapshotStore (snapshot_store.h): the manifest and its
// checks (snapshot_store_manifest.cc), the object files and the layer trees made of them
// (snapshot_store_objects.cc), the walk of a cell's layer and the hash cache
// (snapshot_store_walk.cc), the store's root (snapshot_store.cc) and Verify's checks
// (snapshot_store_verify.cc); Export/Import are in snapshot_store_archive.cc. Private to
// sandbox/ and its tests.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/snapshot_store.h"

namespace mcpcell::sandbox::snapshot {

inline constexpr uint32_t kIdRange = 65536;  // ids of one cell: base .. base + 65535
inline constexpr uint32_t kNobody = 65534;
inline constexpr int kManifestFormat = 1;

// --- manifest (snapshot_store_manifest.cc) ---
const char* TypeName(SnapshotEntry::Type type);
nlohmann::json ManifestToJson(const SnapshotInfo& info);
// Strict: unknown or missing fields, wrong types and bad values name the field. Entries are
// checked with CheckLayers when with_entries, else skipped.
Result<SnapshotInfo> ManifestFromJson(const nlohmann::json& j, bool with_entries);
// Every path relative and normal (no "", ".", "..", "//", leading "/"), unique, its parent a
// dir of the same layer listed before it; layers named root/usr/workspace at most once;
// modes, ids and digests in range.
Status CheckLayers(const std::vector<SnapshotLayer>& layers);
std::string ComputeDigest(const std::vector<SnapshotLayer>& layers);
// Sum of the sizes of the distinct contents; the count of files.
uint64_t StoredBytes(const std::vector<SnapshotLayer>& layers, uint64_t* files = nullptr);
std::string RandomId();  // 128 bits, hex
std::string NowRfc3339();
bool IsSnapshotId(const std::string& s);
bool IsSha256Hex(const std::string& s);

// --- objects and layer trees (snapshot_store_objects.cc) ---
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  std::string FinalHex();

 private:
  void* ctx_;
};
Result<std::string> HashFile(int fd);
// The calling thread's copy buffer (kCopyBlock bytes, not zeroed): one per thread rather
// than one allocation per file, which a tree of small files would spend its time clearing.
inline constexpr size_t kCopyBlock = 1 << 20;
char* CopyBuffer();

std::string ObjectName(const std::string& sha256, uint32_t mode, uint32_t uid, uint32_t gid);

class ObjectStore {
 public:
  explicit ObjectStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  bool Has(const std::string& name) const;
  // Copies the rest of `fd` into a new object while hashing it (the mode, ids and mtime
  // given), unless that object exists: returns the sha256; *size = bytes read, *added =
  // bytes stored when the object was new, else 0.
  // *created (optional): whether this call made the object (an empty file adds 0 bytes).
  Result<std::string> Put(int fd, uint32_t mode, uint32_t uid, uint32_t gid, int64_t mtime_ns,
                          uint64_t* size, uint64_t* added, bool* created = nullptr);
  // Removes every object that no snapshot links (st_nlink == 1) and stale temp files.
  Status CollectGarbage(uint64_t* removed_bytes = nullptr);

 private:
  std::string dir_;
};

// Builds `layers_dir`/<layer>/ from the entries: files hard-linked to their objects, dirs,
// symlinks and whiteouts made with the canonical owner, opaque xattrs and mtimes set.
Status MaterialiseLayers(const ObjectStore& objects, const std::vector<SnapshotLayer>& layers,
                         const std::string& layers_dir);

// Removes a tree without following symlinks (a snapshot's tmp or deleted dir).
Status RemoveTree(const std::string& path);
// Writes `text` to `path` via a temp file and rename, mode 0600.
Status WriteFileAtomic(const std::string& path, const std::string& text);
Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes);

// --- the walk of a cell's layer (snapshot_store_walk.cc) ---
// (source path, dev, ino, size, mtime_ns, ctime_ns) -> sha256 of the files seen by earlier
// captures; a changed file has a new ctime, so its old entry is never hit.
class HashCache {
 public:
  void Load(const std::string& path);  // a missing or unreadable cache is an empty one
  // Keeps the entries of other source dirs that still exist, replaces those of `walked`.
  Status Save(const std::string& path, const std::vector<std::string>& walked) const;
  const std::string* Find(const std::string& key) const;
  void Remember(const std::string& key, const std::string& sha256) { next_[key] = sha256; }

 private:
  std::map<std::string, std::string> seen_;  // from the last Save
  std::map<std::string, std::string> next_;  // what this capture saw: saved next time
};

struct WalkState {
  ObjectStore* objects = nullptr;
  HashCache* cache = nullptr;
  CaptureReport* report = nullptr;
  std::set<std::string>* contents = nullptr;  // distinct sha256 of this snapshot
  uint64_t stored_bytes = 0;                  // their sizes
  uint64_t quota_left = 0;                    // 0 = unlimited
  std::set<std::string> written;              // object names this capture made
};
Result<SnapshotLayer> CaptureLayer(const LayerSource& source, WalkState* state);

// An flock on <root>/lock, released on destruction.
class StoreLock {
 public:
  static Result<StoreLock> Acquire(const std::string& root, bool exclusive);

 private:
  explicit StoreLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// --- the store's root (snapshot_store.cc); the *Locked calls expect a StoreLock held ---
Status EnsureLayout(const std::string& root);  // root, objects/, snaps/, all 0700
// Readers do not create the store: a missing one holds no snapshots.
bool StoreMissing(const std::string& root);
Error NotFound(const std::string& id_or_name);  // the same words for unknown and not yours
Status CheckTenant(const std::string& tenant);
Status CheckCaptureArgs(const std::string& tenant, const std::string& name,
                        const std::vector<LayerSource>& sources);
Result<SnapshotInfo> ReadManifest(const std::string& root, const std::string& id,
                                  bool with_entries);
Result<std::vector<SnapshotInfo>> ListLocked(const std::string& root, const std::string& tenant);
Result<SnapshotInfo> FindLocked(const std::string& root, const std::string& tenant,
                                const std::string& id_or_name);
// The bytes the tenant may still store (0 = unlimited); an error when the name is taken or
// the quota is used up.
Result<uint64_t> QuotaLeft(const std::string& root, const std::string& tenant,
                           const std::string& name, const SnapshotLimits& limits);
SnapshotInfo NewInfo(const std::string& tenant, const std::string& name,
                     std::vector<SnapshotLayer> layers);
// Materialises the layers and the manifest under snaps/.tmp-<id> and renames it to
// snaps/<id>; on failure removes both and collects the objects nothing links.
Status Commit(const std::string& root, const SnapshotInfo& info);

// --- a cell over a snapshot (snapshot_store_merge.cc) ---
// The parent's layers with the cell's uppers applied as its overlay shows them.
std::vector<SnapshotLayer> MergeOnto(const std::vector<SnapshotLayer>& parent,
                                     std::vector<SnapshotLayer> upper);

// --- checks (snapshot_store_verify.cc) ---
// The trees under layers_dir match the entries (types, modes, owners, targets, opaque
// xattrs, no extra paths) and every file's content hashes to its sha256; objects whose
// stamp in `verified_path` still matches are not re-read unless `rehash_all`.
// *bytes_hashed: the content bytes read (0 when every object's record held).
Status VerifyLayers(const ObjectStore& objects, const std::vector<SnapshotLayer>& layers,
                    const std::string& layers_dir, const std::string& verified_path,
                    bool rehash_all, uint64_t* bytes_hashed = nullptr);

// The verified.json record across a change of the store (held under the exclusive lock).
// A link or unlink changes an object's ctime, so its record would no longer match although
// its bytes did not change: a change notes, before it links or unlinks, which objects'
// records still hold (StillVerified), adds the objects it wrote itself (hashed on the way
// in), and records their stamps after (RecordVerified).
std::set<std::string> ObjectNamesOf(const std::vector<SnapshotLayer>& layers);
std::set<std::string> StillVerified(const std::string& root, const std::set<std::string>& names);
Status RecordVerified(const std::string& root, const std::set<std::string>& names);

}  // namespace mcpcell::sandbox::snapshot
