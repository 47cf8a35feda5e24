// TemplateStore (template_store.h): names, versions, the staging dir, commit, list, find,
// delete. The rootfs's contents come from template_store_fill.cc and _bake.cc; its digest
// from template_store_digest.cc.
#include "sandbox/template_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/unique_fd.h"
#include "sandbox/snapshot_store_internal.h"
#include "sandbox/state_dir.h"  // RemoveCellDir

namespace mcpcell::sandbox {
namespace {

using snapshot::NowRfc3339;
using snapshot::RandomId;
using snapshot::ReadSmallFile;

constexpr size_t kMaxInfoBytes = 1 << 20;

// An flock on <root>/lock, released with the fd.
Result<UniqueFd> LockStore(const std::string& root) {
  const std::string path = root + "/lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  while (flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return Error::Sys("flock(\"" + path + "\")");
  return fd;
}

// `dir`, 0755 whatever the umask when made here: the cells' host uids walk through it.
Status MakeDir0755(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0)
    return errno == EEXIST ? Ok() : Error::Sys("mkdir(\"" + dir + "\")");
  if (chmod(dir.c_str(), 0755) != 0) return Error::Sys("chmod(\"" + dir + "\", 0755)");
  return Ok();
}

// `dir` and its missing parents, each 0755 (MakeDir0755).
Status MakeReachableDir(const std::string& dir) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    if (Status s = MakeDir0755(dir.substr(0, pos)); !s) return s;
  }
  return Ok();
}

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (dirent* de = readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != ".." && n != "lock" && n.rfind(".tmp-", 0) != 0) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// "1".."4294967295" without leading zeros, else 0.
uint32_t ParseVersion(const std::string& s) {
  if (s.empty() || s.size() > 10 || s[0] == '0') return 0;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v > UINT32_MAX ? 0 : static_cast<uint32_t>(v);
}

std::vector<uint32_t> Versions(const std::string& name_dir) {
  std::vector<uint32_t> versions;
  for (const std::string& n : DirNames(name_dir))
    if (uint32_t v = ParseVersion(n); v != 0) versions.push_back(v);
  std::sort(versions.begin(), versions.end());
  return versions;
}

nlohmann::json InfoToJson(const TemplateInfo& t) {
  return {{"name", t.name},     {"version", t.version},  {"created", t.created},
          {"source", t.source}, {"digest", t.digest},    {"files", t.files},
          {"bytes", t.bytes},   {"packages", t.packages}};
}

Result<TemplateInfo> ReadInfo(const std::string& dir) {
  auto text = ReadSmallFile(dir + "/template.json", kMaxInfoBytes);
  if (!text) return text.error();
  try {
    nlohmann::json j = nlohmann::json::parse(*text);
    TemplateInfo t;
    t.name = j.at("name").get<std::string>();
    t.version = j.at("version").get<uint32_t>();
    t.created = j.at("created").get<std::string>();
    t.source = j.at("source").get<std::string>();
    t.digest = j.at("digest").get<std::string>();
    t.files = j.at("files").get<uint64_t>();
    t.bytes = j.at("bytes").get<uint64_t>();
    t.packages = j.at("packages").get<std::vector<std::string>>();
    t.dir = dir;
    return t;
  } catch (const nlohmann::json::exception& e) {
    return Error::Msg(dir + "/template.json: " + e.what());
  }
}

Status WriteInfo(const std::string& path, const TemplateInfo& t) {
  const std::string text = InfoToJson(t).dump(2) + "\n";
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  for (size_t off = 0; off < text.size();) {
    ssize_t w = write(fd.get(), text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Error::Sys("write(\"" + path + "\")");
    off += static_cast<size_t>(w);
  }
  if (fsync(fd.get()) != 0) return Error::Sys("fsync(\"" + path + "\")");
  return Ok();
}

std::string KnownTemplates(const std::vector<TemplateInfo>& all) {
  std::string known = "\"host\"";
  std::string last;
  for (const TemplateInfo& t : all) {
    if (t.name == last) continue;
    last = t.name;
    known += ", \"" + t.name + "\"";
  }
  return known;
}

}  // namespace

Status CheckTemplateName(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return Error::Msg("template name \"" + name + "\": must be 1-64 characters");
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return Error::Msg("template name \"" + name + "\": only A-Z a-z 0-9 . _ - allowed");
  }
  if (name == "." || name == "..") return Error::Msg("template name \"" + name + "\": reserved");
  if (name == kHostTemplateName)
    return Error::Msg("template name \"host\": reserved for the host's own /usr");
  return Ok();
}

Result<TemplateRef> ParseTemplateRef(const std::string& text) {
  TemplateRef ref;
  const size_t at = text.find('@');
  ref.name = text.substr(0, at);
  if (Status s = CheckTemplateName(ref.name); !s) return s.error();
  if (at != std::string::npos) {
    ref.version = ParseVersion(text.substr(at + 1));
    if (ref.version == 0)
      return Error::Msg("template \"" + text + "\": the version after '@' must be 1, 2, 3...");
  }
  return ref;
}

std::string TemplateRefText(const std::string& name, uint32_t version) {
  return name + "@" + std::to_string(version);
}

TemplateBuild::TemplateBuild(TemplateBuild&& other) noexcept
    : name_(std::move(other.name_)), dir_(std::move(other.dir_)) {
  other.dir_.clear();
}

TemplateBuild::~TemplateBuild() {
  if (!dir_.empty()) (void)RemoveCellDir(dir_);  // also unwritable dirs (0555 /proc of a rootfs)
}

TemplateStore::TemplateStore(const std::string& state_dir)
    : root_(state_dir + "/templates/built") {}

Result<TemplateBuild> TemplateStore::Begin(const std::string& name) const {
  if (Status s = CheckTemplateName(name); !s) return s.error();
  if (Status s = MakeReachableDir(root_); !s) return s.error().Wrap("template store");
  TemplateBuild build(name, root_ + "/.tmp-" + RandomId());
  if (mkdir(build.dir().c_str(), 0755) != 0) return Error::Sys("mkdir(\"" + build.dir() + "\")");
  if (chmod(build.dir().c_str(), 0755) != 0) return Error::Sys("chmod(\"" + build.dir() + "\")");
  if (Status s = MakeDir0755(build.rootfs()); !s) return s.error();
  return build;
}

Result<TemplateInfo> TemplateStore::Commit(TemplateBuild& build, const std::string& source,
                                           const std::vector<std::string>& packages) const {
  if (build.dir_.empty()) return Error::Msg("template build already committed");
  // The rootfs itself is the overlay's lower "/": cells must be able to enter it.
  if (chmod(build.rootfs().c_str(), 0755) != 0)
    return Error::Sys("chmod(\"" + build.rootfs() + "\", 0755)");
  auto digest = TemplateDigest(build.rootfs());
  if (!digest) return digest.error().Wrap("digest of the new template");
  TemplateInfo info{.name = build.name(),
                    .created = NowRfc3339(),
                    .source = source,
                    .digest = digest->sha256,
                    .files = digest->files,
                    .bytes = digest->bytes,
                    .packages = packages};
  auto lock = LockStore(root_);
  if (!lock) return lock.error();
  const std::string name_dir = root_ + "/" + info.name;
  if (Status s = MakeDir0755(name_dir); !s) return s.error();
  std::vector<uint32_t> versions = Versions(name_dir);
  info.version = versions.empty() ? 1 : versions.back() + 1;
  info.dir = name_dir + "/" + std::to_string(info.version);
  if (Status s = WriteInfo(build.dir() + "/template.json", info); !s) return s.error();
  if (rename(build.dir().c_str(), info.dir.c_str()) != 0)
    return Error::Sys("rename(\"" + build.dir() + "\", \"" + info.dir + "\")");
  build.dir_.clear();
  return info;
}

Result<std::vector<TemplateInfo>> TemplateStore::List() const {
  std::vector<TemplateInfo> all;
  for (const std::string& name : DirNames(root_)) {
    if (!CheckTemplateName(name).ok()) continue;
    for (uint32_t v : Versions(root_ + "/" + name)) {
      auto info = ReadInfo(root_ + "/" + name + "/" + std::to_string(v));
      if (!info) return info.error();
      all.push_back(std::move(*info));
    }
  }
  return all;
}

Result<TemplateInfo> TemplateStore::Find(const std::string& text) const {
  auto ref = ParseTemplateRef(text);
  if (!ref) return ref.error();
  const std::string name_dir = root_ + "/" + ref->name;
  std::vector<uint32_t> versions = Versions(name_dir);
  if (versions.empty()) {
    auto all = List();
    std::string known = all ? KnownTemplates(*all) : "(the store is unreadable)";
    return Error::Msg("no template \"" + ref->name + "\" in " + root_ + "; known: " + known);
  }
  uint32_t version = ref->version == 0 ? versions.back() : ref->version;
  if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
    std::string known;
    for (uint32_t v : versions) known += (known.empty() ? "" : ", ") + std::to_string(v);
    return Error::Msg("template \"" + ref->name + "\" has no version " + std::to_string(version) +
                      "; versions: " + known);
  }
  return ReadInfo(name_dir + "/" + std::to_string(version));
}

Status TemplateStore::Delete(const std::string& text) const {
  auto ref = ParseTemplateRef(text);
  if (!ref) return ref.error();
  if (ref->version == 0)
    return Error::Msg("delete needs NAME@VERSION, not the bare name \"" + text +
                      "\" (`mcpcell template list` shows the versions)");
  auto info = Find(text);
  if (!info) return info.error();
  auto lock = LockStore(root_);
  if (!lock) return lock.error();
  // Renamed out of sight first, so no reader finds a half-removed version.
  const std::string doomed = root_ + "/.tmp-" + RandomId();
  if (rename(info->dir.c_str(), doomed.c_str()) != 0)
    return Error::Sys("rename(\"" + info->dir + "\", \"" + doomed + "\")");
  if (Status s = RemoveCellDir(doomed); !s) return s;
  const std::string name_dir = root_ + "/" + ref->name;
  if (Versions(name_dir).empty()) (void)rmdir(name_dir.c_str());
  return Ok();
}

}  // namespace mcpcell::sandbox
