// read_file: a file of the cell as text (by lines), bytes (base64) or, for a PNG, JPEG,
// GIF or WebP (by its first bytes), MCP image content.
#include "base/base64.h"
#include "base/utf8.h"
#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"
#include "tools/image_type.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {

// At most this much text goes into one result; the model pages on with offset.
constexpr size_t kMaxTextResultBytes = 256 * 1024;

mcp::ToolResult ReadText(const std::string& path, std::string_view data, uint64_t size, bool cut,
                         int64_t offset, int64_t limit) {
  // Lines are 1-based for the model; offset is the first line to show.
  const int64_t first = std::max<int64_t>(offset, 1);
  int64_t line = 1, last = first - 1, total = 0;
  std::string body;
  bool stopped = false;  // stopped by limit or by the result size, before the data's end
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    size_t next = nl == std::string_view::npos ? data.size() : nl + 1;
    if (line >= first && !stopped) {
      if ((limit > 0 && line - first >= limit) ||
          body.size() + (next - pos) > kMaxTextResultBytes) {
        stopped = true;
      } else {
        body.append(data.substr(pos, next - pos));
        last = line;
      }
    }
    ++total;
    ++line;
    pos = next;
  }
  if (first > total && total > 0)
    return mcp::ToolResult::Error("arguments.offset: line " + std::to_string(offset) +
                                  " is past the end; the file has " + std::to_string(total) +
                                  " lines" + (cut ? " in its first part that was read" : ""));
  std::string text = ToValidUtf8(body);
  bool more = stopped || cut;
  std::string note =
      path + ": lines " + std::to_string(total ? first : 0) + "-" + std::to_string(last) + " of " +
      std::to_string(total) +
      (cut ? "+ (only the file's first part was read; use run_command for more)" : "") +
      (stopped ? "; continue with offset=" + std::to_string(last + 1) : "");
  mcp::ToolResult r = mcp::ToolResult::Text(text);
  r.AddText("[" + note + "]");
  r.structured_content = {{"path", path},         {"encoding", "text"},  {"content", text},
                          {"size_bytes", size},   {"start_line", first}, {"end_line", last},
                          {"total_lines", total}, {"truncated", more},   {"is_binary", false}};
  return r;
}

struct ReadFileArgs {
  std::string path;
  bool base64 = false;  // encoding "base64"; else "text"
  int64_t offset = 0;   // text: first line (1-based); base64: first byte
  int64_t limit = 0;    // text: lines; base64: bytes; 0: as many as fit
};

Result<ReadFileArgs> ParseReadFileArgs(const mcp::Json& json) {
  ArgReader reader(json, {"encoding", "limit", "offset", "path"});
  ReadFileArgs args;
  args.path = reader.String("path");
  args.base64 = reader.OptionalString("encoding").value_or("text") == "base64";
  args.offset = reader.OptionalInteger("offset").value_or(0);
  args.limit = reader.OptionalInteger("limit").value_or(0);
  if (Status st = reader.Finish(); !st) return st.error();
  return args;
}

mcp::ToolResult ReadBase64(const sandbox::CellLease& channel, const ReadFileArgs& args,
                           uint64_t file_size, uint64_t default_bytes, uint64_t max_bytes) {
  const std::string& path = args.path;
  const int64_t offset = args.offset;
  const uint64_t want = std::min<uint64_t>(
      args.limit > 0 ? static_cast<uint64_t>(args.limit) : default_bytes, max_bytes);
  if (static_cast<uint64_t>(offset) > file_size)
    return mcp::ToolResult::Error("arguments.offset: byte " + std::to_string(offset) +
                                  " is past the end; the file has " + std::to_string(file_size) +
                                  " bytes");
  auto w = channel.ReadFileRange(path, offset, want);
  if (!w) return PathError("read_file " + path, w.error());
  const uint64_t end = offset + w->data.size();
  const bool truncated = end < w->file_size;
  std::string b64 = Base64Encode(w->data);
  mcp::ToolResult r = mcp::ToolResult::Text(b64);
  r.AddText("[" + path + ": bytes " + std::to_string(offset) + "-" + std::to_string(end) + " of " +
            std::to_string(w->file_size) +
            (truncated ? "; continue with offset=" + std::to_string(end) : "") + "]");
  r.structured_content = {{"path", path},
                          {"encoding", "base64"},
                          {"content", b64},
                          {"size_bytes", w->file_size},
                          {"offset", offset},
                          {"truncated", truncated},
                          {"is_binary", LooksBinary(w->data)}};
  return r;
}

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// A picture as image content, which clients show and models can look at.
mcp::ToolResult ReadImage(const std::string& path, std::string_view mime,
                          const sandbox::FileWindow& w) {
  if (w.file_size > kMaxImageContentBytes || !w.eof)
    return mcp::ToolResult::Error(
        "read_file " + path + ": image is " + MiB(w.file_size) + ", over the " +
        MiB(kMaxImageContentBytes) + " cap for image content; read it with encoding \"base64\" " +
        "and offset/limit as bytes, or shrink it (e.g. a smaller PNG) and read that");
  mcp::ToolResult r;
  r.content.push_back(
      {{"type", "image"}, {"data", Base64Encode(w.data)}, {"mimeType", std::string(mime)}});
  r.AddText("[" + path + ": " + std::string(mime) + ", " + std::to_string(w.file_size) + " bytes]");
  r.structured_content = {{"path", path},       {"encoding", "image"},
                          {"mime_type", mime},  {"size_bytes", w.file_size},
                          {"truncated", false}, {"is_binary", true}};
  return r;
}

mcp::ToolResult ReadFile(const ToolEnv& env, mcp::Context& ctx, const ReadFileArgs& args,
                         std::string& note) {
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  auto& channel = *acquired.lease;
  const std::string& path = args.path;
  auto st = channel.Stat(path, /*follow_symlinks=*/true);
  if (!st) return PathError("read_file " + path, st.error());
  if (st->type == sandbox::control::FileType::kDirectory)
    return mcp::ToolResult::Error("read_file " + path + ": is a directory (use list_files)");
  if (st->type != sandbox::control::FileType::kRegular)
    return mcp::ToolResult::Error("read_file " + path + ": not a regular file");
  if (args.base64)
    return ReadBase64(channel, args, st->size, acquired.config->keep_bytes_per_stream * 4,
                      env.config.max_read_bytes);
  auto w = channel.ReadFileRange(path, 0, env.config.max_read_bytes);
  if (!w) return PathError("read_file " + path, w.error());
  if (std::string_view mime = ImageMimeType(std::string_view(w->data).substr(0, kImageMagicBytes));
      !mime.empty())
    return ReadImage(path, mime, *w);
  if (LooksBinary(w->data))
    return mcp::ToolResult::Error(path + " is a binary file (" + std::to_string(w->file_size) +
                                  " bytes); read it with encoding \"base64\"");
  return ReadText(path, w->data, w->file_size, !w->eof, args.offset, args.limit);
}

mcp::Json ReadFileInputSchema() {
  return {{"type", "object"},
          {"properties",
           {{"path", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
            {"offset",
             {{"type", "integer"},
              {"minimum", 0},
              {"maximum", int64_t{1} << 40},
              {"description", "text: first line (1-based); base64: first byte"}}},
            {"limit",
             {{"type", "integer"},
              {"minimum", 1},
              {"maximum", int64_t{1} << 24},
              {"description", "text: number of lines; base64: number of bytes"}}},
            {"encoding",
             {{"type", "string"},
              {"enum", {"text", "base64"}},
              {"description",
               "text (default; a PNG, JPEG, GIF or WebP comes back as image content) or "
               "base64 bytes"}}}}},
          {"required", {"path"}},
          {"additionalProperties", false}};
}

mcp::Json ReadFileOutputSchema() {
  return {{"type", "object"},
          {"properties",
           {{"path", {{"type", "string"}}},
            {"encoding", {{"type", "string"}}},
            {"content", {{"type", "string"}}},
            {"mime_type", {{"type", "string"}}},
            {"size_bytes", {{"type", "integer"}}},
            {"start_line", {{"type", "integer"}}},
            {"end_line", {{"type", "integer"}}},
            {"total_lines", {{"type", "integer"}}},
            {"offset", {{"type", "integer"}}},
            {"truncated", {{"type", "boolean"}}},
            {"is_binary", {{"type", "boolean"}}}}},
          // content: absent for "image" (the picture is the result's image content).
          {"required", {"path", "encoding", "size_bytes", "truncated", "is_binary"}}};
}

}  // namespace

mcp::Tool MakeReadFileTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "read_file";
  tool.title = "Read a file in the sandbox";
  tool.description =
      "Reads a file in this session's sandbox. Paths are relative to /workspace unless "
      "absolute. Text is returned by lines (offset: first line, 1-based; limit: number of "
      "lines); a PNG, JPEG, GIF or WebP (up to " +
      MiB(kMaxImageContentBytes) +
      ") comes back as an "
      "image; other binary files need encoding \"base64\" (offset/limit are then bytes).";
  tool.input_schema = ReadFileInputSchema();
  tool.output_schema = ReadFileOutputSchema();
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseReadFileArgs(json);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        mcp::ToolResult result = ReadFile(env, ctx, *args, note);
        AuditFileCall(env, ctx, "read", args->path, result, "size_bytes");
        return result;
      });
  return tool;
}

}  // namespace mcpcell::tools
