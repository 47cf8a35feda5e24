// The composition root of the `mcpcell` executables: parse the command line and hand over to
// the chosen subcommand (tools/cmd_*.cc), or, for a command this executable delegates
// (command.h), exec the sibling executable that has it. Nothing here knows what a
// subcommand does.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "sandbox/linux/self_exe.h"
#include "tools/command.h"

namespace mcpcell::tools {
namespace {
// Both maps are filled before main (static initialisation of the cmd_*.cc files); std::map
// so --help lists every command in name order, delegated or not.
std::map<std::string, CommandSetup>& Registry() {
  static auto* registry = new std::map<std::string, CommandSetup>();
  return *registry;
}
std::map<std::string, std::string>& DelegatedExecutables() {
  static auto* executables = new std::map<std::string, std::string>();
  return *executables;
}

// The subcommand named on the command line: the first argument that is not an option (the
// top level has only --help and --version, which take no value).
const char* CommandName(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return argv[i];
  }
  return nullptr;
}

// Replaces this process with `executable` from the directory of /proc/self/exe, argv and
// environment unchanged (same pid, same stdio). Returns only on failure, with the status.
int ExecSibling(const char* command, const std::string& executable, char** argv) {
  sandbox::Result<std::string> path = sandbox::SiblingExecutable(executable);
  if (!path) {
    std::fprintf(stderr, "mcpcell %s: %s\n", command, path.error().message.c_str());
    return 127;
  }
  ::execv(path->c_str(), argv);
  std::fprintf(stderr,
               "mcpcell %s: this command runs in %s, installed next to mcpcell: "
               "execv(\"%s\"): %s\n",
               command, executable.c_str(), path->c_str(), std::strerror(errno));
  return 127;
}
}  // namespace

bool RegisterCommand(std::string name, CommandSetup setup) {
  Registry().emplace(std::move(name), std::move(setup));
  return true;
}

bool RegisterDelegatedCommand(std::string name, std::string summary, std::string executable) {
  DelegatedExecutables().emplace(name, std::move(executable));
  // Only listed: main execs the sibling before parsing whenever the command is named.
  Registry().emplace(name, [name, summary](CLI::App& parent, int*) {
    parent.add_subcommand(name, summary)->allow_extras();
  });
  return true;
}
}  // namespace mcpcell::tools

int main(int argc, char** argv) {
  using namespace mcpcell::tools;
  if (const char* command = CommandName(argc, argv)) {
    auto it = DelegatedExecutables().find(command);
    if (it != DelegatedExecutables().end()) return ExecSibling(command, it->second, argv);
  }
  CLI::App app{"mcpcell: an MCP server that runs every tool call in an isolated Linux cell"};
  app.set_version_flag("--version", "mcpcell 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  for (auto& [name, setup] : Registry()) setup(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
