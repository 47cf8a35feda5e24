// A snapshot's manifest.json: its codec (strict on reading: an imported manifest is
// untrusted input), the rules for paths and entries, and the digest.
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <set>

#include "base/utf8.h"
#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox {

Status CheckSnapshotName(const std::string& name) {
  const std::string rule = "1-64 characters of A-Z a-z 0-9 . _ - (no \"/\")";
  if (name.empty() || name.size() > 64)
    return Error::Msg("snapshot name \"" + name + "\": must be " + rule);
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return Error::Msg("snapshot name \"" + name + "\": must be " + rule);
  }
  if (name == "." || name == "..")
    return Error::Msg("snapshot name \"" + name + "\": may not be \".\" or \"..\"");
  return Ok();
}

namespace snapshot {
namespace {

using Type = SnapshotEntry::Type;
using nlohmann::json;

std::optional<Type> TypeFromName(const std::string& s) {
  for (Type t : {Type::kFile, Type::kDir, Type::kSymlink, Type::kWhiteout})
    if (s == TypeName(t)) return t;
  return std::nullopt;
}

bool IsHex(const std::string& s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Fields of an object, strictly: unknown keys and wrong types name the field.
class Fields {
 public:
  Fields(const json& j, std::string where, std::set<std::string> allowed)
      : j_(j), where_(std::move(where)) {
    if (!j.is_object()) {
      error_ = where_ + ": expected an object";
      return;
    }
    for (auto& [k, v] : j.items())
      if (!allowed.count(k) && error_.empty()) error_ = where_ + "." + k + ": unknown field";
  }
  template <typename T>
  void Get(const char* key, T* out, bool required = true) {
    if (!error_.empty()) return;
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) error_ = where_ + "." + key + ": missing";
      return;
    }
    bool ok = false;
    if constexpr (std::is_same_v<T, std::string>)
      ok = it->is_string();
    else if constexpr (std::is_same_v<T, bool>)
      ok = it->is_boolean();
    else if constexpr (std::is_signed_v<T>)
      ok = it->is_number_integer();
    else
      ok = it->is_number_unsigned();
    if (!ok) {
      error_ = where_ + "." + key + ": wrong type (" + it->type_name() + ")";
      return;
    }
    *out = it->get<T>();
  }
  Status status() const { return error_.empty() ? Ok() : Status(Error::Msg(error_)); }

 private:
  const json& j_;
  std::string where_;
  std::string error_;
};

// File names and symlink targets are bytes; JSON text is UTF-8. A name that is not valid
// UTF-8 is written as "<field>_hex" (its bytes in hex) instead of "<field>".
void PutBytes(json& j, const char* field, const std::string& bytes) {
  if (ToValidUtf8(bytes) == bytes) {
    j[field] = bytes;
    return;
  }
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) hex += kHex[c >> 4], hex += kHex[c & 15];
  j[std::string(field) + "_hex"] = hex;
}

Status GetBytes(const json& j, const std::string& where, const char* field, bool required,
                std::string* out) {
  const std::string hex_field = std::string(field) + "_hex";
  auto plain = j.find(field);
  auto hex = j.find(hex_field);
  if (plain != j.end() && hex != j.end())
    return Error::Msg(where + ": both " + field + " and " + hex_field);
  if (plain != j.end()) {
    if (!plain->is_string()) return Error::Msg(where + "." + field + ": wrong type");
    *out = plain->get<std::string>();
    return Ok();
  }
  if (hex == j.end())
    return required ? Status(Error::Msg(where + "." + field + ": missing")) : Ok();
  const std::string h = hex->is_string() ? hex->get<std::string>() : "?";
  if (h.size() % 2 || !IsHex(h, h.size()))
    return Error::Msg(where + "." + hex_field + ": not lower-case hex");
  out->clear();
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < h.size(); i += 2)
    out->push_back(static_cast<char>(nibble(h[i]) * 16 + nibble(h[i + 1])));
  return Ok();
}

Result<SnapshotEntry> EntryFromJson(const json& j, const std::string& where) {
  SnapshotEntry e;
  std::string type;
  Fields f(j, where,
           {"path", "path_hex", "type", "mode", "uid", "gid", "size", "sha256", "target",
            "target_hex", "opaque", "mtime_ns"});
  f.Get("type", &type);
  f.Get("mode", &e.mode);
  f.Get("uid", &e.uid);
  f.Get("gid", &e.gid);
  f.Get("size", &e.size, false);
  f.Get("sha256", &e.sha256, false);
  f.Get("opaque", &e.opaque, false);
  f.Get("mtime_ns", &e.mtime_ns, false);
  if (Status s = f.status(); !s) return s.error();
  if (Status s = GetBytes(j, where, "path", true, &e.path); !s) return s.error();
  if (Status s = GetBytes(j, where, "target", false, &e.target); !s) return s.error();
  auto t = TypeFromName(type);
  if (!t) return Error::Msg(where + ".type: unknown type \"" + type + "\"");
  e.type = *t;
  return e;
}

Status CheckPath(const std::string& path) {
  if (path.empty()) return Ok();  // the layer's top dir
  if (path.front() == '/') return Error::Msg("absolute path");
  if (path.size() > 4096 || path.find('\0') != std::string::npos)
    return Error::Msg("path too long or holds NUL");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return Error::Msg("path component \"" + part + "\" not allowed");
    start = end + 1;
  }
  return Ok();
}

Status CheckEntry(const SnapshotEntry& e) {
  if (Status s = CheckPath(e.path); !s) return s;
  if (e.uid >= kIdRange || e.gid >= kIdRange) return Error::Msg("uid/gid outside 0..65535");
  if (e.mode & ~07777u) return Error::Msg("mode has bits beyond 07777");
  switch (e.type) {
    case Type::kFile:
      if (e.mode & (S_ISUID | S_ISGID)) return Error::Msg("setuid/setgid file");
      if (!IsSha256Hex(e.sha256)) return Error::Msg("sha256 is not 64 lower-case hex digits");
      break;
    case Type::kSymlink:
      if (e.target.empty() || e.target.size() > 4095 || e.target.find('\0') != std::string::npos)
        return Error::Msg("bad symlink target");
      break;
    case Type::kDir:
    case Type::kWhiteout:
      break;
  }
  if (e.path.empty() && e.type != Type::kDir) return Error::Msg("a layer's top must be a dir");
  return Ok();
}

}  // namespace

const char* TypeName(Type type) {
  switch (type) {
    case Type::kFile:
      return "file";
    case Type::kDir:
      return "dir";
    case Type::kSymlink:
      return "symlink";
    case Type::kWhiteout:
      return "whiteout";
  }
  return "?";
}

bool IsSha256Hex(const std::string& s) { return IsHex(s, 64); }
bool IsSnapshotId(const std::string& s) { return IsHex(s, 32); }

Status CheckLayers(const std::vector<SnapshotLayer>& layers) {
  std::set<std::string> names;
  for (const SnapshotLayer& layer : layers) {
    if (layer.name != "root" && layer.name != "usr" && layer.name != "workspace")
      return Error::Msg("layer \"" + layer.name + "\": not root, usr or workspace");
    if (!names.insert(layer.name).second)
      return Error::Msg("layer \"" + layer.name + "\" listed twice");
    std::set<std::string> dirs, paths;
    for (const SnapshotEntry& e : layer.entries) {
      const std::string where = "layer " + layer.name + ": \"" + e.path + "\": ";
      if (Status s = CheckEntry(e); !s) return s.error().Wrap(where.substr(0, where.size() - 2));
      if (!paths.insert(e.path).second) return Error::Msg(where + "listed twice");
      if (!e.path.empty()) {
        size_t slash = e.path.rfind('/');
        std::string parent = slash == std::string::npos ? "" : e.path.substr(0, slash);
        if (!dirs.count(parent))
          return Error::Msg(where + "its parent is not a dir listed before it");
      } else if (&e != &layer.entries.front()) {
        return Error::Msg(where + "the layer's top must come first");
      }
      if (e.type == Type::kDir) dirs.insert(e.path);
    }
    if (layer.entries.empty() || !layer.entries.front().path.empty())
      return Error::Msg("layer " + layer.name + ": does not start with its top dir");
  }
  return Ok();
}

json ManifestToJson(const SnapshotInfo& info) {
  json layers = json::array();
  for (const SnapshotLayer& layer : info.layers) {
    json entries = json::array();
    for (const SnapshotEntry& e : layer.entries) {
      json je = {{"type", TypeName(e.type)},
                 {"mode", e.mode},
                 {"uid", e.uid},
                 {"gid", e.gid},
                 {"mtime_ns", e.mtime_ns}};
      PutBytes(je, "path", e.path);
      if (e.type == Type::kFile) je["size"] = e.size, je["sha256"] = e.sha256;
      if (e.type == Type::kSymlink) PutBytes(je, "target", e.target);
      if (e.type == Type::kDir) je["opaque"] = e.opaque;
      entries.push_back(std::move(je));
    }
    layers.push_back({{"name", layer.name}, {"entries", std::move(entries)}});
  }
  json out = {{"format", kManifestFormat},
          {"id", info.id},
          {"tenant", info.tenant},
          {"name", info.name},
          {"created", info.created},
          {"digest", info.digest},
          {"stored_bytes", info.stored_bytes},
          {"files", info.files},
          {"layers", std::move(layers)}};
  if (!info.kind.empty()) out["kind"] = info.kind;  // absent for ordinary snapshots
  return out;
}

Result<SnapshotInfo> ManifestFromJson(const json& j, bool with_entries) {
  SnapshotInfo info;
  int format = 0;
  Fields f(
      j, "manifest",
      {"format", "id", "tenant", "name", "created", "digest", "stored_bytes", "files", "layers",
       "kind"});
  f.Get("format", &format);
  f.Get("id", &info.id);
  f.Get("tenant", &info.tenant);
  f.Get("name", &info.name);
  f.Get("created", &info.created);
  f.Get("digest", &info.digest);
  f.Get("stored_bytes", &info.stored_bytes);
  f.Get("files", &info.files);
  f.Get("kind", &info.kind, /*required=*/false);
  if (Status s = f.status(); !s) return s.error();
  if (!info.kind.empty() && info.kind != kSnapshotKindHibernation)
    return Error::Msg("manifest.kind: \"" + info.kind + "\" is not a known kind");
  if (format != kManifestFormat)
    return Error::Msg("manifest.format: " + std::to_string(format) + " is not supported");
  if (!IsSnapshotId(info.id)) return Error::Msg("manifest.id: not 32 hex digits");
  if (!info.name.empty())
    if (Status s = CheckSnapshotName(info.name); !s) return s.error().Wrap("manifest.name");
  if (!IsSha256Hex(info.digest)) return Error::Msg("manifest.digest: not a SHA-256");
  const json* layers = &j.at("layers");
  if (!layers->is_array()) return Error::Msg("manifest.layers: expected an array");
  if (!with_entries) return info;
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string where = "manifest.layers[" + std::to_string(i) + "]";
    SnapshotLayer layer;
    Fields lf((*layers)[i], where, {"name", "entries"});
    lf.Get("name", &layer.name);
    if (Status s = lf.status(); !s) return s.error();
    const json& entries = (*layers)[i].at("entries");
    if (!entries.is_array()) return Error::Msg(where + ".entries: expected an array");
    for (size_t k = 0; k < entries.size(); ++k) {
      auto e = EntryFromJson(entries[k], where + ".entries[" + std::to_string(k) + "]");
      if (!e) return e.error();
      layer.entries.push_back(std::move(*e));
    }
    info.layers.push_back(std::move(layer));
  }
  if (Status s = CheckLayers(info.layers); !s) return s.error();
  if (ComputeDigest(info.layers) != info.digest)
    return Error::Msg("manifest.digest: does not match the entries");
  uint64_t files = 0;
  if (StoredBytes(info.layers, &files) != info.stored_bytes || files != info.files)
    return Error::Msg("manifest.stored_bytes or manifest.files: do not match the entries");
  return info;
}

// Each entry's fields as netstrings ("<length>:<bytes>,"): unambiguous for any bytes in a
// name. mtimes are left out: the digest names the content, modes, owners and shape.
std::string ComputeDigest(const std::vector<SnapshotLayer>& layers) {
  Sha256 h;
  std::string record;
  auto field = [&record](const std::string& v) {
    record += std::to_string(v.size()) + ":" + v + ",";
  };
  for (const SnapshotLayer& layer : layers) {
    for (const SnapshotEntry& e : layer.entries) {
      record.clear();
      for (const std::string& v :
           {layer.name, e.path, std::string(TypeName(e.type)), std::to_string(e.mode),
            std::to_string(e.uid), std::to_string(e.gid),
            std::to_string(e.type == Type::kFile ? e.size : 0), e.sha256, e.target,
            std::string(e.opaque ? "1" : "0")})
        field(v);
      record += '\n';
      h.Update(record.data(), record.size());
    }
  }
  return h.FinalHex();
}

uint64_t StoredBytes(const std::vector<SnapshotLayer>& layers, uint64_t* files) {
  std::map<std::string, uint64_t> sizes;
  uint64_t count = 0;
  for (const SnapshotLayer& layer : layers)
    for (const SnapshotEntry& e : layer.entries)
      if (e.type == Type::kFile) sizes[e.sha256] = e.size, ++count;
  uint64_t total = 0;
  for (auto& [sha, size] : sizes) total += size;
  if (files) *files = count;
  return total;
}

std::string RandomId() {
  unsigned char bytes[16];
  // OpenSSL's RAND fails only without any entropy source; an id then would not be random.
  if (RAND_bytes(bytes, sizeof bytes) != 1) std::abort();
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) id += kHex[b >> 4], id += kHex[b & 15];
  return id;
}

std::string NowRfc3339() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::tm tm{};
  gmtime_r(&now.tv_sec, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  // Microseconds: List orders by this, and captures (serialised by the store's lock) take
  // longer than that, so two never share a time.
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", now.tv_nsec / 1000);
  return buf;
}

}  // namespace snapshot
}  // namespace mcpcell::sandbox
