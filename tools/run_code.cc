// run_code: runs a snippet with one of the template's interpreters. Small code is passed
// on the command line (`python3 -c`, `node -e`); larger code is written to a file under
// /tmp/.mcpcell in the cell first, so its size is not bound by argv or frame limits.
#include <atomic>

#include "tools/cell_tools.h"
#include "tools/exec_runner.h"

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
  mcp::Json names = mcp::Json::array();
  for (const auto& l : kLanguages) names.push_back(l.name);
  tool.input_schema = {
      {"type", "object"},
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
  tool.output_schema = ExecOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& args, mcp::Context& ctx) -> mcp::ToolResult {
    static std::atomic<uint64_t> counter{0};
    const std::string language = args["language"].get<std::string>();
    const Language* lang = nullptr;
    for (const auto& l : kLanguages)
      if (language == l.name) lang = &l;
    if (!lang) return mcp::ToolResult::Error("arguments.language: unsupported: " + language);
    const std::string& code = args["code"].get_ref<const std::string&>();
    // Python stops reading source at a NUL and bash refuses the file as binary: refused
    // here, with the reason, rather than run cut short.
    if (auto e = NulByteError("code", code,
                              "source code cannot hold one (write binary data with write_file "
                              "encoding=base64 and read it from the program)");
        !e.empty())
      return mcp::ToolResult::Error(e);
    ExecCall call;
    call.tool = "run_code";
    if (code.size() <= kInlineCodeBytes) {
      // Small programs go on the command line: no file write, one round trip less.
      call.argv = {lang->interpreter, lang->inline_flag, code};
    } else {
      std::string file =
          "/tmp/.mcpcell/run_code_" + std::to_string(counter.fetch_add(1)) + lang->extension;
      call.argv = {lang->interpreter, file};
      call.files.emplace_back(file, code);
    }
    call.stdin_data = args.value("stdin", "");
    if (args.contains("timeout_s")) call.timeout_s = args["timeout_s"].get<int64_t>();
    return RunInCell(env, ctx, call);
  };
  return tool;
}

}  // namespace mcpcell::tools
