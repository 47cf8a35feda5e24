#include "policies/package_env.h"

#include <algorithm>

#include "packages/rules.h"
#include "packages/service_address.h"

namespace mcpcell::policies {
namespace {

using packages::Registry;

bool Enabled(const PackagesPolicy& p, Registry r) {
  return !packages::CheckRegistryEnabled(p, r).has_value();
}

}  // namespace

std::vector<std::string> PackageCellEnv(const PackagesPolicy& p) {
  std::vector<std::string> env;
  // Only when the service serves the registry: otherwise pip and npm keep their defaults,
  // which reach a registry only if the network allowlist lets them (docs/packages.md), and
  // nothing in the workspace (a mounted project's node_modules/.bin, say) enters PATH.
  if (Enabled(p, Registry::kPypi)) {
    env.push_back(std::string("PIP_INDEX_URL=") + packages::kPypiIndexUrl);
    // Plain http is fine here: it never leaves the host (cell -> its proxy -> the service),
    // and every artifact carries its sha256, which pip checks.
    env.push_back(std::string("PIP_TRUSTED_HOST=") + packages::kServiceHost);
    env.push_back("PIP_DISABLE_PIP_VERSION_CHECK=1");
    // The server's cache is the one that counts; a second copy in the workspace only
    // costs the cell's disk.
    env.push_back("PIP_NO_CACHE_DIR=1");
    env.push_back("PIP_NO_INPUT=1");
    if (!p.allow_sdist) env.push_back("PIP_ONLY_BINARY=:all:");
  }
  if (Enabled(p, Registry::kNpm)) {
    env.push_back(std::string("npm_config_registry=") + packages::kNpmRegistryUrl);
    env.push_back(std::string("NODE_PATH=") + kNodeModulesDir);
    env.push_back("npm_config_audit=false");
    env.push_back("npm_config_fund=false");
    env.push_back("npm_config_update_notifier=false");
    if (!p.allow_install_scripts) env.push_back("npm_config_ignore_scripts=true");
  }
  return env;
}

void AddPackageEnv(const policies::PackagesPolicy& packages, sandbox::CellSpec& spec) {
  std::string front;
  if (!packages::CheckRegistryEnabled(packages, Registry::kPypi))
    front += std::string(kVenvDir) + "/bin:";
  if (!packages::CheckRegistryEnabled(packages, Registry::kNpm))
    front += std::string(kNodeModulesDir) + "/.bin:";
  auto path = std::find_if(spec.env.begin(), spec.env.end(),
                           [](const std::string& e) { return e.rfind("PATH=", 0) == 0; });
  if (path == spec.env.end()) {
    spec.env.push_back("PATH=" + front + "/usr/local/bin:/usr/bin:/bin");
  } else {
    *path = "PATH=" + front + path->substr(5);
  }
  for (std::string& var : PackageCellEnv(packages)) spec.env.push_back(std::move(var));
}

std::string PackagesModeName(policies::PackagesMode mode) {
  switch (mode) {
    case policies::PackagesMode::kOnline:
      return "online";
    case policies::PackagesMode::kOffline:
      return "offline";
    case policies::PackagesMode::kDisabled:
      break;
  }
  return "disabled";
}

std::string PackagesSummary(const policies::PackagesPolicy& p) {
  if (p.mode == policies::PackagesMode::kDisabled) {
    return "disabled (packages.mode): pip_install and npm_install refuse";
  }
  const bool offline = p.mode == policies::PackagesMode::kOffline;
  std::string registries;
  auto add = [&](const std::string& part) {
    registries += (registries.empty() ? "" : ", ") + part;
  };
  if (Enabled(p, Registry::kPypi)) {
    add(offline ? "pypi (wheelhouse " + p.wheelhouse + ")" : "pypi (" + p.pypi_index + ")");
  }
  if (Enabled(p, Registry::kNpm)) {
    add(offline ? "npm (directory " + p.npm_offline_dir + ")" : "npm (" + p.npm_registry + ")");
  }
  if (registries.empty())
    registries = "no registry (packages.registries lists neither pypi nor npm)";
  return PackagesModeName(p.mode) + " through the server's package cache: " + registries + "; " +
         (p.allow_sdist ? "sdists allowed (pip may run their build code)" : "wheels only") + "; " +
         (p.allow_install_scripts ? "npm install scripts allowed" : "npm install scripts off");
}

}  // namespace mcpcell::policies
