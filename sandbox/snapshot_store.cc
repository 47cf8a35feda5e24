// SnapshotStore: capture, list, get, delete and the layout of the store's root. Commit
// (the tmp dir renamed in) is shared with Import (snapshot_store_archive.cc).
#include "sandbox/snapshot_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox {

using namespace snapshot;

namespace snapshot {

Result<StoreLock> StoreLock::Acquire(const std::string& root, bool exclusive) {
  const std::string path = root + "/lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  while (flock(fd.get(), exclusive ? LOCK_EX : LOCK_SH) != 0)
    if (errno != EINTR) return Error::Sys("flock(\"" + path + "\")");
  return StoreLock(std::move(fd));
}

Status EnsureLayout(const std::string& root) {
  for (const std::string& dir : {root, root + "/objects", root + "/snaps", root + "/inuse"})
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Error::Sys("mkdir(\"" + dir + "\")");
  struct stat st;
  if (lstat(root.c_str(), &st) != 0) return Error::Sys("lstat(\"" + root + "\")");
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
    return Error::Msg("snapshot store \"" + root +
                      "\": must be a dir of this user that nobody else can reach (mode 0700)");
  return Ok();
}

Result<SnapshotInfo> ReadManifest(const std::string& root, const std::string& id,
                                  bool with_entries) {
  // info.json is the manifest without its entries, so that listing reads no entries.
  const std::string path = root + "/snaps/" + id + (with_entries ? "/manifest.json" : "/info.json");
  auto text = ReadSmallFile(path, 1u << 30);
  if (!text) return text.error();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::Msg(path + ": not valid JSON");
  auto info = ManifestFromJson(j, with_entries);
  if (!info) return info.error().Wrap(path);
  if (info->id != id) return Error::Msg(path + ": manifest.id is not the dir's name");
  return info;
}

Result<std::vector<SnapshotInfo>> ListLocked(const std::string& root, const std::string& tenant) {
  std::vector<SnapshotInfo> out;
  const std::string dir = root + "/snaps";
  DIR* d = opendir(dir.c_str());
  if (!d) return Error::Sys("opendir(\"" + dir + "\")");
  std::vector<std::string> ids;
  while (dirent* de = readdir(d))
    if (IsSnapshotId(de->d_name)) ids.push_back(de->d_name);
  closedir(d);
  for (const std::string& id : ids) {
    auto info = ReadManifest(root, id, false);
    if (!info) return info.error();
    if (info->tenant == tenant) out.push_back(std::move(*info));
  }
  std::sort(out.begin(), out.end(), [](const SnapshotInfo& a, const SnapshotInfo& b) {
    return std::tie(a.created, a.id) < std::tie(b.created, b.id);
  });
  return out;
}

Error NotFound(const std::string& id_or_name) {
  return Error::Msg("snapshot \"" + id_or_name + "\" not found");
}

bool StoreMissing(const std::string& root) {
  struct stat st;
  return lstat(root.c_str(), &st) != 0 && errno == ENOENT;
}

Result<SnapshotInfo> FindLocked(const std::string& root, const std::string& tenant,
                                const std::string& id_or_name) {
  auto all = ListLocked(root, tenant);
  if (!all) return all.error();
  for (SnapshotInfo& info : *all)
    if (info.id == id_or_name || (!info.name.empty() && info.name == id_or_name))
      return std::move(info);
  return NotFound(id_or_name);
}

Result<uint64_t> QuotaLeft(const std::string& root, const std::string& tenant,
                           const std::string& name, const SnapshotLimits& limits) {
  auto existing = ListLocked(root, tenant);
  if (!existing) return existing.error();
  uint64_t used = 0;
  for (const SnapshotInfo& s : *existing) {
    if (!name.empty() && s.name == name)
      return Error::Msg("a snapshot named \"" + name + "\" exists already (id " + s.id + ")");
    used += s.stored_bytes;
  }
  if (limits.storage_bytes == 0) return uint64_t{0};
  if (used >= limits.storage_bytes)
    return Error::Msg("snapshot storage quota exceeded: the tenant's snapshots use " +
                      std::to_string(used) + " of " + std::to_string(limits.storage_bytes) +
                      " bytes ([limits] snapshot_storage)");
  return limits.storage_bytes - used;
}

Status Commit(const std::string& root, const SnapshotInfo& info) {
  const std::string tmp = root + "/snaps/.tmp-" + info.id;
  ObjectStore objects(root + "/objects");
  Status s = Ok();
  if (mkdir(tmp.c_str(), 0700) != 0) s = Error::Sys("mkdir(\"" + tmp + "\")");
  if (s) s = MaterialiseLayers(objects, info.layers, tmp + "/layers");
  if (s) s = WriteFileAtomic(tmp + "/manifest.json", ManifestToJson(info).dump(1));
  SnapshotInfo summary = info;
  summary.layers.clear();
  if (s) s = WriteFileAtomic(tmp + "/info.json", ManifestToJson(summary).dump(1));
  const std::string final_dir = root + "/snaps/" + info.id;
  if (s && rename(tmp.c_str(), final_dir.c_str()) != 0)
    s = Error::Sys("rename(\"" + tmp + "\", \"" + final_dir + "\")");
  if (!s) {
    (void)RemoveTree(tmp);
    (void)objects.CollectGarbage();
  }
  return s;
}

SnapshotInfo NewInfo(const std::string& tenant, const std::string& name,
                     std::vector<SnapshotLayer> layers) {
  SnapshotInfo info;
  info.id = RandomId();
  info.tenant = tenant;
  info.name = name;
  info.created = NowRfc3339();
  info.layers = std::move(layers);
  info.digest = ComputeDigest(info.layers);
  info.stored_bytes = StoredBytes(info.layers, &info.files);
  return info;
}

Status CheckTenant(const std::string& tenant) {
  if (tenant.empty() || tenant.size() > 256) return Error::Msg("tenant: must be 1-256 characters");
  return Ok();
}

Status CheckCaptureArgs(const std::string& tenant, const std::string& name,
                        const std::vector<LayerSource>& sources) {
  if (Status s = CheckTenant(tenant); !s) return s;
  if (!name.empty())
    if (Status s = CheckSnapshotName(name); !s) return s;
  if (sources.empty()) return Error::Msg("capture: no layers given");
  std::set<std::string> layer_names;
  for (const LayerSource& src : sources)
    if (!layer_names.insert(src.layer).second ||
        (src.layer != "root" && src.layer != "usr" && src.layer != "workspace"))
      return Error::Msg("layer \"" + src.layer + "\": not root, usr or workspace, or twice");
  return Ok();
}

}  // namespace snapshot

namespace {

// Under the store's exclusive lock (so no MarkInUse is between its check and its flock):
// an error when a process holds snapshot `id`'s mark, else the mark's file is removed.
Status CheckNotInUse(const std::string& root, const std::string& id) {
  const std::string path = root + "/inuse/" + id;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno == ENOENT ? Ok() : Error::Sys("open(\"" + path + "\")");
  while (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Error::Msg("snapshot " + id +
                        " is in use: a running server has it as the base of a live session "
                        "(its files are that session's lower layers); end the session or "
                        "restore another snapshot there first");
    if (errno != EINTR) return Error::Sys("flock(\"" + path + "\")");
  }
  unlink(path.c_str());
  return Ok();
}

}  // namespace

SnapshotStore::SnapshotStore(std::string root) : root_(std::move(root)) {}

Result<SnapshotUse> SnapshotStore::MarkInUse(const std::string& id) {
  if (!IsSnapshotId(id)) return Error::Msg("snapshot id \"" + id + "\": not 32 hex digits");
  if (Status s = EnsureLayout(root_); !s) return s.error();
  auto lock = StoreLock::Acquire(root_, false);
  if (!lock) return lock.error();
  struct stat st;
  if (lstat((root_ + "/snaps/" + id).c_str(), &st) != 0) return NotFound(id);
  const std::string path = root_ + "/inuse/" + id;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  // Only a Delete flocks it exclusively, and it holds the store's lock, which we hold too.
  while (flock(fd.get(), LOCK_SH) != 0)
    if (errno != EINTR) return Error::Sys("flock(\"" + path + "\")");
  return SnapshotUse(std::move(fd));
}

Result<CaptureReport> SnapshotStore::Capture(const std::string& tenant, const std::string& name,
                                             const std::vector<LayerSource>& sources,
                                             const SnapshotLimits& limits,
                                             const std::string& parent, const std::string& kind) {
  if (Status s = CheckCaptureArgs(tenant, name, sources); !s) return s.error();
  if (!kind.empty() && kind != kSnapshotKindHibernation)
    return Error::Msg("capture: snapshot kind \"" + kind + "\" is not known");
  if (Status s = EnsureLayout(root_); !s) return s.error();
  auto lock = StoreLock::Acquire(root_, true);
  if (!lock) return lock.error();
  auto quota_left = QuotaLeft(root_, tenant, name, limits);
  if (!quota_left) return quota_left.error();
  Result<SnapshotInfo> below = SnapshotInfo{};
  if (!parent.empty()) {
    auto found = FindLocked(root_, tenant, parent);
    if (found) below = ReadManifest(root_, found->id, true);
    if (!found || !below) return (found ? below.error() : found.error()).Wrap("capture: parent");
  }

  CaptureReport report;
  ObjectStore objects(root_ + "/objects");
  HashCache cache;
  cache.Load(root_ + "/cache.json");
  std::set<std::string> contents;
  WalkState state{&objects, &cache, &report, &contents, 0, *quota_left, {}};
  std::vector<SnapshotLayer> layers;
  std::vector<std::string> walked;
  for (const LayerSource& src : sources) {
    auto layer = CaptureLayer(src, &state);
    if (!layer) {
      (void)objects.CollectGarbage();
      return layer.error().Wrap("capture");
    }
    layers.push_back(std::move(*layer));
    walked.push_back(src.dir);
  }
  if (!parent.empty()) layers = MergeOnto(below->layers, std::move(layers));
  report.info = NewInfo(tenant, name, std::move(layers));
  report.info.kind = kind;
  Status s = CheckLayers(report.info.layers);
  if (s && *quota_left && report.info.stored_bytes > *quota_left)
    s = Error::Msg("snapshot storage quota exceeded: this snapshot holds " +
                   std::to_string(report.info.stored_bytes) + " bytes, " +
                   std::to_string(*quota_left) + " are left of [limits] snapshot_storage");
  // What this capture hashed itself, and what was verified before Commit links it again.
  std::set<std::string> verified;
  if (s) verified = StillVerified(root_, ObjectNamesOf(report.info.layers));
  verified.insert(state.written.begin(), state.written.end());
  if (s) s = Commit(root_, report.info);
  if (!s) {
    (void)objects.CollectGarbage();
    return s.error().Wrap("capture");
  }
  (void)cache.Save(root_ + "/cache.json", walked);  // a lost cache costs only re-hashing
  (void)RecordVerified(root_, verified);            // a lost record costs the next Verify a re-read
  report.info.layers.clear();
  return report;
}

Result<std::vector<SnapshotInfo>> SnapshotStore::List(const std::string& tenant) {
  if (StoreMissing(root_)) return std::vector<SnapshotInfo>{};
  if (Status s = EnsureLayout(root_); !s) return s.error();
  auto lock = StoreLock::Acquire(root_, false);
  if (!lock) return lock.error();
  return ListLocked(root_, tenant);
}

Result<SnapshotInfo> SnapshotStore::Get(const std::string& tenant, const std::string& id_or_name) {
  if (StoreMissing(root_)) return NotFound(id_or_name);
  if (Status s = EnsureLayout(root_); !s) return s.error();
  auto lock = StoreLock::Acquire(root_, false);
  if (!lock) return lock.error();
  auto found = FindLocked(root_, tenant, id_or_name);
  if (!found) return found.error();
  return ReadManifest(root_, found->id, true);
}

Status SnapshotStore::Delete(const std::string& tenant, const std::string& id_or_name) {
  if (StoreMissing(root_)) return NotFound(id_or_name);
  if (Status s = EnsureLayout(root_); !s) return s;
  auto lock = StoreLock::Acquire(root_, true);
  if (!lock) return lock.error();
  auto found = FindLocked(root_, tenant, id_or_name);
  if (!found) return found.error();
  if (Status s = CheckNotInUse(root_, found->id); !s) return s;
  auto info = ReadManifest(root_, found->id, true);
  if (!info) return info.error();
  // Unlinking changes the ctime of the objects other snapshots still share.
  const std::set<std::string> verified = StillVerified(root_, ObjectNamesOf(info->layers));
  const std::string dir = root_ + "/snaps/" + found->id;
  const std::string gone = root_ + "/snaps/.del-" + found->id;
  if (rename(dir.c_str(), gone.c_str()) != 0)
    return Error::Sys("rename(\"" + dir + "\", \"" + gone + "\")");
  Status s = RemoveTree(gone);
  if (s) s = ObjectStore(root_ + "/objects").CollectGarbage();
  (void)RecordVerified(root_, verified);
  return s;
}

Result<std::map<std::string, std::string>> SnapshotStore::LayerDirs(const std::string& id) {
  if (!IsSnapshotId(id)) return Error::Msg("snapshot id \"" + id + "\": not 32 hex digits");
  auto info = ReadManifest(root_, id, true);
  if (!info) return info.error();
  std::map<std::string, std::string> dirs;
  for (const SnapshotLayer& layer : info->layers)
    dirs[layer.name] = root_ + "/snaps/" + id + "/layers/" + layer.name;
  return dirs;
}

Status SnapshotStore::Verify(const std::string& id, bool rehash_all, uint64_t* bytes_hashed) {
  if (bytes_hashed) *bytes_hashed = 0;
  if (!IsSnapshotId(id)) return Error::Msg("snapshot id \"" + id + "\": not 32 hex digits");
  auto lock = StoreLock::Acquire(root_, false);
  if (!lock) return lock.error();
  auto info = ReadManifest(root_, id, true);
  if (!info) return info.error();
  auto summary = ReadManifest(root_, id, false);
  if (!summary) return summary.error();
  if (summary->digest != info->digest || summary->tenant != info->tenant ||
      summary->name != info->name || summary->kind != info->kind ||
      summary->stored_bytes != StoredBytes(info->layers))
    return Error::Msg("snapshot " + id + ": info.json does not agree with manifest.json");
  return VerifyLayers(ObjectStore(root_ + "/objects"), info->layers,
                      root_ + "/snaps/" + id + "/layers", root_ + "/verified.json", rehash_all,
                      bytes_hashed);
}

}  // namespace mcpcell::sandbox
