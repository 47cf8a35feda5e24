// The commands the static `mcpcell` front does not link (command.h). They run in
// mcpcell-server, which the front execs: `serve` needs cpp-httplib and OpenSSL, whose
// shared libraries cost every process that loads them ~5 ms before main; `policy` needs
// toml++ and reads the passwd database (home directories are refused as mounts) through
// NSS, which a statically linked program cannot load reliably.
#include "tools/command.h"

namespace mcpcell::tools {
namespace {

constexpr const char* kServer = "mcpcell-server";

const bool kServe = RegisterDelegatedCommand("serve", kServeSummary, kServer);
const bool kPolicy = RegisterDelegatedCommand("policy", kPolicySummary, kServer);

}  // namespace
}  // namespace mcpcell::tools
