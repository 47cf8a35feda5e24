// read_file: a file of the cell as text (by lines) or bytes (base64).
#include "sandbox/cell_channel.h"
#include "tools/cell_tools.h"

namespace mcpcell::tools {
namespace {

mcp::ToolResult ReadText(const std::string& path, const std::string& data, uint64_t size,
                         bool cut, int64_t offset, int64_t limit) {
  // Lines are 1-based for the model; offset is the first line to show.
  std::vector<std::string_view> lines;
  std::string_view rest(data);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl == std::string_view::npos ? rest.size() : nl + 1));
    rest.remove_prefix(lines.back().size());
  }
  int64_t total = static_cast<int64_t>(lines.size());
  int64_t first = std::max<int64_t>(offset, 1);
  if (first > total && total > 0)
    return mcp::ToolResult::Error("arguments.offset: line " + std::to_string(offset) +
                                  " is past the end; the file has " + std::to_string(total) +
                                  " lines");
  int64_t last = limit > 0 ? std::min(total, first + limit - 1) : total;
  std::string body;
  for (int64_t i = first; i <= last; ++i) body += lines[i - 1];
  std::string text = ToValidUtf8(body);
  bool more = last < total || cut;
  std::string note = path + ": lines " + std::to_string(total ? first : 0) + "-" +
                     std::to_string(last) + " of " + std::to_string(total) +
                     (cut ? "+ (file larger than the read limit, only its start was read)" : "") +
                     (more ? "; continue with offset=" + std::to_string(last + 1) : "");
  mcp::ToolResult r = mcp::ToolResult::Text(text);
  r.AddText("[" + note + "]");
  r.structured_content = {{"path", path},         {"encoding", "text"},
                          {"content", text},      {"size_bytes", size},
                          {"start_line", first},  {"end_line", last},
                          {"total_lines", total}, {"truncated", more},
                          {"is_binary", false}};
  return r;
}

}  // namespace

mcp::Tool MakeReadFileTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "read_file";
  tool.title = "Read a file in the sandbox";
  tool.description =
      "Reads a file in this session's sandbox. Paths are relative to /workspace unless "
      "absolute. Text is returned by lines (offset: first line, 1-based; limit: number of "
      "lines); binary files need encoding \"base64\" (offset/limit are then bytes).";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
        {"offset", {{"type", "integer"}, {"minimum", 0},
                    {"description", "text: first line (1-based); base64: first byte"}}},
        {"limit", {{"type", "integer"}, {"minimum", 1},
                   {"description", "text: number of lines; base64: number of bytes"}}},
        {"encoding", {{"type", "string"}, {"enum", {"text", "base64"}}}}}},
      {"required", {"path"}},
      {"additionalProperties", false}};
  tool.output_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}}}, {"encoding", {{"type", "string"}}},
        {"content", {{"type", "string"}}}, {"size_bytes", {{"type", "integer"}}},
        {"start_line", {{"type", "integer"}}}, {"end_line", {{"type", "integer"}}},
        {"total_lines", {{"type", "integer"}}}, {"offset", {{"type", "integer"}}},
        {"truncated", {{"type", "boolean"}}}, {"is_binary", {{"type", "boolean"}}}}},
      {"required", {"path", "encoding", "content", "size_bytes", "truncated", "is_binary"}}};
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& args, mcp::Context& ctx) -> mcp::ToolResult {
    LeaseOrError acquired = AcquireCell(env, ctx);
    if (!acquired.lease) return acquired.error;
    auto& channel = acquired.lease->cell().channel();
    const std::string path = args["path"].get<std::string>();
    const bool base64 = args.value("encoding", "text") == "base64";
    const int64_t offset = args.value("offset", int64_t{0});
    const int64_t limit = args.value("limit", int64_t{0});
    uint64_t size = 0;
    uint64_t max = env.config.max_read_bytes;
    auto data = ReadCellFile(channel, path, base64 ? offset + (limit ? limit : max) : max, &size);
    if (!data) return SandboxError("read_file " + path, data.error());
    if (!base64) {
      if (LooksBinary(*data))
        return mcp::ToolResult::Error(path + " is a binary file (" + std::to_string(size) +
                                      " bytes); read it with encoding \"base64\"");
      return ReadText(path, *data, size, data->size() < size, offset, limit);
    }
    std::string_view bytes(*data);
    bytes.remove_prefix(std::min<size_t>(bytes.size(), offset));
    if (limit > 0) bytes = bytes.substr(0, limit);
    else if (bytes.size() > env.config.keep_bytes_per_stream * 4)
      bytes = bytes.substr(0, env.config.keep_bytes_per_stream * 4);
    bool truncated = static_cast<uint64_t>(offset) + bytes.size() < size;
    std::string b64 = Base64Encode(bytes);
    mcp::ToolResult r = mcp::ToolResult::Text(b64);
    r.AddText("[" + path + ": bytes " + std::to_string(offset) + "-" +
              std::to_string(offset + bytes.size()) + " of " + std::to_string(size) +
              (truncated ? "; continue with offset=" + std::to_string(offset + bytes.size())
                         : "") + "]");
    r.structured_content = {{"path", path}, {"encoding", "base64"}, {"content", b64},
                            {"size_bytes", size}, {"offset", offset}, {"truncated", truncated},
                            {"is_binary", LooksBinary(*data)}};
    return r;
  };
  return tool;
}

}  // namespace mcpcell::tools
