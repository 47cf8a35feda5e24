// list_files: names, types and sizes under a directory of the cell; bounded. Pictures
// (a PNG, JPEG, GIF or WebP name whose first bytes agree) carry their MIME type.
#include <deque>

#include "base/utf8.h"
#include "sandbox/cell_channel.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"
#include "tools/image_type.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {
const char* TypeName(sandbox::control::FileType t) {
  using sandbox::control::FileType;
  switch (t) {
    case FileType::kRegular:
      return "file";
    case FileType::kDirectory:
      return "directory";
    case FileType::kSymlink:
      return "symlink";
    case FileType::kFifo:
      return "fifo";
    case FileType::kSocket:
      return "socket";
    case FileType::kChar:
      return "char_device";
    case FileType::kBlock:
      return "block_device";
    default:
      return "unknown";
  }
}

// At most this many files per listing get their first bytes read to confirm a picture.
constexpr size_t kMaxImageChecks = 256;

// The MIME type of a regular file named like a picture whose first bytes agree; "" else.
std::string ImageMime(const sandbox::CellLease& channel, const std::string& path,
                      const sandbox::control::DirEntry& e, size_t& checks) {
  if (e.stat.type != sandbox::control::FileType::kRegular || !HasImageExtension(e.name) ||
      checks >= kMaxImageChecks)
    return "";
  ++checks;
  auto head = channel.ReadFileRange(path, 0, kImageMagicBytes);
  return head ? std::string(ImageMimeType(head->data)) : "";
}

struct ListFilesArgs {
  std::string path = "/workspace";
  bool recursive = false;
  size_t max_entries = 1000;
};

Result<ListFilesArgs> ParseListFilesArgs(const mcp::Json& json) {
  ArgReader reader(json, {"max_entries", "path", "recursive"});
  ListFilesArgs args;
  args.path = reader.OptionalString("path").value_or("/workspace");
  args.recursive = reader.OptionalBool("recursive").value_or(false);
  args.max_entries = reader.OptionalInteger("max_entries").value_or(1000);
  if (Status st = reader.Finish(); !st) return st.error();
  return args;
}

mcp::ToolResult ListFiles(const ToolEnv& env, mcp::Context& ctx, const ListFilesArgs& args,
                          std::string& note) {
  const std::string& root = args.path;
  const size_t max = args.max_entries;
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  auto& channel = *acquired.lease;
  mcp::Json entries = mcp::Json::array();
  std::string text;
  bool truncated = false;
  std::deque<std::string> dirs{""};  // relative to root
  size_t image_checks = 0;
  while (!dirs.empty() && !truncated) {
    std::string rel = std::move(dirs.front());
    dirs.pop_front();
    std::string dir = rel.empty() ? root : root + "/" + rel;
    // The listing itself is bounded by the server's cap; max_entries cuts it below.
    auto list = channel.ListDir(dir, env.config.max_list_entries + 1);
    if (!list) {
      if (rel.empty()) return PathError("list_files " + root, list.error());
      truncated = true;  // a subdirectory we could not list: the listing is incomplete
      text += "[" + rel + ": not listed: " + list.error().message + "]\n";
      continue;
    }
    for (const auto& e : *list) {
      if (entries.size() >= max) {
        truncated = true;
        break;
      }
      std::string name = ToValidUtf8(rel.empty() ? e.name : rel + "/" + e.name);
      const char* type = TypeName(e.stat.type);
      entries.push_back({{"path", name}, {"type", type}, {"size", e.stat.size}});
      std::string mime = ImageMime(channel, dir + "/" + e.name, e, image_checks);
      if (!mime.empty()) entries.back()["mime"] = mime;
      text += name + (e.stat.type == sandbox::control::FileType::kDirectory ? "/" : "") + "\t" +
              type + "\t" + std::to_string(e.stat.size) + (mime.empty() ? "" : "\t" + mime) + "\n";
      if (args.recursive && e.stat.type == sandbox::control::FileType::kDirectory)
        dirs.push_back(rel.empty() ? e.name : rel + "/" + e.name);
    }
  }
  if (entries.empty()) text += "(empty directory)\n";
  if (truncated)
    text += "[stopped at max_entries=" + std::to_string(max) + "; list a subdirectory]\n";
  mcp::ToolResult r = mcp::ToolResult::Text(root + ":\n" + text);
  r.structured_content = {{"path", root}, {"entries", entries}, {"truncated", truncated}};
  return r;
}
}  // namespace

mcp::Tool MakeListFilesTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "list_files";
  tool.title = "List files in the sandbox";
  tool.description =
      "Lists a directory of this session's sandbox (default /workspace): name, type and size "
      "of each entry (pictures also their MIME type, read_file shows them); recursive=true walks "
      "subdirectories (symlinks are not followed).";
  tool.input_schema = {{"type", "object"},
                       {"properties",
                        {{"path", {{"type", "string"}, {"minLength", 1}, {"maxLength", 4096}}},
                         {"recursive", {{"type", "boolean"}}},
                         {"max_entries",
                          {{"type", "integer"},
                           {"minimum", 1},
                           {"maximum", static_cast<int64_t>(env.config.max_list_entries)}}}}},
                       {"additionalProperties", false}};
  tool.output_schema = {{"type", "object"},
                        {"properties",
                         {{"path", {{"type", "string"}}},
                          {"entries",
                           {{"type", "array"},
                            {"items",
                             {{"type", "object"},
                              {"properties",
                               {{"path", {{"type", "string"}}},
                                {"type", {{"type", "string"}}},
                                {"size", {{"type", "integer"}}},
                                {"mime", {{"type", "string"}}}}},
                              {"required", {"path", "type", "size"}}}}}},
                          {"truncated", {{"type", "boolean"}}}}},
                        {"required", {"path", "entries", "truncated"}}};
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseListFilesArgs(json);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        return ListFiles(env, ctx, *args, note);
      });
  return tool;
}

}  // namespace mcpcell::tools
