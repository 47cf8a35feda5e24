#include "tools/cell_tools.h"

namespace mcpcell::tools {

mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env) {
  using Maker = mcp::Tool (*)(const ToolEnv&);
  const Maker makers[] = {MakeRunCodeTool,    MakeRunCommandTool, MakeReadFileTool,
                          MakeWriteFileTool,  MakeEditFileTool,   MakeListFilesTool,
                          MakeSessionInfoTool};
  for (Maker make : makers) {
    mcp::Tool tool = make(env);
    if (!env.config.enabled_tools.empty() && !env.config.enabled_tools.count(tool.name)) continue;
    std::string name = tool.name;
    mcp::Status st = server.AddTool(std::move(tool));
    if (!st) return mcp::Status::Error("tool " + name + ": " + st.message());
  }
  return mcp::Status::Ok();
}

}  // namespace mcpcell::tools
