// The sandbox tools an agent uses (run_code, run_command, read_file, write_file,
// edit_file, list_files, session_info, pip_install, npm_install; the snapshot_* tools in
// snapshot_tools.cc, upload_archive and download_archive in archive_tools.cc), one file each,
// registered on an mcp::Server. Their names and arguments are the public API (docs/tools.md).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

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
mcp::Tool MakeSnapshotCreateTool(const ToolEnv& env);
mcp::Tool MakeSnapshotListTool(const ToolEnv& env);
mcp::Tool MakeSnapshotRestoreTool(const ToolEnv& env);
mcp::Tool MakeSnapshotDeleteTool(const ToolEnv& env);
mcp::Tool MakeUploadArchiveTool(const ToolEnv& env);
mcp::Tool MakeDownloadArchiveTool(const ToolEnv& env);
mcp::Tool MakeProcessTool(const ToolEnv& env);  // process.cc: background processes
mcp::Tool MakePythonTool(const ToolEnv& env);   // python.cc: a persistent interpreter

// Registers every tool that any of env's configs enables (the union over tenants). Which
// of them a session sees and may call is ToolEnv::ToolEnabled: install it as the server's
// tool_filter (ServerToolFilter). The snapshot_* tools only when env.snapshots is set. `env` must
// outlive the server's use of them.
mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env);
// ServerOptions::tool_filter for `env`: a session sees and may call its tenant's enabled
// tools only (a call of another is an unknown tool).
std::function<bool(const mcp::Session&, const std::string&)> ServerToolFilter(const ToolEnv& env);

// Why tool `name` is off for sessions with `config`, naming the policy key: "not in
// tools.enabled", or a package tool its policy leaves nothing to install (PackageToolOff,
// e.g. `packages.mode = "disabled"`), or a snapshot_* tool when the server has no snapshot
// store (`snapshot_store`: ToolEnv::snapshots != nullptr); nullopt when it is on.
std::optional<std::string> ToolOffReason(const CellToolsConfig& config, const std::string& name,
                                         bool snapshot_store = true);
struct ToolOff {
  std::string tool;
  std::string reason;
};
// Every tool of this file that is off for `config`, in tools/list order (session_info).
std::vector<ToolOff> ToolsOff(const CellToolsConfig& config, bool snapshot_store = true);
// ServerOptions::tool_listed for `env`: tools/list leaves out the tools ToolOffReason turns
// off for the session's tenant, so a model is not offered a tool that can only refuse. A
// call by name of one that tool_filter allows still gets that tool's own refusal.
std::function<bool(const mcp::Session&, const std::string&)> ServerToolListed(const ToolEnv& env);

}  // namespace mcpcell::tools
