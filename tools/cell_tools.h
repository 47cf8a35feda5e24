// The sandbox tools an agent uses (run_code, run_command, read_file, write_file,
// edit_file, list_files, session_info), one file each, registered on an mcp::Server.
// Their names and arguments are the public API (docs/tools.md).
#pragma once

#include <string>

#include "mcp/server.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

mcp::Tool MakeRunCodeTool(const ToolEnv& env);
mcp::Tool MakeRunCommandTool(const ToolEnv& env);
mcp::Tool MakeReadFileTool(const ToolEnv& env);
mcp::Tool MakeWriteFileTool(const ToolEnv& env);
mcp::Tool MakeEditFileTool(const ToolEnv& env);
mcp::Tool MakeListFilesTool(const ToolEnv& env);
mcp::Tool MakeSessionInfoTool(const ToolEnv& env);

// Registers every tool the config enables. `env` must outlive the server's use of them.
mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env);

}  // namespace mcpcell::tools
