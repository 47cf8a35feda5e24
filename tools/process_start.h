// StartBackgroundProcess: starts a program of the session's cell in the background (a
// detached exec under cell init, process_table.h) and records it in the ProcessTable.
// Shared by `run_command background=true` and the python tool's interpreter.
// Threading: called on a tool handler's thread with the call's lease.
#pragma once

#include <memory>
#include <string>
#include <variant>

#include "mcp/context.h"
#include "mcp/features.h"
#include "tools/exec_runner.h"
#include "tools/process_table.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

// `call.argv`, cwd and env (the session's secrets are added as for any exec); stdin and
// timeout_s do not apply (the caller refuses them). `kind`: BackgroundProcess::kind. On
// failure an isError result that says why and what to do.
std::variant<std::shared_ptr<BackgroundProcess>, mcp::ToolResult> StartBackgroundProcess(
    const ToolEnv& env, mcp::Context& ctx, const sandbox::CellLease& lease,
    const CellToolsConfig& config, const std::string& kind, const ExecCall& call,
    const std::string& command_text);

}  // namespace mcpcell::tools
