// The executables installed together (mcpcell, mcpcell-init) find one another as siblings
// of the running executable, never through PATH: the server exec'ing cell init for every
// cell.
//
// No exceptions; usable by cell init and the server.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell::sandbox {

// The path of `name` in the directory of `self_exe`, the target of /proc/self/exe. Refuses
// a target that is not absolute and one the kernel marks " (deleted)": the running binary
// was removed or replaced since it started (an upgrade in place), so its siblings may be of
// another version and must not be mixed with it. Pure; SiblingExecutable reads the link.
Result<std::string> SiblingOf(std::string_view self_exe, std::string_view name);

// SiblingOf(readlink("/proc/self/exe"), name); an error also when the link cannot be read
// or does not fit in PATH_MAX. Does not check that the sibling exists: exec reports that.
Result<std::string> SiblingExecutable(std::string_view name);

}  // namespace mcpcell::sandbox
