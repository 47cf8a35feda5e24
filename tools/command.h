// Subcommands of the `mcpcell` executables (serve, run, doctor, policy, ...). Each lives in
// its own tools/cmd_<name>.cc and registers itself at static-initialisation time, so main.cc
// stays a short list of steps and adding a command touches no other file but the build.
//
// Two executables share main.cc (tools/CMakeLists.txt says which commands each has):
//  - `mcpcell`, the front users type: the commands that need no HTTP stack (run, doctor),
//    linked statically so `mcpcell run` starts like /bin/true does;
//  - `mcpcell-server`, installed next to it: every command, with cpp-httplib, OpenSSL and
//    toml++. The front registers the commands only the server has as *delegated*: it lists
//    them in --help and, when one is invoked, execs mcpcell-server with argv unchanged
//    (same pid, same stdio), so `mcpcell serve ...` works as it always did.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace mcpcell::tools {

// Adds the subcommand to `parent` (app.add_subcommand(...)) and arranges, via the
// subcommand's callback, for *exit_code to receive the command's process exit status.
using CommandSetup = std::function<void(CLI::App& parent, int* exit_code)>;

// Called from a namespace-scope static in each cmd_*.cc. Returns true so it can
// initialise a static bool.
bool RegisterCommand(std::string name, CommandSetup setup);

// Called from the front (tools/delegated_commands.cc): `name` runs in `executable`, found
// in the directory of /proc/self/exe. Listed in --help with `summary`.
bool RegisterDelegatedCommand(std::string name, std::string summary, std::string executable);

// The one-line summaries of the commands the front delegates, shared by both executables
// so `mcpcell --help` reads the same whichever of them answers it.
inline constexpr const char* kServeSummary =
    "Serve MCP over stdio or Streamable HTTP (--http); every client session gets its own "
    "sandboxed cell";
inline constexpr const char* kPolicySummary = "Check and show sandbox policies (profiles)";

}  // namespace mcpcell::tools
