// write_file: creates or replaces (or appends to) a file in the cell, making its parent
// directories. The write runs as the sandbox user through cell init, so the cell's disk
// limit and permissions apply exactly as they do to the sandboxed code.
#include <cerrno>

#include "base/base64.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"
#include "tools/tool_args.h"
#include "tools/audit_events.h"

namespace mcpcell::tools {

std::string ParentDir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string WriteHint(const Error& e) {
  if (e.err == ENOSPC || e.err == EDQUOT || e.err == EFBIG)
    return "The cell's disk limit is reached: delete files you no longer need "
           "(run_command `du -sh /workspace/* /tmp/*`), or write less.";
  if (e.err == EACCES || e.err == EPERM || e.err == EROFS)
    return "That location is not writable in the sandbox; write under /workspace or /tmp.";
  return "";
}

namespace {

struct WriteFileArgs {
  std::string path;
  std::string content;  // decoded when the encoding was base64
  bool append = false;
};

Result<WriteFileArgs> ParseWriteFileArgs(const mcp::Json& json) {
  ArgReader reader(json, {"append", "content", "encoding", "path"});
  WriteFileArgs args;
  args.path = reader.String("path");
  args.content = reader.String("content");
  const bool base64 = reader.OptionalString("encoding").value_or("text") == "base64";
  args.append = reader.OptionalBool("append").value_or(false);
  if (Status st = reader.Finish(); !st) return st.error();
  if (base64) {
    auto decoded = Base64Decode(args.content);
    if (!decoded) return decoded.error().Wrap("arguments.content");
    args.content = std::move(decoded).value();
  }
  return args;
}

mcp::ToolResult WriteFile(const ToolEnv& env, mcp::Context& ctx, const WriteFileArgs& args,
                          std::string& note) {
  const std::string& path = args.path;
  const std::string& content = args.content;
  const bool append = args.append;
  if (content.size() > env.config.max_write_bytes)
    return mcp::ToolResult::Error("arguments.content: " + std::to_string(content.size()) +
                                  " bytes is more than one write_file call takes (" +
                                  std::to_string(env.config.max_write_bytes) +
                                  "); write it in parts with append=true");
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  auto& channel = *acquired.lease;
  if (std::string parent = ParentDir(path); !parent.empty()) {
    Status st = channel.Mkdir(parent, 0755, /*parents=*/true);
    if (!st) return PathError("write_file " + path, st.error(), WriteHint(st.error()));
  }
  // Appends are O_APPEND in the cell, so two calls appending at once both land.
  Status st = append ? channel.AppendFile(path, content)
                     : channel.WriteFileAt(path, 0, content, /*truncate=*/true);
  if (!st) return PathError("write_file " + path, st.error(), WriteHint(st.error()));
  uint64_t size = content.size();
  if (append) {
    auto now = channel.Stat(path, /*follow_symlinks=*/true);
    if (now) size = now->size;
  }
  mcp::ToolResult r =
      mcp::ToolResult::Text((append ? "appended " : "wrote ") + std::to_string(content.size()) +
                            " bytes to " + path + " (now " + std::to_string(size) + " bytes)");
  r.structured_content = {{"path", path},
                          {"bytes_written", content.size()},
                          {"size_bytes", size},
                          {"appended", append}};
  return r;
}

}  // namespace

mcp::Tool MakeWriteFileTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "write_file";
  tool.title = "Write a file in the sandbox";
  tool.description =
      "Creates or overwrites a file in this session's sandbox (or appends with append=true), "
      "creating parent directories. Paths are relative to /workspace unless absolute. "
      "encoding \"base64\" writes binary data.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
        {"content", {{"type", "string"}, {"description", "the file's content"}}},
        {"encoding", {{"type", "string"}, {"enum", {"text", "base64"}}}},
        {"append", {{"type", "boolean"}, {"description", "append instead of replacing"}}}}},
      {"required", {"path", "content"}},
      {"additionalProperties", false}};
  tool.output_schema = {{"type", "object"},
                        {"properties",
                         {{"path", {{"type", "string"}}},
                          {"bytes_written", {{"type", "integer"}}},
                          {"size_bytes", {{"type", "integer"}}},
                          {"appended", {{"type", "boolean"}}}}},
                        {"required", {"path", "bytes_written", "size_bytes", "appended"}}};
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"idempotentHint", false},
                      {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseWriteFileArgs(json);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        mcp::ToolResult result = WriteFile(env, ctx, *args, note);
        AuditFileCall(env, ctx, "write", args->path, result, "bytes_written");
        return result;
      });
  return tool;
}

}  // namespace mcpcell::tools
