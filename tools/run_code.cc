// run_code: runs a snippet with one of the template's interpreters. The code is written
// to a file under /tmp in the cell first, so its size is not bound by argv limits and
// tracebacks name a real file.
#include <atomic>

#include "tools/cell_tools.h"
#include "tools/exec_runner.h"

namespace mcpcell::tools {
namespace {
struct Language {
  const char* name;
  const char* interpreter;
  const char* extension;
};
constexpr Language kLanguages[] = {
    {"python", "python3", ".py"},
    {"bash", "bash", ".sh"},
    {"sh", "sh", ".sh"},
    {"node", "node", ".js"},
};
}  // namespace

mcp::Tool MakeRunCodeTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "run_code";
  tool.title = "Run code in the sandbox";
  tool.description =
      "Runs a program in this session's isolated Linux sandbox with python (python3), bash, "
      "sh or node. cwd is /workspace, there is no network, and files persist for the "
      "session. Returns exit code, stdout and stderr.";
  mcp::Json names = mcp::Json::array();
  for (const auto& l : kLanguages) names.push_back(l.name);
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"language", {{"type", "string"}, {"enum", names}, {"description", "interpreter"}}},
        {"code", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4 << 20},
                  {"description", "the program's source"}}},
        {"timeout_s", TimeoutSchema(env.config)},
        {"stdin", {{"type", "string"}, {"maxLength", 16 << 20},
                   {"description", "text given to the program's standard input"}}}}},
      {"required", {"language", "code"}},
      {"additionalProperties", false}};
  tool.output_schema = ExecOutputSchema();
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", false},
                      {"destructiveHint", true}, {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& args, mcp::Context& ctx) -> mcp::ToolResult {
    static std::atomic<uint64_t> counter{0};
    const std::string language = args["language"].get<std::string>();
    const Language* lang = nullptr;
    for (const auto& l : kLanguages)
      if (language == l.name) lang = &l;
    if (!lang) return mcp::ToolResult::Error("arguments.language: unsupported: " + language);
    std::string file = "/tmp/.mcpcell/run_code_" + std::to_string(counter.fetch_add(1)) +
                       lang->extension;
    ExecCall call;
    call.tool = "run_code";
    call.argv = {lang->interpreter, file};
    call.files.emplace_back(file, args["code"].get<std::string>());
    call.stdin_data = args.value("stdin", "");
    if (args.contains("timeout_s")) call.timeout_s = args["timeout_s"].get<int64_t>();
    return RunInCell(env, ctx, call);
  };
  return tool;
}

}  // namespace mcpcell::tools
