// list_files: names, types and sizes under a directory of the cell; bounded.
#include <deque>

#include "sandbox/cell_channel.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"

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
}  // namespace

mcp::Tool MakeListFilesTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "list_files";
  tool.title = "List files in the sandbox";
  tool.description =
      "Lists a directory of this session's sandbox (default /workspace): name, type and size "
      "of each entry; recursive=true walks subdirectories (symlinks are not followed).";
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
                                {"size", {{"type", "integer"}}}}},
                              {"required", {"path", "type", "size"}}}}}},
                          {"truncated", {{"type", "boolean"}}}}},
                        {"required", {"path", "entries", "truncated"}}};
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& args, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        const std::string root = args.value("path", "/workspace");
        const bool recursive = args.value("recursive", false);
        const size_t max = args.value("max_entries", int64_t{1000});
        LeaseOrError acquired = AcquireCell(env, ctx);
        if (!acquired.lease) return acquired.error;
        note = acquired.lease->replaced_reason();
        auto& channel = *acquired.lease;
        mcp::Json entries = mcp::Json::array();
        std::string text;
        bool truncated = false;
        std::deque<std::string> dirs{""};  // relative to root
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
            text += name + (e.stat.type == sandbox::control::FileType::kDirectory ? "/" : "") +
                    "\t" + type + "\t" + std::to_string(e.stat.size) + "\n";
            if (recursive && e.stat.type == sandbox::control::FileType::kDirectory)
              dirs.push_back(rel.empty() ? e.name : rel + "/" + e.name);
          }
        }
        if (entries.empty()) text += "(empty directory)\n";
        if (truncated)
          text += "[stopped at max_entries=" + std::to_string(max) + "; list a subdirectory]\n";
        mcp::ToolResult r = mcp::ToolResult::Text(root + ":\n" + text);
        r.structured_content = {{"path", root}, {"entries", entries}, {"truncated", truncated}};
        return r;
      });
  return tool;
}

}  // namespace mcpcell::tools
