// Export and Import: a snapshot as a tar.gz of manifest.json (first) and objects/<sha256>,
// each content once. An imported archive is untrusted: only those names and regular files
// are accepted (so no absolute path, "..", link or device in the tar), the manifest is
// checked strictly (paths normal, each under a dir it lists, so none passes through a
// symlink), sizes against the manifest and the quota, and every content against its name.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox {

using namespace snapshot;

namespace {

using Type = SnapshotEntry::Type;
using ArchivePtr = std::unique_ptr<archive, int (*)(archive*)>;
constexpr size_t kMaxManifest = 1u << 30;

Error ArchiveError(archive* a, const std::string& what) {
  const char* msg = archive_error_string(a);
  return Error::Msg(what + ": " + (msg ? msg : "libarchive error"));
}

// One object to export: the file holding it and its size.
std::map<std::string, std::pair<std::string, uint64_t>> ObjectsOf(const std::string& root,
                                                                  const SnapshotInfo& info) {
  std::map<std::string, std::pair<std::string, uint64_t>> out;
  for (const SnapshotLayer& layer : info.layers)
    for (const SnapshotEntry& e : layer.entries)
      if (e.type == Type::kFile && !out.count(e.sha256))
        out[e.sha256] = {root + "/objects/" + ObjectName(e.sha256, e.mode, e.uid, e.gid), e.size};
  return out;
}

Status WriteEntry(archive* a, const std::string& name, uint64_t size) {
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                             archive_entry_free);
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0600);
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
  if (archive_write_header(a, e.get()) != ARCHIVE_OK) return ArchiveError(a, name);
  return Ok();
}

// Copies an object into the archive, hashing it: a corrupted object is not exported.
Status WriteObject(archive* a, const std::string& sha, const std::string& file, uint64_t size) {
  UniqueFd fd(open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::Sys("open(\"" + file + "\")");
  if (Status s = WriteEntry(a, "objects/" + sha, size); !s) return s;
  char* buf = CopyBuffer();
  Sha256 h;
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(fd.get(), buf, kCopyBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read(\"" + file + "\")");
    if (n == 0) break;
    h.Update(buf, static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    if (archive_write_data(a, buf, static_cast<size_t>(n)) != n)
      return ArchiveError(a, "objects/" + sha);
  }
  if (total != size || h.FinalHex() != sha)
    return Error::Msg("object " + file +
                      " does not match its digest: the store is corrupted "
                      "(mcpcell snapshot verify)");
  return Ok();
}

Result<std::string> ReadAll(archive* a, const std::string& name, size_t max) {
  std::string data;
  char buf[65536];
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n < 0) return ArchiveError(a, name);
    if (n == 0) return data;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max) return Error::Msg(name + ": larger than " + std::to_string(max));
  }
}

// One imported content in a temp file of the objects dir, checked against its name.
Status ReadObject(archive* a, const std::string& sha, uint64_t size, const std::string& tmp) {
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return Error::Sys("open(\"" + tmp + "\")");
  Sha256 h;
  uint64_t total = 0;
  char* buf = CopyBuffer();
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, kCopyBlock);
    if (n < 0) return ArchiveError(a, "objects/" + sha);
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > size) return Error::Msg("objects/" + sha + ": larger than the manifest says");
    h.Update(buf, static_cast<size_t>(n));
    if (write(fd.get(), buf, static_cast<size_t>(n)) != n)
      return Error::Sys("write(\"" + tmp + "\")");
  }
  if (total != size) return Error::Msg("objects/" + sha + ": smaller than the manifest says");
  if (h.FinalHex() != sha)
    return Error::Msg("objects/" + sha + ": content does not match its digest (corrupted)");
  return Ok();
}

struct ImportState {
  SnapshotInfo manifest;
  std::map<std::string, uint64_t> sizes;     // sha256 -> size, from the manifest
  std::map<std::string, std::string> temps;  // sha256 -> temp file holding it
};

Status ReadManifestEntry(archive* a, ImportState* st) {
  archive_entry* entry = nullptr;
  int r = archive_read_next_header(a, &entry);
  if (r != ARCHIVE_OK) return ArchiveError(a, "the archive's first entry");
  if (std::string(archive_entry_pathname(entry)) != "manifest.json" ||
      archive_entry_filetype(entry) != AE_IFREG || archive_entry_hardlink(entry) != nullptr)
    return Error::Msg("the archive's first entry is not the file manifest.json");
  auto text = ReadAll(a, "manifest.json", kMaxManifest);
  if (!text) return text.error();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::Msg("manifest.json: not valid JSON");
  auto info = ManifestFromJson(j, true);
  if (!info) return info.error().Wrap("manifest.json");
  st->manifest = std::move(*info);
  for (const SnapshotLayer& layer : st->manifest.layers)
    for (const SnapshotEntry& e : layer.entries)
      if (e.type == Type::kFile) st->sizes[e.sha256] = e.size;
  return Ok();
}

Status ReadObjects(archive* a, const std::string& objects_dir, ImportState* st) {
  archive_entry* entry = nullptr;
  for (;;) {
    int r = archive_read_next_header(a, &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return ArchiveError(a, "reading the archive");
    const std::string name = archive_entry_pathname(entry);
    const std::string sha = name.rfind("objects/", 0) == 0 ? name.substr(8) : "";
    if (!IsSha256Hex(sha) || archive_entry_filetype(entry) != AE_IFREG ||
        archive_entry_hardlink(entry) != nullptr)
      return Error::Msg("archive entry \"" + name +
                        "\": not a file named manifest.json or objects/<sha256>");
    auto size = st->sizes.find(sha);
    if (size == st->sizes.end()) return Error::Msg(name + ": not named by the manifest");
    if (st->temps.count(sha)) return Error::Msg(name + ": in the archive twice");
    std::string tmp = objects_dir + "/.tmp-" + RandomId();
    st->temps[sha] = tmp;
    if (Status s = ReadObject(a, sha, size->second, tmp); !s) return s;
  }
  for (const auto& [sha, size] : st->sizes)
    if (!st->temps.count(sha)) return Error::Msg("objects/" + sha + ": missing from the archive");
  return Ok();
}

// The objects the snapshot links (each content with each mode and owner), from the temps.
Status MakeObjects(ObjectStore& objects, const ImportState& st, std::set<std::string>* written) {
  for (const SnapshotLayer& layer : st.manifest.layers) {
    for (const SnapshotEntry& e : layer.entries) {
      if (e.type != Type::kFile || objects.Has(ObjectName(e.sha256, e.mode, e.uid, e.gid)))
        continue;
      const std::string& tmp = st.temps.at(e.sha256);
      UniqueFd fd(open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) return Error::Sys("open(\"" + tmp + "\")");
      uint64_t size = 0, added = 0;
      bool created = false;
      auto sha = objects.Put(fd.get(), e.mode, e.uid, e.gid, e.mtime_ns, &size, &added, &created);
      if (!sha) return sha.error();
      if (*sha != e.sha256) return Error::Msg(tmp + ": changed while importing");
      if (created) written->insert(ObjectName(e.sha256, e.mode, e.uid, e.gid));
    }
  }
  return Ok();
}

}  // namespace

Status SnapshotStore::Export(const std::string& tenant, const std::string& id_or_name,
                             const std::string& path) {
  if (StoreMissing(root_)) return NotFound(id_or_name);
  if (Status s = EnsureLayout(root_); !s) return s;
  auto lock = StoreLock::Acquire(root_, false);
  if (!lock) return lock.error();
  auto found = FindLocked(root_, tenant, id_or_name);
  if (!found) return found.error();
  auto info = ReadManifest(root_, found->id, true);
  if (!info) return info.error();
  const std::string tmp = path + ".tmp-" + RandomId();
  ArchivePtr a(archive_write_new(), archive_write_free);
  Status s = Ok();
  if (archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK ||
      archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK)
    s = ArchiveError(a.get(), "create " + tmp);
  const std::string manifest = ManifestToJson(*info).dump(1);
  if (s) s = WriteEntry(a.get(), "manifest.json", manifest.size());
  if (s && archive_write_data(a.get(), manifest.data(), manifest.size()) !=
               static_cast<la_ssize_t>(manifest.size()))
    s = ArchiveError(a.get(), "manifest.json");
  for (const auto& [sha, object] : ObjectsOf(root_, *info))
    if (s) s = WriteObject(a.get(), sha, object.first, object.second);
  if (s && archive_write_close(a.get()) != ARCHIVE_OK) s = ArchiveError(a.get(), "close " + tmp);
  if (s && rename(tmp.c_str(), path.c_str()) != 0)
    s = Error::Sys("rename(\"" + tmp + "\", \"" + path + "\")");
  if (!s) unlink(tmp.c_str());
  return s;
}

Result<SnapshotInfo> SnapshotStore::Import(const std::string& tenant, const std::string& path,
                                           const SnapshotLimits& limits) {
  if (Status s = CheckTenant(tenant); !s) return s.error();
  if (Status s = EnsureLayout(root_); !s) return s.error();
  auto lock = StoreLock::Acquire(root_, true);
  if (!lock) return lock.error();
  ArchivePtr a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK)
    return ArchiveError(a.get(), "open " + path);
  ObjectStore objects(root_ + "/objects");
  ImportState st;
  Status s = ReadManifestEntry(a.get(), &st);
  if (s) {
    auto left = QuotaLeft(root_, tenant, st.manifest.name, limits);
    if (!left)
      s = left.error();
    else if (uint64_t need = StoredBytes(st.manifest.layers); *left && need > *left)
      s = Error::Msg("snapshot storage quota exceeded: the archive holds " + std::to_string(need) +
                     " bytes, " + std::to_string(*left) + " are left of [limits] snapshot_storage");
  }
  if (s) s = ReadObjects(a.get(), objects.dir(), &st);
  std::set<std::string> verified;  // as in Capture: hashed here, or verified before linking
  if (s) s = MakeObjects(objects, st, &verified);
  SnapshotInfo info;
  if (s) {
    info = NewInfo(tenant, st.manifest.name, std::move(st.manifest.layers));
    std::set<std::string> before = StillVerified(root_, ObjectNamesOf(info.layers));
    verified.insert(before.begin(), before.end());
    s = Commit(root_, info);
  }
  if (s) (void)RecordVerified(root_, verified);
  for (const auto& [sha, tmp] : st.temps) unlink(tmp.c_str());
  if (!s) {
    (void)objects.CollectGarbage();
    return s.error().Wrap("import " + path);
  }
  info.layers.clear();
  return info;
}

}  // namespace mcpcell::sandbox
