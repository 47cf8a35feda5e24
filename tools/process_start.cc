#include "tools/process_start.h"

#include "policies/secret_source.h"
#include "tools/audit_events.h"

namespace mcpcell::tools {

std::variant<std::shared_ptr<BackgroundProcess>, mcp::ToolResult> StartBackgroundProcess(
    const ToolEnv& env, mcp::Context& ctx, const sandbox::CellLease& lease,
    const CellToolsConfig& config, const std::string& kind, const ExecCall& call,
    const std::string& command_text) {
  if (!env.processes)
    return mcp::ToolResult::Error(call.tool +
                                  ": this server keeps no background processes (no process "
                                  "table); run the program in the foreground instead");
  ProcessTable& table = *env.processes;
  table.Prune();
  const std::string key = CallKey(ctx);
  if (table.Running(key) >= kMaxBackgroundProcesses) {
    return mcp::ToolResult::Error(
        call.tool + ": this session already has " + std::to_string(kMaxBackgroundProcesses) +
        " background processes running; end one first (process action=list shows them, "
        "action=signal stops one)");
  }
  auto session = SessionCells(env, ctx);
  if (!session) return SandboxError(call.tool, session.error());
  if (Status st = lease.Mkdir(kProcessOutputDir, 0755, /*parents=*/true); !st)
    return SandboxError(call.tool, st.error(),
                        "Could not make the output directory. " + WriteHint(st.error()));
  auto process = std::make_shared<BackgroundProcess>();
  process->id = table.NextId(key);
  process->kind = kind;
  process->command = command_text;
  process->cell_id = lease.id();
  process->session_key = key;
  process->tenant = ctx.session().tenant();
  process->output_path =
      std::string(kProcessOutputDir) + "/" + process->id + "-" + NewCallId() + ".log";
  process->started_at = std::chrono::system_clock::now();

  sandbox::ExecOptions opts;
  opts.argv = call.argv;
  opts.env = EnvStrings(call.options);
  if (auto refused = AddSecretEnv(env, ctx, call, opts.env)) return *refused;
  opts.cwd = call.options.cwd;
  opts.detached_output = process->output_path;
  opts.detached_output_cap = config.max_saved_bytes_per_stream;
  nlohmann::json fields = CommandFields(config, command_text);
  fields["tool"] = call.tool;
  fields["program"] = call.argv.empty() ? "" : call.argv.front();
  fields["background"] = true;
  AuditEvent(env, ctx, lease.id(), "exec.start", fields);
  auto started = lease.Exec(opts);
  for (std::string& var : opts.env) policies::WipeSecret(var);
  if (!started) {
    // Its exec.start has its end: the start failed (a started one's end comes from the table).
    AuditEvent(env, ctx, lease.id(), "exec.end",
               {{"tool", call.tool}, {"background", true}, {"error", started.error().message}});
    return SandboxError(call.tool, started.error(),
                        lease.alive() ? "Check the command, cwd and env."
                                      : "The cell stopped; the next call gets a fresh cell.");
  }
  if (!started->detached) {
    return mcp::ToolResult::Error(call.tool +
                                  ": this server's sandbox backend cannot run background "
                                  "processes; run the program in the foreground instead");
  }
  process->exec = std::move(started->detached);
  table.Add(key, *session, process);
  return process;
}

}  // namespace mcpcell::tools
