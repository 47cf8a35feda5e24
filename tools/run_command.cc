// run_command: `/bin/sh -c COMMAND` in the session's cell.
#include "tools/cell_tools.h"
#include "tools/exec_args.h"
#include "tools/exec_runner.h"
#include "tools/process_start.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {
// One argv string must stay under the kernel's MAX_ARG_STRLEN (128 KiB) and, with the
// rest of the exec request, under the control protocol's frame cap (160 KiB).
constexpr size_t kMaxCommandBytes = 100 * 1024;

struct RunCommandArgs {
  std::string command;
  ExecOptionArgs options;  // cwd, env, stdin, timeout_s
  bool background = false;
};

Result<RunCommandArgs> ParseRunCommandArgs(const mcp::Json& json) {
  ArgReader reader(json, {"command", "cwd", "env", "stdin", "timeout_s", "background"});
  RunCommandArgs args;
  args.command = reader.String("command");
  args.options = ReadExecOptionArgs(reader, /*cwd_and_env=*/true);
  args.background = reader.OptionalBool("background").value_or(false);
  if (Status st = reader.Finish(); !st) return st.error();
  if (args.background && args.options.timeout_s)
    return Error::Msg(
        "arguments.timeout_s: a background process has no timeout (it runs until it exits, is "
        "signalled or the session ends); leave timeout_s out, and use process action=wait "
        "with its timeout_s to wait for it");
  if (args.background && !args.options.stdin_data.empty())
    return Error::Msg(
        "arguments.stdin: not with background=true; start the process, then give it input "
        "with process action=write");
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

mcp::ToolResult RunInBackground(const ToolEnv& env, mcp::Context& ctx, const ExecCall& call,
                                const std::string& command) {
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  auto started =
      StartBackgroundProcess(env, ctx, *acquired.lease, *acquired.config, "command", call, command);
  if (auto* error = std::get_if<mcp::ToolResult>(&started)) return std::move(*error);
  const BackgroundProcess& p = *std::get<std::shared_ptr<BackgroundProcess>>(started);
  mcp::ToolResult result = mcp::ToolResult::Text(
      "started in the background as process " + p.id + " (pid " + std::to_string(p.exec->pid()) +
      " in the cell); its stdout and stderr go to " + p.output_path +
      ".\nNext: process action=output id=" + p.id +
      " reads new output, action=write sends "
      "stdin, action=signal stops it, action=wait waits for its exit.");
  result.structured_content = {{"background", true},
                               {"process_id", p.id},
                               {"pid", p.exec->pid()},
                               {"command", p.command},
                               {"output_path", p.output_path}};
  return result;
}

mcp::ToolResult RunCommand(const ToolEnv& env, mcp::Context& ctx, RunCommandArgs args) {
  ExecCall call;
  call.tool = "run_command";
  call.argv = {"/bin/sh", "-c", std::move(args.command)};
  call.options = std::move(args.options);
  if (args.background) return RunInBackground(env, ctx, call, call.argv[2]);
  return RunInCell(env, ctx, call);
}

// ExecOutputSchema plus the fields of a background start, which has none of a finished
// run's (so nothing is required: the two results share one schema).
mcp::Json RunCommandOutputSchema() {
  mcp::Json schema = ExecOutputSchema();
  auto& props = schema["properties"];
  props["background"] = {{"type", "boolean"},
                         {"description", "true: started in the background (process tool)"}};
  props["process_id"] = {{"type", "string"},
                         {"description", "the background process's id for the process tool"}};
  props["pid"] = {{"type", "integer"}, {"description", "its pid inside the cell"}};
  props["command"] = {{"type", "string"}, {"description", "the command started"}};
  props["output_path"] = {{"type", "string"},
                          {"description", "the cell file its stdout and stderr go to"}};
  schema["required"] = mcp::Json::array();
  return schema;
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
            {"background",
             {{"type", "boolean"},
              {"description",
               "true: start it in the background and return its process id at once (a "
               "server, a long job); read, write, signal and wait for it with the process "
               "tool. No timeout_s or stdin then."}}},
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
      "A non-zero exit code is a normal result. background=true starts it in the background "
      "and returns a process id for the process tool.";
  tool.input_schema = RunCommandInputSchema(env);
  tool.output_schema = RunCommandOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto args = ParseRunCommandArgs(json);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return RunCommand(env, ctx, std::move(args).value());
  };
  // A 2026-07-28 client that declared the Tasks extension gets a task when the program
  // outlives the server's task threshold: it keeps running if the client goes away,
  // tasks/get brings its progress and result, tasks/cancel kills its process group.
  tool.task_support = mcp::TaskSupport::kOptional;
  return tool;
}

}  // namespace mcpcell::tools
