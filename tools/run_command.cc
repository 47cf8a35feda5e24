// run_command: `/bin/sh -c COMMAND` in the session's cell.
#include "tools/cell_tools.h"
#include "tools/exec_args.h"
#include "tools/exec_runner.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {
// One argv string must stay under the kernel's MAX_ARG_STRLEN (128 KiB) and, with the
// rest of the exec request, under the control protocol's frame cap (160 KiB).
constexpr size_t kMaxCommandBytes = 100 * 1024;

struct RunCommandArgs {
  std::string command;
  ExecOptionArgs options;  // cwd, env, stdin, timeout_s
};

Result<RunCommandArgs> ParseRunCommandArgs(const mcp::Json& json) {
  ArgReader reader(json, {"command", "cwd", "env", "stdin", "timeout_s"});
  RunCommandArgs args;
  args.command = reader.String("command");
  args.options = ReadExecOptionArgs(reader, /*cwd_and_env=*/true);
  if (Status st = reader.Finish(); !st) return st.error();
  if (args.command.size() > kMaxCommandBytes)
    return Error::Msg(
        "arguments.command: " + std::to_string(args.command.size()) + " bytes is longer than " +
        std::to_string(kMaxCommandBytes) +
        " bytes; put the script in a file with write_file and run that, or use run_code");
  if (auto e = NulByteError("command", args.command,
                            "a shell command cannot hold one (pass binary data in stdin, or "
                            "in a file written with write_file encoding=base64)");
      !e.empty())
    return Error::Msg(e);
  if (Status st = CheckExecOptionArgs(args.options); !st) return st.error();
  return args;
}

mcp::ToolResult RunCommand(const ToolEnv& env, mcp::Context& ctx, RunCommandArgs args) {
  ExecCall call;
  call.tool = "run_command";
  call.argv = {"/bin/sh", "-c", std::move(args.command)};
  call.options = std::move(args.options);
  return RunInCell(env, ctx, call);
}

mcp::Json RunCommandInputSchema(const ToolEnv& env) {
  return {{"type", "object"},
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
}

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
  tool.input_schema = RunCommandInputSchema(env);
  tool.output_schema = ExecOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto args = ParseRunCommandArgs(json);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return RunCommand(env, ctx, std::move(args).value());
  };
  return tool;
}

}  // namespace mcpcell::tools
