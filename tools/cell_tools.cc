#include "tools/cell_tools.h"

#include <chrono>

#include "tools/package_install.h"
#include "tools/redaction.h"

namespace mcpcell::tools {
namespace {

// Every tool, in the order tools/list shows them, by the name its maker gives it.
struct CellToolMaker {
  const char* name;
  mcp::Tool (*make)(const ToolEnv&);
};
constexpr CellToolMaker kCellTools[] = {{"run_code", MakeRunCodeTool},
                                        {"run_command", MakeRunCommandTool},
                                        {"python", MakePythonTool},
                                        {"process", MakeProcessTool},
                                        {"read_file", MakeReadFileTool},
                                        {"write_file", MakeWriteFileTool},
                                        {"edit_file", MakeEditFileTool},
                                        {"list_files", MakeListFilesTool},
                                        {"session_info", MakeSessionInfoTool},
                                        {"pip_install", MakePipInstallTool},
                                        {"npm_install", MakeNpmInstallTool},
                                        {"snapshot_create", MakeSnapshotCreateTool},
                                        {"snapshot_list", MakeSnapshotListTool},
                                        {"snapshot_restore", MakeSnapshotRestoreTool},
                                        {"snapshot_delete", MakeSnapshotDeleteTool},
                                        {"upload_archive", MakeUploadArchiveTool},
                                        {"download_archive", MakeDownloadArchiveTool}};

// The tools that need ToolEnv::snapshots (left unregistered without it).
bool IsSnapshotTool(const std::string& name) { return name.rfind("snapshot_", 0) == 0; }

// `schema` with the `sandbox` argument first (2026-07-28 requests name their cell by it):
// required, and marked x-mcp-header so an HTTP client mirrors it to Mcp-Param-Sandbox,
// which a load balancer routes by to the server that minted the handle.
mcp::Json WithSandboxArgument(mcp::Json schema) {
  mcp::Json required = mcp::Json::array({kSandboxArgument});
  for (const auto& name : schema.value("required", mcp::Json::array())) required.push_back(name);
  schema["properties"][kSandboxArgument] = {
      {"type", "string"},
      {"description",
       "The sandbox handle from sandbox_create (sbx_...): names the cell this call runs in."},
      {"x-mcp-header", "Sandbox"}};
  schema["required"] = std::move(required);
  return schema;
}

// Runs `inner` for a call: in the 2026-07-28 era with the cell its `sandbox` handle names
// (resolved against the caller's tenant, then taken out of the arguments the tool parses
// strictly), in today's era with the session's own cell.
mcp::ToolResult CallInItsCell(const ToolEnv& env, const mcp::ToolHandler& inner,
                              const mcp::Json& args, mcp::Context& ctx) {
  if (!env.resolve_sandbox || !IsNewEraCall(ctx)) return inner(args, ctx);
  const auto handle = args.find(kSandboxArgument);
  if (handle == args.end() || !handle->is_string()) {
    return mcp::ToolResult::Error(std::string("arguments.") + kSandboxArgument +
                                  ": a sandbox handle from sandbox_create is required");
  }
  auto key = env.resolve_sandbox(handle->get<std::string>(), ctx.session().tenant());
  if (!key) return mcp::ToolResult::Error(key.error().message);
  mcp::Json own = args;
  own.erase(std::string(kSandboxArgument));
  CallKeyScope scope(*key);
  // Also when the handler throws: the handle must not stay "in use" (never idle) forever.
  struct CallDone {
    const ToolEnv& env;
    const std::string& key;
    ~CallDone() {
      if (env.sandbox_call_done) env.sandbox_call_done(key);
    }
  } done{env, *key};
  return inner(own, ctx);
}

}  // namespace

mcp::Status RegisterCellTools(mcp::Server& server, const ToolEnv& env) {
  for (const CellToolMaker& maker : kCellTools) {
    if (IsSnapshotTool(maker.name) && !env.snapshots) continue;
    mcp::Tool tool = maker.make(env);
    if (tool.name != maker.name) {
      return mcp::Status::Error("tool " + tool.name + " is registered as " + maker.name);
    }
    // Every result's text and structuredContent strings, with the session's secret values
    // redacted (tools/redaction.h); run_code/run_command also redact their output streams,
    // with the same redactor (CallRedactorScope): the values are read once per call.
    if (env.resolve_sandbox) tool.new_era_input_schema = WithSandboxArgument(tool.input_schema);
    tool.handler = [&env, name = tool.name, inner = std::move(tool.handler)](const mcp::Json& args,
                                                                             mcp::Context& ctx) {
      const auto started = std::chrono::steady_clock::now();
      mcp::ToolResult result = CallInItsCell(
          env,
          [&env, &inner](const mcp::Json& own, mcp::Context& c) {
            CallRedactorScope scope(env.secret_values, CallKey(c));
            // In two statements: the values are read once the call has its cell (a first
            // call's cell gets the session's secrets when it is bound), and the order in
            // which a call's arguments are evaluated is unspecified.
            mcp::ToolResult plain = inner(own, c);
            return RedactResult(std::move(plain), scope.Get().get());
          },
          args, ctx);
      if (env.on_call_done) {
        env.on_call_done(ctx.session(), name, result.is_error,
                         std::chrono::steady_clock::now() - started);
      }
      return result;
    };
    // Registered when any policy served enables it; each session sees its own
    // (ToolEnv::ToolEnabled, through the server's tool_filter).
    bool enabled = false;
    for (const CellToolsConfig* c : env.AllConfigs()) enabled = enabled || c->Enables(tool.name);
    if (!enabled) continue;
    mcp::Status st = server.AddTool(std::move(tool));
    if (!st) return mcp::Status::Error("tool " + std::string(maker.name) + ": " + st.message());
  }
  return mcp::Status::Ok();
}

std::optional<std::string> ToolOffReason(const CellToolsConfig& config, const std::string& name,
                                         bool snapshot_store) {
  if (!config.InToolset(name)) return "tools.toolset = \"" + config.toolset + "\"";
  if (!config.Enables(name)) return std::string("not in tools.enabled");
  if (IsSnapshotTool(name) && !snapshot_store) return std::string("no snapshot store");
  if (auto registry = PackageToolRegistry(name)) return PackageToolOff(config, *registry);
  return std::nullopt;
}

std::vector<ToolOff> ToolsOff(const CellToolsConfig& config, bool snapshot_store) {
  std::vector<ToolOff> off;
  for (const CellToolMaker& maker : kCellTools) {
    if (auto why = ToolOffReason(config, maker.name, snapshot_store))
      off.push_back({maker.name, std::move(*why)});
  }
  return off;
}

std::function<bool(const mcp::Session&, const std::string&)> ServerToolFilter(const ToolEnv& env) {
  return [&env](const mcp::Session& session, const std::string& name) {
    return env.ToolEnabled(session.tenant(), name);
  };
}

std::function<bool(const mcp::Session&, const std::string&)> ServerToolListed(const ToolEnv& env) {
  return [&env](const mcp::Session& session, const std::string& name) {
    const CellToolsConfig* config = env.ConfigFor(session.tenant());
    return config && !ToolOffReason(*config, name, env.snapshots != nullptr);
  };
}

}  // namespace mcpcell::tools
