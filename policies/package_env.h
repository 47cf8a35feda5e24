// The cell's side of the package service (docs/packages.md): the environment that sends a
// cell's pip and npm to the server's package service, and where installs live in the cell.
//
// Every cell of `mcpcell serve` gets, when its policy's [packages] enables the registry:
//   pip: PIP_INDEX_URL = the service's PEP 503 index (through the cell's egress proxy, which
//        forwards host packages.mcpcell.internal to the service), PIP_ONLY_BINARY=:all:
//        unless packages.allow_sdist, no version check, no local cache (the server caches);
//   npm: npm_config_registry = the service's registry, npm_config_ignore_scripts=true
//        unless packages.allow_install_scripts, no audit/fund/update-notifier requests;
// and, with them, PATH with the session's virtual environment's bin (pip) and
// node_modules/.bin (npm) first and NODE_PATH at the workspace's node_modules, so run_code
// and run_command see what pip_install and npm_install put there in later calls without
// any flag. A disabled registry adds nothing.
//
// The virtual environment is /workspace/.venv: the workspace lives as long as the session
// (longer when persistent) and the sandbox user can write it; it is made lazily by
// pip_install (EnsureVenvCommand) with the template's site packages visible.
// Threading: pure functions.
#pragma once

#include <string>
#include <vector>

#include "policies/policy.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::policies {

inline constexpr char kVenvDir[] = "/workspace/.venv";
inline constexpr char kVenvPython[] = "/workspace/.venv/bin/python";
inline constexpr char kNodeModulesDir[] = "/workspace/node_modules";
// The template's interpreter, not whatever PATH finds (the venv's python is a link to it).
inline constexpr char kSystemPython[] = "/usr/bin/python3";

// "NAME=value" variables for cells under `packages` (see the header comment). PATH is
// not among them: AddPackageEnv rewrites the spec's own.
std::vector<std::string> PackageCellEnv(const policies::PackagesPolicy& packages);

// Adds PackageCellEnv to `spec.env` and puts the venv's bin and node_modules/.bin (each
// when its registry is enabled) first in its PATH.
void AddPackageEnv(const policies::PackagesPolicy& packages, sandbox::CellSpec& spec);

// One line for session_info and the tools' messages: "online: pypi (https://…/simple/), npm
// (…); wheels only; npm scripts off" or "disabled (packages.mode)".
std::string PackagesSummary(const policies::PackagesPolicy& packages);

// "disabled" / "online" / "offline".
std::string PackagesModeName(policies::PackagesMode mode);

}  // namespace mcpcell::policies
