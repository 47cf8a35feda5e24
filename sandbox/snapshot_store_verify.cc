// Verify: a snapshot's layer trees against its manifest, and every content against its
// sha256. The error names the first bad path in manifest order (then the first extra one).
// Objects a Verify hashed are recorded in <root>/verified.json with their stat stamp; a
// later Verify re-reads only the objects whose stamp changed (unless asked to re-hash all).
// Capture, Import and Delete keep that record for the objects they wrote or that were
// verified before they linked or unlinked them (RecordVerified), so the first restore or
// fork after a snapshot reads no content.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox::snapshot {
namespace {

using Type = SnapshotEntry::Type;

bool TypeMatches(const SnapshotEntry& e, const struct stat& st) {
  switch (e.type) {
    case Type::kFile:
      return S_ISREG(st.st_mode);
    case Type::kDir:
      return S_ISDIR(st.st_mode);
    case Type::kSymlink:
      return S_ISLNK(st.st_mode);
    case Type::kWhiteout:
      return S_ISCHR(st.st_mode) && st.st_rdev == 0;
  }
  return false;
}

// Objects an earlier Verify hashed: name -> the object's stat stamp then (dev, inode, size,
// mtime, ctime). Every write to a file changes its mtime and ctime, and objects are never
// written after they are stored (root-only dir, mode 0444), so a stamp that still matches
// means the bytes hashed then are the bytes now: a restore reads each file's metadata, not
// every byte. What a stamp cannot show is damage below the filesystem (a bad disk block):
// Verify(id, rehash_all = true) reads everything.
class VerifiedObjects {
 public:
  void Load(const std::string& path) {
    auto text = ReadSmallFile(path, 256u << 20);
    if (!text) return;
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return;
    for (auto& [name, stamp] : j.items())
      if (stamp.is_string()) stamps_[name] = stamp.get<std::string>();
  }
  bool Matches(const std::string& name, const std::string& stamp) const {
    auto it = stamps_.find(name);
    return it != stamps_.end() && it->second == stamp;
  }
  void Remember(const std::string& name, const std::string& stamp) {
    stamps_[name] = stamp;
    changed_ = true;
  }
  // A Delete records nothing new but its dropped objects' records must go.
  void ForceSave() { changed_ = true; }
  // Keeps the records of objects that still exist (a deleted snapshot's go).
  Status SaveIfChanged(const std::string& path, const std::string& objects_dir) const {
    if (!changed_) return Ok();
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, stamp] : stamps_) {
      struct stat st;
      if (lstat((objects_dir + "/" + name).c_str(), &st) == 0) j[name] = stamp;
    }
    return WriteFileAtomic(path, j.dump());
  }

 private:
  std::map<std::string, std::string> stamps_;
  bool changed_ = false;
};

std::string Stamp(const struct stat& st) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%ju:%ju:%jd:%jd.%09ld:%jd.%09ld",
                static_cast<uintmax_t>(st.st_dev), static_cast<uintmax_t>(st.st_ino),
                static_cast<intmax_t>(st.st_size), static_cast<intmax_t>(st.st_mtim.tv_sec),
                st.st_mtim.tv_nsec, static_cast<intmax_t>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
  return buf;
}

// Hashes each object once (the layer's files are links to it), unless an earlier Verify
// did and its stamp still matches, and a file that is not a link on its own.
class ContentCheck {
 public:
  ContentCheck(const ObjectStore& objects, VerifiedObjects* verified)
      : objects_(objects), verified_(verified) {}
  uint64_t bytes_hashed() const { return bytes_hashed_; }
  Status Check(const SnapshotEntry& e, const std::string& path, const struct stat& st) {
    const std::string name = ObjectName(e.sha256, e.mode, e.uid, e.gid);
    const std::string object = objects_.dir() + "/" + name;
    struct stat ost;
    bool linked =
        lstat(object.c_str(), &ost) == 0 && ost.st_ino == st.st_ino && ost.st_dev == st.st_dev;
    // The object's name is its sha256: an unchanged, earlier hashed object matches it.
    if (linked && verified_ && verified_->Matches(name, Stamp(ost))) return Ok();
    auto it = linked ? hashed_.find(object) : hashed_.end();
    std::string sha;
    if (it != hashed_.end()) {
      sha = it->second;
    } else {
      UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return Error::Sys("open");
      auto h = HashFile(fd.get());
      if (!h) return h.error();
      sha = *h;
      bytes_hashed_ += static_cast<uint64_t>(st.st_size);
      if (linked) hashed_[object] = sha;
    }
    if (sha != e.sha256)
      return Error::Msg("content has sha256 " + sha + ", the manifest says " + e.sha256);
    if (linked && verified_) verified_->Remember(name, Stamp(ost));
    return Ok();  // a copy (not a link) when the object had too many links: fine if equal
  }

 private:
  const ObjectStore& objects_;
  VerifiedObjects* verified_;
  std::map<std::string, std::string> hashed_;
  uint64_t bytes_hashed_ = 0;
};

Status CheckEntry(ContentCheck& content, const SnapshotEntry& e, const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Error::Sys("lstat");
  if (!TypeMatches(e, st)) return Error::Msg(std::string("is not a ") + TypeName(e.type));
  if (st.st_uid != e.uid || st.st_gid != e.gid)
    return Error::Msg("owner " + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) +
                      ", the manifest says " + std::to_string(e.uid) + ":" + std::to_string(e.gid));
  if (e.type != Type::kSymlink && (st.st_mode & 07777) != e.mode)
    return Error::Msg("mode differs from the manifest's");
  if (e.type == Type::kSymlink) {
    char target[PATH_MAX];
    ssize_t n = readlink(path.c_str(), target, sizeof target);
    if (n < 0 || std::string(target, static_cast<size_t>(n)) != e.target)
      return Error::Msg("symlink target differs from the manifest's");
  }
  if (e.type == Type::kDir) {
    char v[4];
    ssize_t n = lgetxattr(path.c_str(), "user.overlay.opaque", v, sizeof v);
    if ((n == 1 && v[0] == 'y') != e.opaque) return Error::Msg("opaque xattr differs");
  }
  if (e.type == Type::kFile) {
    if (static_cast<uint64_t>(st.st_size) != e.size)
      return Error::Msg("size " + std::to_string(st.st_size) + ", the manifest says " +
                        std::to_string(e.size));
    return content.Check(e, path, st);
  }
  return Ok();
}

// Every path under `dir` (relative to the layer's top) that the manifest does not list.
Status FindExtra(const std::string& top, const std::string& rel,
                 const std::set<std::string>& listed) {
  const std::string dir = rel.empty() ? top : top + "/" + rel;
  DIR* d = opendir(dir.c_str());
  if (!d) return Error::Sys("opendir(\"" + dir + "\")");
  std::vector<std::pair<std::string, bool>> children;
  while (dirent* de = readdir(d)) {
    std::string n = de->d_name;
    if (n == "." || n == "..") continue;
    children.emplace_back(rel.empty() ? n : rel + "/" + n, de->d_type == DT_DIR);
  }
  closedir(d);
  for (const auto& [child, is_dir] : children) {
    if (!listed.count(child)) return Error::Msg("\"" + child + "\": not in the manifest");
    if (is_dir)
      if (Status s = FindExtra(top, child, listed); !s) return s;
  }
  return Ok();
}

}  // namespace

Status VerifyLayers(const ObjectStore& objects, const std::vector<SnapshotLayer>& layers,
                    const std::string& layers_dir, const std::string& verified_path,
                    bool rehash_all, uint64_t* bytes_hashed) {
  VerifiedObjects verified;
  if (!rehash_all) verified.Load(verified_path);
  ContentCheck content(objects, &verified);
  // Set on every return: a Verify that failed half-way still read what it read.
  struct Count {
    const ContentCheck& content;
    uint64_t* out;
    ~Count() {
      if (out) *out = content.bytes_hashed();
    }
  } count{content, bytes_hashed};
  for (const SnapshotLayer& layer : layers) {
    const std::string top = layers_dir + "/" + layer.name;
    std::set<std::string> listed;
    for (const SnapshotEntry& e : layer.entries) {
      listed.insert(e.path);
      if (Status s = CheckEntry(content, e, e.path.empty() ? top : top + "/" + e.path); !s)
        return s.error().Wrap("layer " + layer.name + ": \"" + e.path + "\"");
    }
    if (Status s = FindExtra(top, "", listed); !s) return s.error().Wrap("layer " + layer.name);
  }
  // A record that cannot be written costs the next Verify time, not this one's result.
  (void)verified.SaveIfChanged(verified_path, objects.dir());
  return Ok();
}

std::set<std::string> ObjectNamesOf(const std::vector<SnapshotLayer>& layers) {
  std::set<std::string> names;
  for (const SnapshotLayer& layer : layers)
    for (const SnapshotEntry& e : layer.entries)
      if (e.type == Type::kFile) names.insert(ObjectName(e.sha256, e.mode, e.uid, e.gid));
  return names;
}

std::set<std::string> StillVerified(const std::string& root, const std::set<std::string>& names) {
  VerifiedObjects verified;
  verified.Load(root + "/verified.json");
  std::set<std::string> out;
  for (const std::string& name : names) {
    struct stat st;
    if (lstat((root + "/objects/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        verified.Matches(name, Stamp(st)))
      out.insert(name);
  }
  return out;
}

Status RecordVerified(const std::string& root, const std::set<std::string>& names) {
  VerifiedObjects verified;
  verified.Load(root + "/verified.json");
  for (const std::string& name : names) {
    struct stat st;
    // Gone (collected with a deleted snapshot): SaveIfChanged drops its record.
    if (lstat((root + "/objects/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
      verified.Remember(name, Stamp(st));
  }
  verified.ForceSave();
  return verified.SaveIfChanged(root + "/verified.json", root + "/objects");
}

}  // namespace mcpcell::sandbox::snapshot
