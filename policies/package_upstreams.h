// The hosts a policy's package service fetches from, and the network.allow entry, if any,
// that would let code in a cell reach one of them past the service.
//
// The package rules bind only while the service is the cell's one way to a registry: a cell
// whose allowlist reaches pypi.org can `pip install --index-url https://pypi.org/simple/ x`
// and skip every rule, the install log and the wheels-only and install-scripts settings.
// The loader refuses such a policy unless it says packages.allow_direct_registry_access.
// Matching is the egress proxy's own (egress::Allowlist), so what is refused here is what
// the proxy would let through.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "egress/host.h"
#include "policies/policy.h"

namespace mcpcell::policies {

// One host:port the service fetches from for the policy's registries.
struct PackageUpstream {
  egress::Host host;  // in the proxy's normal form ("pypi.org", "127.0.0.1")
  uint16_t port = 443;
  std::string what;  // for messages: "packages.pypi_index"
};

// The upstreams of the registries the policy serves, each on its URL's port: for "pypi" the
// host of pypi_index and files.pythonhosted.org, where PyPI's index links its files (kept
// with a mirror too: a cell that reaches it can install any PyPI file by its URL); for "npm"
// the host of npm_registry, which also serves npmjs's tarballs. Empty when mode is
// "disabled". A mirror's own file host, when it links elsewhere, is not known here.
std::vector<PackageUpstream> PackageUpstreams(const PackagesPolicy& packages);

struct DirectRegistryAccess {
  size_t entry = 0;     // index into network.allow
  std::string message;  // "\"pypi.org:443\" reaches pypi.org, an upstream of ..."
};

// The first network.allow entry (in the file's order) that reaches one of PackageUpstreams,
// unless egress is denied or the policy opts in with allow_direct_registry_access. Entries
// that do not parse are the loader's business; they are skipped here.
std::optional<DirectRegistryAccess> FindDirectRegistryAccess(const Policy& policy);

}  // namespace mcpcell::policies
