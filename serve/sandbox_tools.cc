#include "serve/sandbox_tools.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "mcp/era2026.h"
#include "mcp/session.h"
#include "sandbox/cell_session.h"
#include "serve/serve_audit.h"

namespace mcpcell::serve {
namespace {

constexpr const char* kCreateTool = "sandbox_create";
constexpr const char* kCloseTool = "sandbox_close";

bool IsSandboxTool(const std::string& name) { return name == kCreateTool || name == kCloseTool; }

std::string Duration(std::chrono::milliseconds d) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (s % 3600 == 0) return std::to_string(s / 3600) + " h";
  if (s % 60 == 0) return std::to_string(s / 60) + " min";
  return std::to_string(s) + " s";
}

std::string Iso8601(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The lifetime sentence of sandbox_create's description: one policy's figures when every
// tenant has the same, else the range (the result states the caller's own).
std::string LifetimeSentence(const std::map<std::string, SandboxLimits>& limits) {
  if (limits.empty()) return "";
  auto [min_idle, max_idle] = std::minmax_element(
      limits.begin(), limits.end(),
      [](const auto& a, const auto& b) { return a.second.idle < b.second.idle; });
  auto [min_life, max_life] = std::minmax_element(
      limits.begin(), limits.end(),
      [](const auto& a, const auto& b) { return a.second.max_lifetime < b.second.max_lifetime; });
  auto range = [](std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
    return lo == hi ? Duration(lo) : Duration(lo) + " to " + Duration(hi) + " (by tenant)";
  };
  return " A sandbox ends after " + range(min_idle->second.idle, max_idle->second.idle) +
         " without calls, and at the latest " +
         range(min_life->second.max_lifetime, max_life->second.max_lifetime) +
         " after it was made (the result says when yours expires); sandbox_close ends it "
         "sooner. After that, call sandbox_create again for a new, empty one.";
}

mcp::Json HandleArgumentSchema() {
  return {{"type", "string"},
          {"description", "The sandbox handle from sandbox_create (sbx_...)."},
          {"x-mcp-header", "Sandbox"}};
}

mcp::Tool MakeCreateTool(SandboxHandles& handles, const tools::ToolEnv& env, ServeAudit& audit,
                         const std::map<std::string, SandboxLimits>& limits) {
  mcp::Tool tool;
  tool.name = kCreateTool;
  tool.title = "Create a sandbox";
  tool.description =
      "Makes a new isolated Linux sandbox (a cell: its own filesystem with /workspace, "
      "processes and limits, from your policy) and returns its handle. Pass the handle as the "
      "`sandbox` argument of every other tool; calls with the same handle share the cell and "
      "its files." +
      LifetimeSentence(limits);
  tool.input_schema = {
      {"type", "object"}, {"properties", mcp::Json::object()}, {"additionalProperties", false}};
  tool.annotations = {{"readOnlyHint", false},
                      {"destructiveHint", false},
                      {"idempotentHint", false},
                      {"openWorldHint", false}};
  tool.handler = [&handles, &env, &audit](const mcp::Json&, mcp::Context& ctx) {
    const std::string& tenant = ctx.session().tenant();
    auto minted = handles.Mint(tenant);
    if (!minted) return mcp::ToolResult::Error("sandbox_create failed: " + minted.error().message);
    // The cell session starts now (its lifetime runs from here; the cell itself is made,
    // or taken from the warm pool, at the first call).
    auto cells = env.cells->Get(minted->key, env.CellProfile(tenant));
    std::string refused =
        cells ? audit.SandboxStarted(minted->key, tenant, ctx.session().client_info(),
                                     mcp::era2026::kVersion)
              : cells.error().message;
    if (!refused.empty()) {
      (void)handles.Close(minted->handle, tenant);
      return mcp::ToolResult::Error("sandbox_create failed: " + refused);
    }
    const auto idle_s =
        std::chrono::duration_cast<std::chrono::seconds>(minted->limits.idle).count();
    const auto max_s =
        std::chrono::duration_cast<std::chrono::seconds>(minted->limits.max_lifetime).count();
    mcp::ToolResult result =
        mcp::ToolResult::Structured({{"sandbox", minted->handle},
                                     {"expires_at", Iso8601(minted->expires_at)},
                                     {"idle_timeout_s", idle_s},
                                     {"max_lifetime_s", max_s}});
    result.content = mcp::Json::array();
    result.AddText("Sandbox " + minted->handle +
                   " is ready: pass it as `sandbox` to every tool. It ends after " +
                   Duration(minted->limits.idle) + " without calls, at " +
                   Iso8601(minted->expires_at) + " at the latest, or at sandbox_close.");
    return result;
  };
  return tool;
}

mcp::Tool MakeCloseTool(SandboxHandles& handles) {
  mcp::Tool tool;
  tool.name = kCloseTool;
  tool.title = "Close a sandbox";
  tool.description =
      "Ends a sandbox now: its programs are killed, its cell and files are deleted, and its "
      "handle stops working.";
  tool.input_schema = {{"type", "object"},
                       {"properties", {{"sandbox", HandleArgumentSchema()}}},
                       {"required", {"sandbox"}},
                       {"additionalProperties", false}};
  tool.annotations = {{"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"idempotentHint", false},
                      {"openWorldHint", false}};
  tool.handler = [&handles](const mcp::Json& args, mcp::Context& ctx) {
    const std::string handle = args.value("sandbox", "");
    // on_ended (EndSandboxSession) has ended the cell session when Close returns.
    auto key = handles.Close(handle, ctx.session().tenant());
    if (!key) return mcp::ToolResult::Error(key.error().message);
    return mcp::ToolResult::Structured({{"sandbox", handle}, {"closed", true}});
  };
  return tool;
}

}  // namespace

std::map<std::string, SandboxLimits> SandboxLimitsFor(
    const policies::Policy& server_policy,
    const std::map<std::string, policies::Policy>& tenant_policies, const HttpConfig& http) {
  auto from = [](const policies::Policy& p) {
    SandboxLimits l;
    l.idle = std::chrono::duration_cast<std::chrono::milliseconds>(p.time.session_idle);
    l.max_lifetime = std::chrono::duration_cast<std::chrono::milliseconds>(p.time.session_max);
    return l;
  };
  std::map<std::string, SandboxLimits> out;
  // Without tokens every caller is tenant "": the server's policy (and the default cap).
  if (http.tenants.empty()) out[""] = from(server_policy);
  for (const auto& [name, policy] : tenant_policies) {
    SandboxLimits l = from(policy);
    auto t = http.tenants.find(name);
    if (t != http.tenants.end() && t->second.quotas.max_sessions > 0)
      l.max_live = t->second.quotas.max_sessions;
    out[name] = l;
  }
  return out;
}

SandboxHandles::EndListener EndSandboxSession(sandbox::CellSessionManager& cells,
                                              ServeAudit& audit) {
  return [&cells, &audit](const std::string& key, const std::string&, const std::string& why) {
    // session.end first: the session-ending hook ends the background processes (their
    // exec.end precede it) and the cell's last usage is sampled while it still exists.
    audit.SessionEnded(key, why);
    (void)cells.Close(key, "sandbox ended: " + why);
  };
}

void ConnectSandboxHandles(tools::ToolEnv& env, SandboxHandles& handles) {
  env.resolve_sandbox = [&handles](const std::string& handle, const std::string& tenant) {
    return handles.Resolve(handle, tenant);
  };
  env.sandbox_call_done = [&handles](const std::string& key) { handles.CallDone(key); };
}

mcp::Status RegisterSandboxTools(mcp::Server& server, SandboxHandles& handles,
                                 const tools::ToolEnv& env, ServeAudit& audit,
                                 const std::map<std::string, SandboxLimits>& limits) {
  if (mcp::Status st = server.AddTool(MakeCreateTool(handles, env, audit, limits)); !st) return st;
  return server.AddTool(MakeCloseTool(handles));
}

std::function<bool(const mcp::Session&, const std::string&)> SandboxToolFilter(
    const tools::ToolEnv& env, std::function<bool(const mcp::Session&, const std::string&)> inner) {
  return [&env, inner = std::move(inner)](const mcp::Session& session, const std::string& name) {
    if (IsSandboxTool(name)) {
      return session.protocol_version() == mcp::era2026::kVersion &&
             env.ConfigFor(session.tenant()) != nullptr;
    }
    return !inner || inner(session, name);
  };
}

}  // namespace mcpcell::serve
