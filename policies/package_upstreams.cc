#include "policies/package_upstreams.h"

#include <algorithm>

#include "egress/allowlist.h"
#include "egress/host.h"

namespace mcpcell::policies {
namespace {

// Where PyPI keeps the files its index pages link to.
constexpr const char* kPypiFilesHost = "files.pythonhosted.org";

// "https://host[:port]/path" -> host and port (443 for https, 80 for http). The loader has
// checked the URL's form (CheckUpstreamUrl); anything else gives nullopt.
std::optional<PackageUpstream> UpstreamOf(const std::string& url, const std::string& what) {
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0) return std::nullopt;
  const std::string rest = url.substr(https ? 8 : 7);
  auto authority = egress::ParseAuthority(rest.substr(0, rest.find('/')));
  if (!authority) return std::nullopt;
  return PackageUpstream{authority->host,
                         authority->port.value_or(https ? uint16_t{443} : uint16_t{80}), what};
}

}  // namespace

std::vector<PackageUpstream> PackageUpstreams(const PackagesPolicy& packages) {
  std::vector<PackageUpstream> out;
  if (packages.mode == PackagesMode::kDisabled) return out;
  auto serves = [&](const char* registry) {
    return std::find(packages.registries.begin(), packages.registries.end(), registry) !=
           packages.registries.end();
  };
  if (serves("pypi")) {
    if (auto index = UpstreamOf(packages.pypi_index, "packages.pypi_index")) out.push_back(*index);
    if (auto files = egress::ParseHost(kPypiFilesHost))
      out.push_back({*files, 443, "PyPI's file host, for packages.pypi_index"});
  }
  if (serves("npm")) {
    if (auto registry = UpstreamOf(packages.npm_registry, "packages.npm_registry"))
      out.push_back(*registry);
  }
  return out;
}

std::optional<DirectRegistryAccess> FindDirectRegistryAccess(const Policy& policy) {
  if (!policy.network.egress_allowed || policy.packages.allow_direct_registry_access) return {};
  const std::vector<PackageUpstream> upstreams = PackageUpstreams(policy.packages);
  for (size_t i = 0; i < policy.network.allow.size(); ++i) {
    const std::string& text = policy.network.allow[i];
    // One entry at a time, so the error names the first offending line of the file.
    auto entry = egress::Allowlist::Parse({text});
    if (!entry) continue;
    for (const PackageUpstream& up : upstreams) {
      if (!entry->Match(up.host, up.port)) continue;
      return DirectRegistryAccess{
          i, "\"" + text + "\" reaches " + up.host.Display() +
                 ", an upstream of the package service (" + up.what +
                 "): code in the cell could install past every package rule; remove it, or set "
                 "packages.allow_direct_registry_access = true to give up the package rules "
                 "for direct installs"};
    }
  }
  return {};
}

}  // namespace mcpcell::policies
