// Where a cell finds the package service: the host name the egress proxy routes to it, and
// the index URLs pip and npm are pointed at (policies/package_env.h sets them in a cell's
// environment, the service writes them into the pages it serves). Plain constants, so
// policies/ can use them without depending on the service itself.
#pragma once

namespace mcpcell::packages {

inline constexpr char kServiceHost[] = "packages.mcpcell.internal";
inline constexpr char kPypiIndexUrl[] = "http://packages.mcpcell.internal/pypi/simple/";
inline constexpr char kNpmRegistryUrl[] = "http://packages.mcpcell.internal/npm/";

}  // namespace mcpcell::packages
