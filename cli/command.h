// Subcommands of `mcpcell` (serve, run, pool, doctor, policy). Each lives in its own
// cli/cmd_<name>.cc and registers itself at static-initialisation time, so main.cc stays
// a short list of steps and adding a command touches no other file.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace mcpcell::cli {

// Adds the subcommand to `parent` (app.add_subcommand(...)) and arranges, via the
// subcommand's callback, for *exit_code to receive the command's process exit status.
using CommandSetup = std::function<void(CLI::App& parent, int* exit_code)>;

// Called from a namespace-scope static in each cmd_*.cc. Returns true so it can
// initialise a static bool.
bool RegisterCommand(std::string name, CommandSetup setup);

// The one-line summaries of the commands whose files share them.
inline constexpr const char* kServeSummary =
    "Serve MCP over stdio or Streamable HTTP (--http); every client session gets its own "
    "sandboxed cell";
inline constexpr const char* kPolicySummary = "Check and show sandbox policies (profiles)";

}  // namespace mcpcell::cli
