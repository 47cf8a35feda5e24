// mcpcell-conformance-server: an MCP server built on mcp/ alone that serves the fixtures of
// the official MCP conformance suite. main reads as the list of steps: parse flags, build
// the server, register the fixtures, serve on the chosen transport.
//
// Flags are parsed by hand so the program links nothing but mcpcell_mcp and mcpcell_base
// (base/stop_signals.h, the stop signals). A transport is a flag (--stdio, --http PORT);
// adding one means a TransportKind, its flag and a case in Serve().
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/stop_signals.h"
#include "examples/conformance_server/fixtures.h"
#include "mcp/http_server.h"
#include "mcp/log.h"
#include "mcp/server.h"
#include "mcp/stdio_transport.h"

namespace conformance {
namespace {

constexpr const char* kVersion = "0.1.0";
constexpr const char* kUsage =
    "usage: mcpcell-conformance-server [--stdio | --http [ADDR:]PORT] [--max-message-bytes N]\n"
    "                                  [--log-level LEVEL] [--log-file PATH]\n"
    "\n"
    "Serves the MCP conformance suite's fixtures (tools, resources, prompts, completion).\n"
    "  --stdio                 newline-delimited JSON-RPC on stdin/stdout (default)\n"
    "  --http [ADDR:]PORT      Streamable HTTP at http://ADDR:PORT/mcp (ADDR 127.0.0.1;\n"
    "                          PORT 0 = any free port; the URL is printed on stderr)\n"
    "  --max-message-bytes N   largest accepted message; longer lines get -32700\n"
    "                          (default 16777216)\n"
    "  --log-level LEVEL       server diagnostics on stderr: debug, info, notice, warning\n"
    "                          (default), error, ..., off\n"
    "  --log-file PATH         write diagnostics to PATH instead of stderr\n"
    "  --version, --help\n";

enum class TransportKind { kStdio, kHttp };

struct Flags {
  TransportKind transport = TransportKind::kStdio;
  std::string http_host = "127.0.0.1";
  int http_port = 0;
  size_t max_message_bytes = 16 * 1024 * 1024;
  mcp::LogLevel log_level = mcp::LogLevel::kWarning;
  std::string log_file;
  bool help = false;
  bool version = false;
};

// Parses argv into Flags, or returns the error text in `error`.
std::optional<Flags> ParseFlags(const std::vector<std::string_view>& args, std::string& error) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return std::string(args[++i]);
    };
    if (arg == "--stdio") {
      flags.transport = TransportKind::kStdio;
    } else if (arg == "--http") {
      std::optional<std::string> text = value();
      std::string port = text ? *text : "";
      if (size_t colon = port.rfind(':'); colon != std::string::npos) {
        flags.http_host = port.substr(0, colon);
        port = port.substr(colon + 1);
      }
      char* end = nullptr;
      long n = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
      if (n < 0 || n > 65535 || *end != '\0') {
        error = "--http needs [ADDR:]PORT with PORT in 0..65535";
        return std::nullopt;
      }
      flags.transport = TransportKind::kHttp;
      flags.http_port = static_cast<int>(n);
    } else if (arg == "--max-message-bytes") {
      std::optional<std::string> text = value();
      char* end = nullptr;
      unsigned long long bytes = text ? std::strtoull(text->c_str(), &end, 10) : 0;
      if (!text || text->empty() || *end != '\0' || bytes == 0) {
        error = "--max-message-bytes needs a positive integer";
        return std::nullopt;
      }
      flags.max_message_bytes = static_cast<size_t>(bytes);
    } else if (arg == "--log-level") {
      std::optional<std::string> text = value();
      std::optional<mcp::LogLevel> level =
          text ? mcp::ParseLogLevel(*text, /*allow_off=*/true) : std::nullopt;
      if (!level) {
        error =
            "--log-level needs one of debug, info, notice, warning, error, critical, "
            "alert, emergency, off";
        return std::nullopt;
      }
      flags.log_level = *level;
    } else if (arg == "--log-file") {
      std::optional<std::string> text = value();
      if (!text) {
        error = "--log-file needs a path";
        return std::nullopt;
      }
      flags.log_file = *text;
    } else if (arg == "--help" || arg == "-h") {
      flags.help = true;
    } else if (arg == "--version") {
      flags.version = true;
    } else {
      error = "unknown argument: " + std::string(arg);
      return std::nullopt;
    }
  }
  return flags;
}

mcp::ServerOptions MakeServerOptions(const Flags& flags) {
  mcp::ServerOptions options;
  options.name = "mcpcell-conformance-server";
  options.title = "mcpcell conformance fixtures";
  options.version = kVersion;
  options.instructions = "Fixtures for the MCP conformance suite; built on mcpcell's mcp/ library.";
  options.max_message_bytes = flags.max_message_bytes;
  options.advertise_tools = true;
  options.advertise_resources = true;
  options.advertise_prompts = true;
  options.validate_tool_output = true;
  // The Tasks scenarios' slow_compute runs 1 s and must become a task.
  options.task_threshold = std::chrono::milliseconds(200);
  return options;
}

int Serve(mcp::Server& server, const Flags& flags) {
  // The stop signals are the application's, not the library's (docs/mcp-library.md).
  auto stop_signals = mcpcell::StopSignals::Install();
  if (!stop_signals) {
    std::fprintf(stderr, "mcpcell-conformance-server: %s\n", stop_signals.error().message.c_str());
    return 2;
  }
  const int stop_fd = (*stop_signals)->fd();
  switch (flags.transport) {
    case TransportKind::kStdio: {
      mcp::StdioOptions options;
      options.max_message_bytes = flags.max_message_bytes;
      options.stop_fd = stop_fd;
      return mcp::ServeStdio(server, options);
    }
    case TransportKind::kHttp: {
      mcp::HttpOptions options;
      options.host = flags.http_host;
      options.port = flags.http_port;
      options.default_tenant.max_body_bytes = flags.max_message_bytes;
      return mcp::ServeHttp(server, options, stop_fd, [](const mcp::HttpServer& http) {
        std::fprintf(stderr, "mcpcell-conformance-server: listening on %s\n", http.url().c_str());
        std::fflush(stderr);
      });
    }
  }
  return 2;
}

int Run(const std::vector<std::string_view>& args) {
  std::string error;
  std::optional<Flags> flags = ParseFlags(args, error);
  if (!flags) {
    std::fprintf(stderr, "mcpcell-conformance-server: %s\n\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (flags->help) {
    std::fputs(kUsage, stderr);  // stdout belongs to the protocol, even for --help
    return 0;
  }
  if (flags->version) {
    std::fprintf(stderr, "mcpcell-conformance-server %s\n", kVersion);
    return 0;
  }
  mcp::log::SetLevel(flags->log_level);
  if (std::string err = mcp::log::SetFile(flags->log_file); !err.empty()) {
    std::fprintf(stderr, "mcpcell-conformance-server: %s\n", err.c_str());
    return 2;
  }

  FixtureState state;  // outlives the server, whose handlers use it until ~Server joins them
  mcp::Server server(MakeServerOptions(*flags));
  AddFixtureTools(server, state);
  AddFixtureResources(server, state);
  AddFixturePrompts(server);
  AddEra2026Tools(server);
  AddInputRequiredFixtures(server);
  AddTaskFixtures(server);
  return Serve(server, *flags);
}

}  // namespace
}  // namespace conformance

int main(int argc, char** argv) {
  try {
    return conformance::Run(std::vector<std::string_view>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcpcell-conformance-server: %s\n", e.what());
    return 1;
  }
}
