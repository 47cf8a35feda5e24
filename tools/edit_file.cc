// edit_file: exact-text replacement in a file of the cell. Refuses when old_text is
// missing, or ambiguous without replace_all, and says how many matches there were, so the
// model can widen its old_text.
#include <unistd.h>

#include <atomic>

#include "base/utf8.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"
#include "tools/tool_args.h"
#include "tools/audit_events.h"

namespace mcpcell::tools {

namespace {

// The edited text replaces the file atomically: written to a new file beside it, then
// renamed over it, so a reader (or a crash) never sees it half written. A symlink is
// edited in place through the link (renaming over it would replace the link itself).
Status ReplaceFileContents(const sandbox::CellLease& channel, const std::string& path,
                           const std::string& text) {
  auto st = channel.Stat(path, /*follow_symlinks=*/false);
  if (!st) return st.error();
  if (st->type == sandbox::control::FileType::kSymlink)
    return channel.WriteFileAt(path, 0, text, /*truncate=*/true);
  static std::atomic<uint64_t> counter{0};
  const std::string parent = ParentDir(path);
  const std::string base = path.substr(parent.empty() ? 0 : parent.size() + 1);
  const std::string temp = (parent.empty() ? "" : parent + "/") + "." + base + ".mcpcell-edit-" +
                           std::to_string(::getpid()) + "-" + std::to_string(counter++);
  if (Status s = channel.WriteNewFile(temp, text, st->mode & 07777); !s) {
    (void)channel.Remove(temp);
    return s;
  }
  if (Status s = channel.Rename(temp, path); !s) {
    (void)channel.Remove(temp);
    return s;
  }
  return Ok();
}

struct EditFileArgs {
  std::string path;
  std::string old_text;
  std::string new_text;
  bool replace_all = false;
};

Result<EditFileArgs> ParseEditFileArgs(const mcp::Json& json) {
  ArgReader reader(json, {"new_text", "old_text", "path", "replace_all"});
  EditFileArgs args;
  args.path = reader.String("path");
  args.old_text = reader.String("old_text");
  args.new_text = reader.String("new_text");
  args.replace_all = reader.OptionalBool("replace_all").value_or(false);
  if (Status st = reader.Finish(); !st) return st.error();
  return args;
}

mcp::ToolResult EditFile(const ToolEnv& env, mcp::Context& ctx, const EditFileArgs& args,
                         std::string& note) {
  const std::string& path = args.path;
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  auto& channel = *acquired.lease;
  uint64_t size = 0;
  auto data = ReadCellFile(channel, path, env.config.max_read_bytes + 1, &size);
  if (!data) return PathError("edit_file " + path, data.error());
  if (data->size() > env.config.max_read_bytes || data->size() < size)
    return mcp::ToolResult::Error("edit_file " + path + ": the file is larger than " +
                                  std::to_string(env.config.max_read_bytes) +
                                  " bytes; edit it with run_command (e.g. sed or python)");
  if (LooksBinary(*data))
    return mcp::ToolResult::Error("edit_file " + path + ": binary file; edit_file only edits text");
  std::vector<size_t> at;
  const std::string& old_text = args.old_text;
  const std::string& new_text = args.new_text;
  for (size_t pos = data->find(old_text); pos != std::string::npos;
       pos = data->find(old_text, pos + old_text.size()))
    at.push_back(pos);
  if (at.empty())
    return mcp::ToolResult::Error("edit_file " + path +
                                  ": old_text was not found (0 matches); read the file and "
                                  "copy the text exactly, including whitespace");
  if (at.size() > 1 && !args.replace_all)
    return mcp::ToolResult::Error(
        "edit_file " + path + ": old_text matches " + std::to_string(at.size()) +
        " times; add surrounding lines to make it unique, or set replace_all=true");
  // The result's size, checked before it is built: replace_all over many matches can
  // multiply the file (8 MiB of "a" with a 500-byte new_text would be 4 GB).
  const long double out_size =
      static_cast<long double>(data->size()) +
      static_cast<long double>(at.size()) *
          (static_cast<long double>(new_text.size()) - static_cast<long double>(old_text.size()));
  if (out_size > static_cast<long double>(env.config.max_write_bytes))
    return mcp::ToolResult::Error(
        "edit_file " + path + ": the edited file would be " +
        std::to_string(static_cast<uint64_t>(out_size)) + " bytes, more than the " +
        std::to_string(env.config.max_write_bytes) +
        " bytes one edit may write; edit it with run_command (e.g. sed or python)");
  std::string out;
  out.reserve(static_cast<size_t>(out_size));
  size_t prev = 0;
  for (size_t pos : at) {
    out.append(*data, prev, pos - prev);
    out += new_text;
    prev = pos + old_text.size();
  }
  out.append(*data, prev);
  Status st = ReplaceFileContents(channel, path, out);
  if (!st) return PathError("edit_file " + path, st.error(), WriteHint(st.error()));
  mcp::ToolResult r =
      mcp::ToolResult::Text("replaced " + std::to_string(at.size()) + " occurrence(s) in " + path);
  r.structured_content = {{"path", path}, {"replacements", at.size()}, {"size_bytes", out.size()}};
  return r;
}

}  // namespace

mcp::Tool MakeEditFileTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "edit_file";
  tool.title = "Edit a file in the sandbox";
  tool.description =
      "Replaces old_text with new_text in a text file of this session's sandbox. old_text "
      "must match exactly once (or set replace_all=true to replace every match).";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"path", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
                         {"old_text", {{"type", "string"}, {"minLength", 1}}},
                         {"new_text", {{"type", "string"}}},
                         {"replace_all", {{"type", "boolean"}}}}},
                       {"required", {"path", "old_text", "new_text"}},
                       {"additionalProperties", false}};
  tool.output_schema = {{"type", "object"},
                        {"properties",
                         {{"path", {{"type", "string"}}},
                          {"replacements", {{"type", "integer"}}},
                          {"size_bytes", {{"type", "integer"}}}}},
                        {"required", {"path", "replacements", "size_bytes"}}};
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseEditFileArgs(json);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        mcp::ToolResult result = EditFile(env, ctx, *args, note);
        AuditFileCall(env, ctx, "edit", args->path, result, "size_bytes");
        return result;
      });
  return tool;
}

}  // namespace mcpcell::tools
