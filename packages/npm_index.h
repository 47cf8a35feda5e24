// npm packuments (the registry's per-package JSON document) filtered by a policy: versions
// CheckVersion refuses are removed, dist-tags pointing at removed versions are dropped
// ("latest" re-pointed to the highest remaining release), each remaining version's
// dist.tarball is rewritten to the service's content-addressed URL, and a version whose
// tarball has no digest the service can verify (dist.integrity sha512, or dist.shasum) is
// removed. Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "packages/config.h"
#include "packages/digest.h"

namespace mcpcell::packages {

struct NpmTarball {
  std::string name, version;
  std::string url;       // upstream tarball URL
  std::string filename;  // "left-pad-1.3.0.tgz"
  DigestAlgo algo = DigestAlgo::kSha512;
  std::string hex;
};

struct FilteredPackument {
  nlohmann::json doc;
  std::vector<NpmTarball> tarballs;   // one per version kept
  std::vector<std::string> refusals;  // why versions were removed (first few)
  size_t versions_total = 0;
};

// `name` is the package as requested ("left-pad", "@scope/x"); the document's "name" must
// match it. `service_base` is the registry URL the rewritten tarballs point at.
Result<FilteredPackument> FilterPackument(std::string_view json_text, const std::string& name,
                                          const PackagesConfig& policy,
                                          const std::string& service_base);

}  // namespace mcpcell::packages
