// `mcpcell serve`: the MCP server over stdio. Builds the mcp::Server ("mcpcell"), lets the
// sandbox tools register themselves (tools/serve_tools.h), and serves until the client
// closes stdin or SIGTERM/SIGINT arrives. stdout carries MCP messages only; the one line
// of guidance and every log line go to stderr (or --log-file).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>

#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/stdio_transport.h"
#include "tools/command.h"
#include "tools/serve_tools.h"

namespace mcpcell::tools {

// Until the tools issue defines it (tools/serve_tools.cc), the server has no tools.
__attribute__((weak)) void RegisterCellTools(mcp::Server&) {}

namespace {

constexpr const char* kInstructions =
    "mcpcell runs code and commands for you inside an isolated Linux sandbox (a cell): its own "
    "namespaces, filesystem, resource limits and no network unless the policy allows it. One "
    "cell belongs to this session and keeps its files between calls. Use the tools to run "
    "code or shell commands and to read or write files in the cell's workspace; nothing you "
    "do there touches the host.";

struct ServeOptions {
  std::string log_level = "warning";
  std::string log_file;
  size_t max_message_bytes = 16 * 1024 * 1024;
};

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("mcpcell");
}

int RunServe(const ServeOptions& opts) {
  if (std::string err = mcp::log::SetFile(opts.log_file); !err.empty()) {
    std::fprintf(stderr, "mcpcell: %s\n", err.c_str());
    return 2;
  }
  mcp::log::SetLevel(*mcp::ParseLogLevel(opts.log_level, /*allow_off=*/true));

  mcp::ServerOptions server_options;
  server_options.name = "mcpcell";
  server_options.title = "mcpcell sandbox";
  server_options.version = "0.1.0";
  server_options.instructions = kInstructions;
  server_options.max_message_bytes = opts.max_message_bytes;
  server_options.advertise_tools = true;  // tools come from RegisterCellTools
  mcp::Server server(server_options);
  RegisterCellTools(server);

  std::string self = SelfPath();
  std::fprintf(stderr,
               "mcpcell: serving MCP over stdio; connect a client by launching `%s serve` as a "
               "stdio server (e.g. `claude mcp add mcpcell -- %s serve`)\n",
               self.c_str(), self.c_str());
  std::fflush(stderr);
  mcp::StdioOptions stdio;
  stdio.max_message_bytes = opts.max_message_bytes;
  return mcp::ServeStdio(server, stdio);
}

const bool kRegistered = RegisterCommand("serve", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "serve", "Serve MCP over stdio (newline-delimited JSON-RPC on stdin/stdout)");
  cmd->add_option("--log-level", opts->log_level,
                  "Diagnostics on stderr: debug, info, notice, warning, error, critical, "
                  "alert, emergency or off")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "alert",
                             "emergency", "off"}))
      ->capture_default_str();
  cmd->add_option("--log-file", opts->log_file, "Append diagnostics to this file, not stderr");
  cmd->add_option("--max-message-bytes", opts->max_message_bytes,
                  "Largest accepted incoming message; longer lines are refused")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 31))
      ->capture_default_str();
  cmd->callback([opts, exit_code] { *exit_code = RunServe(*opts); });
});

}  // namespace
}  // namespace mcpcell::tools
