#include "tools/cell_tools.h"

namespace mcpcell::tools {

mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env) {
  using Maker = mcp::Tool (*)(const ToolEnv&);
  const Maker makers[] = {MakeRunCodeTool,     MakeRunCommandTool, MakeReadFileTool,
                          MakeWriteFileTool,   MakeEditFileTool,   MakeListFilesTool,
                          MakeSessionInfoTool, MakePipInstallTool, MakeNpmInstallTool};
  for (Maker make : makers) {
    mcp::Tool tool = make(env);
    // Registered when any policy served enables it; each session sees its own
    // (ToolEnv::ToolEnabled, through the server's tool_filter).
    bool enabled = false;
    for (const CellToolsConfig* c : env.AllConfigs()) {
      enabled = enabled || c->enabled_tools.empty() || c->enabled_tools.count(tool.name) > 0;
    }
    if (!enabled) continue;
    std::string name = tool.name;
    mcp::Status st = server.AddTool(std::move(tool));
    if (!st) return mcp::Status::Error("tool " + name + ": " + st.message());
  }
  return mcp::Status::Ok();
}

std::function<bool(const mcp::Session&, const std::string&)> ServerToolFilter(const ToolEnv& env) {
  return [&env](const mcp::Session& session, const std::string& name) {
    return env.ToolEnabled(session.tenant(), name);
  };
}

}  // namespace mcpcell::tools
