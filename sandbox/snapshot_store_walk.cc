// The walk of one of a cell's layers for Capture. The cell may be running and may rename
// things under us, so every step is relative to an open directory fd and never follows a
// symlink (openat with O_NOFOLLOW, fstatat with AT_SYMLINK_NOFOLLOW); what is opened is
// checked to be the inode that was stat'ed, and the walk stays on the layer's filesystem.
// Nothing outside the layer's dir can be read, whatever the cell does meanwhile.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <set>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox::snapshot {
namespace {

using Type = SnapshotEntry::Type;
constexpr int kMaxDepth = 512;

struct LayerWalk {
  const LayerSource& source;
  WalkState* state;
  dev_t dev = 0;
  std::set<std::string> excluded;
  SnapshotLayer* out = nullptr;
};

int64_t Ns(const timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

uint32_t CanonicalId(uint32_t host_id, uint32_t base, uint64_t* mapped_to_nobody) {
  if (host_id >= base && host_id - base < kIdRange) return host_id - base;
  ++*mapped_to_nobody;
  return kNobody;
}

SnapshotEntry EntryFromStat(const LayerWalk& w, const std::string& rel, const struct stat& st,
                            Type type) {
  SnapshotEntry e;
  e.path = rel;
  e.type = type;
  e.mode = st.st_mode & 07777;
  e.uid = CanonicalId(st.st_uid, w.source.uid_base, &w.state->report->mapped_to_nobody);
  e.gid = CanonicalId(st.st_gid, w.source.gid_base, &w.state->report->mapped_to_nobody);
  e.mtime_ns = Ns(st.st_mtim);
  return e;
}

// Opens `name` in `dir` as the inode `st` describes, or says it changed under us.
Result<UniqueFd> OpenSame(int dir, const char* name, const struct stat& st, int flags,
                          const std::string& rel) {
  UniqueFd fd(openat(dir, name, flags | O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return Error::Sys("openat(\"" + rel + "\")");
  struct stat now;
  if (fstat(fd.get(), &now) != 0) return Error::Sys("fstat(\"" + rel + "\")");
  if (now.st_ino != st.st_ino || now.st_dev != st.st_dev ||
      (now.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
    return Error::Msg("\"" + rel + "\" changed while it was being captured");
  return fd;
}

Status CaptureFile(LayerWalk& w, int dir, const char* name, const std::string& rel,
                   const struct stat& st) {
  SnapshotEntry e = EntryFromStat(w, rel, st, Type::kFile);
  if (e.mode & (S_ISUID | S_ISGID)) {
    e.mode &= ~static_cast<uint32_t>(S_ISUID | S_ISGID);
    w.state->report->setid_stripped.push_back(w.source.layer + ":" + rel);
  }
  const std::string key = w.source.dir + "\n" + rel + "\n" + std::to_string(st.st_dev) + " " +
                          std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
                          std::to_string(Ns(st.st_mtim)) + " " + std::to_string(Ns(st.st_ctim));
  const std::string* cached = w.state->cache->Find(key);
  if (cached && w.state->objects->Has(ObjectName(*cached, e.mode, e.uid, e.gid))) {
    e.sha256 = *cached;
    e.size = static_cast<uint64_t>(st.st_size);
    ++w.state->report->files_from_cache;
  } else {
    // Opened only to be read: a file found in the cache is linked to its object unread.
    auto fd = OpenSame(dir, name, st, 0, rel);
    if (!fd) return fd.error();
    uint64_t added = 0;
    bool created = false;
    auto sha = w.state->objects->Put(fd->get(), e.mode, e.uid, e.gid, e.mtime_ns, &e.size, &added,
                                     &created);
    if (!sha) return sha.error().Wrap("\"" + rel + "\"");
    e.sha256 = *sha;
    if (created) w.state->written.insert(ObjectName(e.sha256, e.mode, e.uid, e.gid));
    ++w.state->report->files_hashed;
    w.state->report->new_object_bytes += added;
  }
  w.state->cache->Remember(key, e.sha256);
  if (w.state->contents->insert(e.sha256).second) {
    w.state->stored_bytes += e.size;
    if (w.state->quota_left && w.state->stored_bytes > w.state->quota_left)
      return Error::Msg("snapshot storage quota exceeded: this snapshot needs more than the " +
                        std::to_string(w.state->quota_left) + " bytes left of [limits] " +
                        "snapshot_storage");
  }
  w.out->entries.push_back(std::move(e));
  return Ok();
}

Status WalkDir(LayerWalk& w, int dir, const std::string& rel, int depth);

Status CaptureChild(LayerWalk& w, int dir, const char* name, const std::string& rel, int depth) {
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::Sys("fstatat(\"" + rel + "\")");
  auto skip = [&](const char* why) {
    w.state->report->skipped.push_back(w.source.layer + ":" + rel + " (" + why + ")");
    return Ok();
  };
  if (st.st_dev != w.dev) return skip("another filesystem");
  if (S_ISREG(st.st_mode)) return CaptureFile(w, dir, name, rel, st);
  if (S_ISDIR(st.st_mode)) {
    auto fd = OpenSame(dir, name, st, O_DIRECTORY, rel);
    if (!fd) return fd.error();
    return WalkDir(w, fd->get(), rel, depth + 1);
  }
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(dir, name, target, sizeof target);
    if (n < 0) return Error::Sys("readlinkat(\"" + rel + "\")");
    SnapshotEntry e = EntryFromStat(w, rel, st, Type::kSymlink);
    e.mode = 0777;
    e.target.assign(target, static_cast<size_t>(n));
    w.out->entries.push_back(std::move(e));
    return Ok();
  }
  if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {
    w.out->entries.push_back(EntryFromStat(w, rel, st, Type::kWhiteout));
    return Ok();
  }
  if (S_ISFIFO(st.st_mode)) return skip("fifo");
  if (S_ISSOCK(st.st_mode)) return skip("socket");
  return skip("device node");
}

// Records the dir open as `dir` (its stat and opaque xattr), then its children in name
// order, so that entries come sorted with parents first.
Status WalkDir(LayerWalk& w, int dir, const std::string& rel, int depth) {
  if (depth > kMaxDepth) return Error::Msg("\"" + rel + "\": nested deeper than 512 dirs");
  struct stat st;
  if (fstat(dir, &st) != 0) return Error::Sys("fstat(\"" + rel + "\")");
  SnapshotEntry e = EntryFromStat(w, rel, st, Type::kDir);
  char value[4];
  ssize_t n = fgetxattr(dir, "user.overlay.opaque", value, sizeof value);
  e.opaque = n == 1 && value[0] == 'y';
  w.out->entries.push_back(std::move(e));

  UniqueFd list_fd(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = list_fd ? fdopendir(list_fd.get()) : nullptr;
  if (!d) return Error::Sys("opendir(\"" + rel + "\")");
  list_fd.Release();  // closedir closes it
  std::vector<std::string> names;
  while (dirent* de = readdir(d))
    if (std::string entry = de->d_name; entry != "." && entry != "..")
      names.push_back(std::move(entry));
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    if (w.excluded.count(child)) continue;
    if (Status s = CaptureChild(w, dir, name.c_str(), child, depth); !s) return s;
  }
  return Ok();
}

}  // namespace

Result<SnapshotLayer> CaptureLayer(const LayerSource& source, WalkState* state) {
  SnapshotLayer layer;
  layer.name = source.layer;
  LayerWalk w{source, state, 0, {}, &layer};
  for (const std::string& x : source.exclude) {
    std::string p = x;
    while (!p.empty() && p.front() == '/') p.erase(0, 1);
    while (!p.empty() && p.back() == '/') p.pop_back();
    if (!p.empty()) w.excluded.insert(p);
  }
  if (source.layer == "root") {
    // A cell's identity is its own: a fork made from this snapshot must not inherit it.
    for (const char* path : kIdentityPaths) w.excluded.insert(path);
    w.excluded.insert("run");
  }
  UniqueFd top(open(source.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top) return Error::Sys("open(\"" + source.dir + "\")").Wrap("layer " + source.layer);
  struct stat st;
  if (fstat(top.get(), &st) != 0) return Error::Sys("fstat(\"" + source.dir + "\")");
  w.dev = st.st_dev;
  if (Status s = WalkDir(w, top.get(), "", 0); !s) return s.error().Wrap("layer " + source.layer);
  return layer;
}

void HashCache::Load(const std::string& path) {
  seen_.clear();
  auto text = ReadSmallFile(path, 256u << 20);
  if (!text) return;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  for (auto& [key, value] : j.items())
    if (value.is_string() && IsSha256Hex(value.get<std::string>())) seen_[key] = value;
}

const std::string* HashCache::Find(const std::string& key) const {
  auto it = seen_.find(key);
  return it == seen_.end() ? nullptr : &it->second;
}

Status HashCache::Save(const std::string& path, const std::vector<std::string>& walked) const {
  nlohmann::json j = nlohmann::json::object();
  std::map<std::string, bool> dir_exists;
  for (const auto& [key, sha] : seen_) {
    std::string dir = key.substr(0, key.find('\n'));
    if (std::find(walked.begin(), walked.end(), dir) != walked.end()) continue;
    auto [it, fresh] = dir_exists.emplace(dir, false);
    if (fresh) it->second = access(dir.c_str(), F_OK) == 0;
    if (it->second) j[key] = sha;
  }
  for (const auto& [key, sha] : next_) j[key] = sha;
  // A key with a name that is not UTF-8 is saved altered: it misses next time (re-hashed).
  return WriteFileAtomic(path, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace mcpcell::sandbox::snapshot
