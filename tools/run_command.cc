// run_command: `/bin/sh -c COMMAND` in the session's cell.
#include "tools/cell_tools.h"
#include "tools/exec_runner.h"

namespace mcpcell::tools {
namespace {
// One argv string must stay under the kernel's MAX_ARG_STRLEN (128 KiB) and, with the
// rest of the exec request, under the control protocol's frame cap (160 KiB).
constexpr size_t kMaxCommandBytes = 100 * 1024;
constexpr size_t kMaxEnvBytes = 32 * 1024;
}  // namespace

mcp::Tool MakeRunCommandTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "run_command";
  tool.title = "Run a shell command in the sandbox";
  tool.description =
      "Runs `/bin/sh -c <command>` in this session's isolated Linux sandbox (cwd /workspace, "
      "files persist for the session, HTTP(S) only to the policy's allowed hosts through a "
      "proxy). Returns exit code, stdout and stderr, and requests the proxy refused; "
      "long output keeps head and tail and the full text is saved under /workspace/.mcpcell/. "
      "A non-zero exit code is a normal result.";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"command",
                          {{"type", "string"},
                           {"minLength", 1},
                           {"maxLength", 128 * 1024},
                           {"description", "shell command line, run by /bin/sh -c"}}},
                         {"cwd",
                          {{"type", "string"},
                           {"maxLength", 4096},
                           {"description", "working directory (default /workspace)"}}},
                         {"env",
                          {{"type", "object"},
                           {"additionalProperties", {{"type", "string"}}},
                           {"description", "extra environment variables, NAME: value"}}},
                         {"timeout_s", TimeoutSchema(env)},
                         {"stdin",
                          {{"type", "string"},
                           {"maxLength", 16 << 20},
                           {"description", "text given to the command's standard input"}}}}},
                       {"required", {"command"}},
                       {"additionalProperties", false}};
  tool.output_schema = ExecOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& args, mcp::Context& ctx) -> mcp::ToolResult {
    ExecCall call;
    call.tool = "run_command";
    const std::string& command = args["command"].get_ref<const std::string&>();
    if (command.size() > kMaxCommandBytes)
      return mcp::ToolResult::Error(
          "arguments.command: " + std::to_string(command.size()) + " bytes is longer than " +
          std::to_string(kMaxCommandBytes) +
          " bytes; put the script in a file with write_file and run that, or use run_code");
    if (auto e = NulByteError("command", command,
                              "a shell command cannot hold one (pass binary data in stdin, or "
                              "in a file written with write_file encoding=base64)");
        !e.empty())
      return mcp::ToolResult::Error(e);
    call.argv = {"/bin/sh", "-c", command};
    call.cwd = args.value("cwd", "");
    if (auto e = NulByteError("cwd", call.cwd, "a path cannot hold one"); !e.empty())
      return mcp::ToolResult::Error(e);
    if (!call.cwd.empty() && call.cwd[0] != '/') call.cwd = "/workspace/" + call.cwd;
    call.stdin_data = args.value("stdin", "");
    if (args.contains("timeout_s")) call.timeout_s = args["timeout_s"].get<int64_t>();
    if (args.contains("env")) {
      for (const auto& [k, v] : args["env"].items()) {
        if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
          return mcp::ToolResult::Error("arguments.env: invalid variable name \"" + k + "\"");
        const std::string& value = v.get_ref<const std::string&>();
        if (auto e = NulByteError("env." + k, value, "an environment variable cannot hold one");
            !e.empty())
          return mcp::ToolResult::Error(e);
        call.env.push_back(k + "=" + value);
      }
      size_t env_bytes = 0;
      for (const auto& e : call.env) env_bytes += e.size() + 1;
      if (env_bytes > kMaxEnvBytes)
        return mcp::ToolResult::Error("arguments.env: " + std::to_string(env_bytes) +
                                      " bytes in all, more than " + std::to_string(kMaxEnvBytes));
    }
    return RunInCell(env, ctx, call);
  };
  return tool;
}

}  // namespace mcpcell::tools
