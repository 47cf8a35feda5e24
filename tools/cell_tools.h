// The sandbox tools an agent uses (run_code, run_command, read_file, write_file,
// edit_file, list_files, session_info, pip_install, npm_install), one file each, registered on an
// mcp::Server. Their names and arguments are the public API (docs/tools.md).
#pragma once

#include <functional>
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
mcp::Tool MakePipInstallTool(const ToolEnv& env);
mcp::Tool MakeNpmInstallTool(const ToolEnv& env);

// Registers every tool that any of env's configs enables (the union over tenants). Which
// of them a session sees and may call is ToolEnv::ToolEnabled: install it as the server's
// tool_filter (ServerToolFilter). `env` must outlive the server's use of them.
mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env);
// ServerOptions::tool_filter for `env`: a session sees its tenant's enabled tools only.
std::function<bool(const mcp::Session&, const std::string&)> ServerToolFilter(const ToolEnv& env);

}  // namespace mcpcell::tools
