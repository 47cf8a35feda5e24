// Packument filtering (see npm_index.h).
#include "packages/npm_index.h"

#include "packages/pypi_index.h"
#include "packages/rules.h"
#include "packages/versions.h"

namespace mcpcell::packages {

namespace {

// dist.integrity ("sha512-<b64> sha1-<b64>") or dist.shasum -> the strongest digest.
bool TarballDigest(const nlohmann::json& dist, DigestAlgo* algo, std::string* hex) {
  if (dist.contains("integrity") && dist["integrity"].is_string()) {
    std::string integrity = dist["integrity"];
    size_t pos = 0;
    while (pos < integrity.size()) {
      size_t end = integrity.find(' ', pos);
      if (end == std::string::npos) end = integrity.size();
      std::string item = integrity.substr(pos, end - pos);
      pos = end + 1;
      if (item.rfind("sha512-", 0) == 0) {
        auto h = Base64ToHex(item.substr(7));
        if (h && h->size() == 128) {
          *algo = DigestAlgo::kSha512;
          *hex = *h;
          return true;
        }
      }
    }
  }
  if (dist.contains("shasum") && dist["shasum"].is_string()) {
    std::string s = dist["shasum"];
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (IsLowerHex(s, 40)) {
      *algo = DigestAlgo::kSha1;
      *hex = s;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<FilteredPackument> FilterPackument(std::string_view json_text, const std::string& name,
                                          const PackagesConfig& policy,
                                          const std::string& service_base) {
  FilteredPackument out;
  try {
    out.doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return Error::Msg("the upstream packument is not JSON: " + std::string(e.what()));
  }
  nlohmann::json& doc = out.doc;
  if (!doc.is_object() || !doc.contains("versions") || !doc["versions"].is_object())
    return Error::Msg("the upstream packument has no \"versions\" object");
  if (!doc.contains("name") || doc["name"] != name)
    return Error::Msg("the upstream packument is not for \"" + name + "\"");
  auto refuse = [&](const std::string& why) {
    if (out.refusals.size() < 8) out.refusals.push_back(why);
  };
  nlohmann::json kept = nlohmann::json::object();
  std::optional<SemVer> best;
  std::string best_version;
  for (auto& [version, meta] : doc["versions"].items()) {
    ++out.versions_total;
    if (auto why = CheckVersion(policy, Registry::kNpm, name, version)) {
      refuse(*why);
      continue;
    }
    if (!meta.is_object() || !meta.contains("dist") || !meta["dist"].is_object() ||
        !meta["dist"].contains("tarball") || !meta["dist"]["tarball"].is_string()) {
      refuse("\"" + name + "\" " + version + ": no dist.tarball");
      continue;
    }
    NpmTarball t{name, version, meta["dist"]["tarball"], "", DigestAlgo::kSha512, ""};
    if (!TarballDigest(meta["dist"], &t.algo, &t.hex)) {
      refuse("\"" + name + "\" " + version + ": no sha512 integrity or shasum to verify");
      continue;
    }
    std::string path = t.url.substr(0, t.url.find_first_of("?#"));
    t.filename = path.substr(path.rfind('/') + 1);
    if (!IsSafeFilename(t.filename) || !t.filename.ends_with(".tgz")) {
      refuse("\"" + name + "\" " + version + ": tarball name \"" + t.filename + "\" refused");
      continue;
    }
    meta["dist"]["tarball"] = service_base + "-/files/" + std::string(DigestName(t.algo)) + "-" +
                              t.hex + "/" + t.filename;
    auto sv = ParseSemVer(version);
    if (sv && sv->prerelease.empty() && (!best || CompareSemVer(*sv, *best) > 0)) {
      best = *sv;
      best_version = version;
    }
    kept[version] = meta;
    out.tarballs.push_back(std::move(t));
  }
  doc["versions"] = std::move(kept);
  nlohmann::json tags = nlohmann::json::object();
  if (doc.contains("dist-tags") && doc["dist-tags"].is_object()) {
    for (auto& [tag, v] : doc["dist-tags"].items()) {
      if (v.is_string() && doc["versions"].contains(v.get<std::string>())) tags[tag] = v;
    }
  }
  if (!tags.contains("latest") && !best_version.empty()) tags["latest"] = best_version;
  doc["dist-tags"] = std::move(tags);
  if (doc.contains("time") && doc["time"].is_object()) {
    nlohmann::json time = nlohmann::json::object();
    for (auto& [k, v] : doc["time"].items()) {
      if (k == "created" || k == "modified" || doc["versions"].contains(k)) time[k] = v;
    }
    doc["time"] = std::move(time);
  }
  return out;
}

}  // namespace mcpcell::packages
