// Offline npm tarballs (see npm_directory.h).
#include "packages/npm_directory.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "packages/digest.h"

namespace mcpcell::packages {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxManifest = 1 << 20;
constexpr uint64_t kMaxScanned = 64ull << 20;

// Octal tar number field (NUL/space terminated).
std::optional<uint64_t> TarNumber(const char* field, size_t n) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && field[i] == ' ') ++i;
  size_t digits = 0;
  for (; i < n && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) v = v * 8 + (field[i] - '0');
  if (digits == 0 || digits > 12) return std::nullopt;
  return v;
}

// Reads the gzip stream of `path` block by block, handing tar entries to the caller.
class TarReader {
 public:
  explicit TarReader(const std::string& path) : in_(path, std::ios::binary) {
    zs_.zalloc = Z_NULL;
    zs_.zfree = Z_NULL;
    zs_.opaque = Z_NULL;
    ok_ = in_.good() && inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK;
  }
  ~TarReader() { inflateEnd(&zs_); }
  bool ok() const { return ok_; }

  // Fills `out` with exactly n uncompressed bytes; false at the end or on an error.
  bool Read(char* out, size_t n) {
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out > 0) {
      if (zs_.avail_in == 0) {
        in_.read(buf_, sizeof(buf_));
        if (in_.gcount() <= 0) return false;
        zs_.next_in = reinterpret_cast<Bytef*>(buf_);
        zs_.avail_in = static_cast<uInt>(in_.gcount());
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END && zs_.avail_out > 0) return false;
      if (rc != Z_OK && rc != Z_STREAM_END) return false;
    }
    total_ += n;
    return total_ <= kMaxScanned;
  }

 private:
  std::ifstream in_;
  z_stream zs_{};
  char buf_[16384];
  bool ok_ = false;
  uint64_t total_ = 0;
};

std::string Field(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

}  // namespace

Result<nlohmann::json> ReadTarballPackageJson(const std::string& path) {
  TarReader tar(path);
  if (!tar.ok()) return Error::Msg("\"" + path + "\": cannot open it as gzip");
  char header[512];
  std::vector<char> skip(512);
  while (tar.Read(header, sizeof(header))) {
    if (header[0] == '\0') break;  // the end-of-archive blocks
    // POSIX ustar has a name prefix at 345; GNU tar keeps other fields there.
    bool ustar = std::memcmp(header + 257, "ustar\0", 6) == 0;
    std::string name = ustar ? Field(header + 345, 155) : "";
    name = name.empty() ? Field(header, 100) : name + "/" + Field(header, 100);
    auto size = TarNumber(header + 124, 12);
    if (!size) return Error::Msg("\"" + path + "\": a tar header with a malformed size");
    char type = header[156];
    size_t slash = name.find('/');
    bool manifest = (type == '0' || type == '\0') && slash != std::string::npos &&
                    name.substr(slash + 1) == "package.json";
    uint64_t padded = (*size + 511) / 512 * 512;
    if (manifest) {
      if (*size > kMaxManifest)
        return Error::Msg("\"" + path + "\": package.json is larger than 1 MiB");
      std::string text(padded, '\0');
      if (!tar.Read(text.data(), padded))
        return Error::Msg("\"" + path + "\": the archive ends inside package.json");
      text.resize(*size);
      try {
        return nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        return Error::Msg("\"" + path + "\": package.json is not JSON: " + e.what());
      }
    }
    for (uint64_t left = padded; left > 0; left -= 512) {
      if (!tar.Read(skip.data(), 512))
        return Error::Msg("\"" + path + "\": the archive ends inside an entry");
    }
  }
  return Error::Msg("\"" + path + "\": no package.json in the first 64 MiB of the archive");
}

Result<nlohmann::json> NpmDirectory::Packument(const std::string& dir, const std::string& name) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error::Msg("npm_offline_dir \"" + dir + "\": " + ec.message());
  nlohmann::json doc = {{"name", name},
                        {"versions", nlohmann::json::object()},
                        {"dist-tags", nlohmann::json::object()}};
  for (const auto& entry : it) {
    std::string path = entry.path().string();
    if (!path.ends_with(".tgz")) continue;
    auto stamp = StatRegularFile(path);
    if (!stamp) continue;
    // A tarball that cannot be read is remembered as such (with its error) until it changes.
    Scanned s = scanned_
                    .Get(path, *stamp,
                         [](const std::string& p) -> Result<Scanned> {
                           Scanned read;
                           auto manifest = ReadTarballPackageJson(p);
                           auto sha = FileDigestHex(p, DigestAlgo::kSha512);
                           if (manifest && sha) {
                             read.manifest = std::move(manifest.value());
                             read.sha512 = *sha;
                           } else {
                             read.error = manifest ? sha.error().message : manifest.error().message;
                           }
                           return read;
                         })
                    .value();
    if (!s.error.empty() || !s.manifest.is_object()) continue;
    if (!s.manifest.contains("name") || s.manifest["name"] != name ||
        !s.manifest.contains("version") || !s.manifest["version"].is_string())
      continue;
    std::string version = s.manifest["version"];
    nlohmann::json meta = s.manifest;
    for (const char* drop : {"readme", "readmeFilename", "_id", "_resolved", "_integrity"})
      meta.erase(drop);
    // The integrity is what the tarball holds, in npm's form: sha512-<base64>.
    meta["dist"] = {{"tarball", "file://" + path},
                    {"integrity", "sha512-" + HexToBase64(s.sha512)}};
    doc["versions"][version] = std::move(meta);
  }
  if (doc["versions"].empty())
    return Error::Msg("npm_offline_dir \"" + dir + "\" has no tarball of \"" + name + "\"");
  return doc;
}

std::optional<std::string> NpmDirectory::Find(const std::string& dir, const std::string& sha512,
                                              const std::string& filename) {
  std::string path = (fs::path(dir) / filename).string();
  auto stamp = StatRegularFile(path);
  if (!stamp) return std::nullopt;
  auto known = scanned_.Find(path, *stamp);
  if (!known || known->sha512 != sha512) return std::nullopt;
  return path;
}

}  // namespace mcpcell::packages
