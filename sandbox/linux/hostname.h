// The cell's host name, set by cell init in its own uts namespace (the host's is never
// touched), and the rule for names the spec may ask for.
//
// No exceptions; SetHostname is called by cell init, the others anywhere.
#pragma once

#include <string>

#include "base/status.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::sandbox {

// The spec's hostname, or "cell-<id>" cut to 63 characters.
std::string CellHostname(const CellSpec& spec);

// RFC 1123 label(s): [A-Za-z0-9-.], 1..63 characters, not starting or ending with '-' or '.'.
Status ValidateHostname(const std::string& name);

// sethostname(2) (and the NIS domain name "(none)") in the caller's uts namespace.
Status SetHostname(const std::string& name);

}  // namespace mcpcell::sandbox
