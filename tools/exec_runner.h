// RunInCell: the shared engine of run_code and run_command. Runs one program in the
// calling client's cell and turns what happened into a tool result:
//   - output streamed to the client as notifications/progress (new output in `message`)
//     when the request has a progressToken, with a heartbeat while the program is silent;
//   - cancellation (notifications/cancelled) and session close kill the process group;
//   - a wall-clock timeout (default and cap from the config) kills the process group;
//   - each stream's head and tail kept in the result, the full output saved in the cell
//     under /workspace/.mcpcell/ when it was cut;
//   - a text block for the model and structuredContent matching ExecOutputSchema().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mcp/context.h"
#include "mcp/features.h"
#include "tools/exec_args.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

struct ExecCall {
  std::string tool;  // "run_command" / "run_code", for messages and file names
  std::vector<std::string> argv;
  ExecOptionArgs options;  // cwd, env, stdin, timeout_s, checked (CheckExecOptionArgs)
  // Files written into the cell before the program starts (run_code's source file).
  std::vector<std::pair<std::string, std::string>> files;
};

mcp::ToolResult RunInCell(const ToolEnv& env, mcp::Context& ctx, const ExecCall& call);

// Puts the session's granted secrets (secrets_view.h) in front of `out` (the call's own
// variables); an isError result when the call sets a secret's name or the secrets cannot
// be read. Shared with the background starts (process_start.h).
std::optional<mcp::ToolResult> AddSecretEnv(const ToolEnv& env, const mcp::Context& ctx,
                                            const ExecCall& call, std::vector<std::string>& out);

// A server-unique id for one call (time in ms and a process-wide counter): names its saved
// output and temporary files in the cell. One counter for every tool, so ids never repeat.
std::string NewCallId();

// The outputSchema of run_code and run_command.
mcp::Json ExecOutputSchema();
// Shared input schema pieces.
mcp::Json TimeoutSchema(const ToolEnv& env);

}  // namespace mcpcell::tools
