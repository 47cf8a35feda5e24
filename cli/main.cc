// The composition root of `mcpcell`: parse the command line and hand over to the chosen
// subcommand (cli/cmd_*.cc). Nothing here knows what a subcommand does.
#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "cli/command.h"

namespace mcpcell::cli {
namespace {
// Filled before main (static initialisation of the cmd_*.cc files); std::map so --help
// lists every command in name order.
std::map<std::string, CommandSetup>& Registry() {
  static auto* registry = new std::map<std::string, CommandSetup>();
  return *registry;
}
}  // namespace

bool RegisterCommand(std::string name, CommandSetup setup) {
  Registry().emplace(std::move(name), std::move(setup));
  return true;
}
}  // namespace mcpcell::cli

int main(int argc, char** argv) {
  using namespace mcpcell::cli;
  CLI::App app{"mcpcell: an MCP server that runs every tool call in an isolated Linux cell"};
  app.set_version_flag("--version", "mcpcell 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  for (auto& [name, setup] : Registry()) setup(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
