// The "your previous cell is gone" note for tools that do not build their own result text
// (the file tools): when a call got a fresh cell because the session's previous one died or
// idled out, the model must learn that files from before are gone, whatever the tool.
#pragma once

#include <string>
#include <utility>

#include "mcp/features.h"

namespace mcpcell::tools {

// Puts "Note: <note>" before the result's content (errors included); no-op for "".
inline mcp::ToolResult AddCellNote(mcp::ToolResult result, const std::string& note) {
  if (note.empty()) return result;
  mcp::Json content = mcp::Json::array();
  content.push_back({{"type", "text"}, {"text", "Note: " + note}});
  for (auto& item : result.content) content.push_back(std::move(item));
  result.content = std::move(content);
  return result;
}

// Wraps a handler that reports the lease's replaced_reason() through `note`.
template <typename Fn>
mcp::ToolHandler WithCellNote(Fn fn) {
  return [fn = std::move(fn)](const mcp::Json& args, mcp::Context& ctx) {
    std::string note;
    mcp::ToolResult result = fn(args, ctx, note);
    return AddCellNote(std::move(result), note);
  };
}

}  // namespace mcpcell::tools
