// The 2026-07-28 era's sandbox tools and their wiring: sandbox_create (mints a handle, starts
// its cell session, writes session.start) and sandbox_close (ends it), shown to new-era
// requests only; the handles' ends (close, idle, lifetime) end their cell sessions and write
// session.end. The registry itself is serve/sandbox_handles.h; the cell tools resolve the
// `sandbox` argument through ToolEnv::resolve_sandbox (tools/cell_tools.cc).
//
// Threading: the tools run on handler threads; SandboxWiring's callbacks on whatever thread
// ends a handle (a handler, the cell manager's reaper). Everything referenced must outlive
// the MCP server and the cell manager's reaper.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "mcp/server.h"
#include "policies/policy.h"
#include "serve/http_config.h"
#include "serve/sandbox_handles.h"
#include "tools/tool_env.h"

namespace mcpcell::sandbox {
class CellSessionManager;
}

namespace mcpcell::serve {

class ServeAudit;

// Each tenant's handle limits: its policy's [time] session_idle and session_max, and its
// max_sessions from the HTTP config (0 there: SandboxLimits' default cap). "" = the server's
// own policy, for callers without a tenant.
std::map<std::string, SandboxLimits> SandboxLimitsFor(
    const policies::Policy& server_policy,
    const std::map<std::string, policies::Policy>& tenant_policies, const HttpConfig& http);

// What ends a handle's session: its cell session closed (processes ended, cell destroyed,
// workspace released) and session.end written (ServeAudit::SessionEnded, which also ends its
// background processes first). For SandboxHandles::SetEndListener.
SandboxHandles::EndListener EndSandboxSession(sandbox::CellSessionManager& cells,
                                              ServeAudit& audit);

// Points env's cell tools at `handles` (resolve_sandbox, sandbox_call_done).
void ConnectSandboxHandles(tools::ToolEnv& env, SandboxHandles& handles);

// Registers sandbox_create and sandbox_close. `limits` says what their descriptions state.
mcp::Status RegisterSandboxTools(mcp::Server& server, SandboxHandles& handles,
                                 const tools::ToolEnv& env, ServeAudit& audit,
                                 const std::map<std::string, SandboxLimits>& limits);

// `inner` (a tool filter) with the sandbox tools shown to 2026-07-28 sessions of a tenant
// that has a config only, and hidden from today's era.
std::function<bool(const mcp::Session&, const std::string&)> SandboxToolFilter(
    const tools::ToolEnv& env, std::function<bool(const mcp::Session&, const std::string&)> inner);

}  // namespace mcpcell::serve
