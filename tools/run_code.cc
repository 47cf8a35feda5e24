// run_code: runs a snippet with one of the template's interpreters. Small code is passed
// on the command line (`python3 -c`, `node -e`); larger code is written to a file under
// /tmp/.mcpcell in the cell first, so its size is not bound by argv or frame limits.
#include <atomic>

#include "tools/cell_tools.h"
#include "tools/exec_args.h"
#include "tools/exec_runner.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {
struct Language {
  const char* name;
  const char* interpreter;
  const char* extension;
  const char* inline_flag;  // runs the program given as the next argument
};
constexpr Language kLanguages[] = {
    {"python", "python3", ".py", "-c"},
    {"bash", "bash", ".sh", "-c"},
    {"sh", "sh", ".sh", "-c"},
    {"node", "node", ".js", "-e"},
};
// Below this the code travels in argv (well under the control protocol's frame cap and
// the kernel's per-argument limit); above it, in a file.
constexpr size_t kInlineCodeBytes = 32 * 1024;

struct RunCodeArgs {
  const Language* language = nullptr;
  std::string code;
  ExecOptionArgs options;  // stdin, timeout_s
};

Result<RunCodeArgs> ParseRunCodeArgs(const mcp::Json& json) {
  ArgReader reader(json, {"code", "language", "stdin", "timeout_s"});
  RunCodeArgs args;
  const std::string language = reader.String("language");
  args.code = reader.String("code");
  args.options = ReadExecOptionArgs(reader, /*cwd_and_env=*/false);
  if (Status st = reader.Finish(); !st) return st.error();
  for (const auto& l : kLanguages)
    if (language == l.name) args.language = &l;
  if (!args.language) return Error::Msg("arguments.language: unsupported: " + language);
  // Python stops reading source at a NUL and bash refuses the file as binary: refused
  // here, with the reason, rather than run cut short.
  if (auto e = NulByteError("code", args.code,
                            "source code cannot hold one (write binary data with write_file "
                            "encoding=base64 and read it from the program)");
      !e.empty())
    return Error::Msg(e);
  if (Status st = CheckExecOptionArgs(args.options); !st) return st.error();
  return args;
}

mcp::ToolResult RunCode(const ToolEnv& env, mcp::Context& ctx, RunCodeArgs args) {
  static std::atomic<uint64_t> counter{0};
  const Language& lang = *args.language;
  ExecCall call;
  call.tool = "run_code";
  if (args.code.size() <= kInlineCodeBytes) {
    // Small programs go on the command line: no file write, one round trip less.
    call.argv = {lang.interpreter, lang.inline_flag, std::move(args.code)};
  } else {
    std::string file =
        "/tmp/.mcpcell/run_code_" + std::to_string(counter.fetch_add(1)) + lang.extension;
    call.argv = {lang.interpreter, file};
    call.files.emplace_back(file, std::move(args.code));
  }
  call.options = std::move(args.options);
  return RunInCell(env, ctx, call);
}

mcp::Json RunCodeInputSchema(const ToolEnv& env) {
  mcp::Json names = mcp::Json::array();
  for (const auto& l : kLanguages) names.push_back(l.name);
  return {{"type", "object"},
          {"properties",
           {{"language", {{"type", "string"}, {"enum", names}, {"description", "interpreter"}}},
            {"code",
             {{"type", "string"},
              {"minLength", 1},
              {"maxLength", 4 << 20},
              {"description", "the program's source"}}},
            {"timeout_s", TimeoutSchema(env)},
            {"stdin",
             {{"type", "string"},
              {"maxLength", 16 << 20},
              {"description", "text given to the program's standard input"}}}}},
          {"required", {"language", "code"}},
          {"additionalProperties", false}};
}

}  // namespace

mcp::Tool MakeRunCodeTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "run_code";
  tool.title = "Run code in the sandbox";
  tool.description =
      "Runs a program in this session's isolated Linux sandbox with python (python3), bash, "
      "sh or node. cwd is /workspace, files persist for the session, and HTTP(S) reaches only "
      "the hosts the policy allows, through a proxy (session_info shows them). Returns exit "
      "code, stdout and stderr, and any request the proxy refused with its reason.";
  tool.input_schema = RunCodeInputSchema(env);
  tool.output_schema = ExecOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto args = ParseRunCodeArgs(json);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return RunCode(env, ctx, std::move(args).value());
  };
  // A 2026-07-28 client that declared the Tasks extension gets a task when the program
  // outlives the server's task threshold: it keeps running if the client goes away,
  // tasks/get brings its progress and result, tasks/cancel kills its process group.
  tool.task_support = mcp::TaskSupport::kOptional;
  return tool;
}

}  // namespace mcpcell::tools
