// process: the background processes of this session (process_table.h): list, output (new
// output since a cursor), write (stdin), signal, wait. Arguments are checked per action: a
// field that the action does not take is refused, naming the action that takes it.
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <stop_token>
#include <thread>

#include "base/utf8.h"
#include "tools/cell_tools.h"
#include "tools/exec_runner.h"
#include "tools/process_output.h"
#include "tools/process_table.h"
#include "tools/tool_args.h"
#include "tools/workspace_resources.h"

namespace mcpcell::tools {
namespace {

constexpr const char* kActions[] = {"list", "output", "write", "signal", "wait"};
constexpr int64_t kDefaultWaitSeconds = 30;
constexpr size_t kMaxWriteBytes = 1 << 20;

struct ProcessArgs {
  std::string action;
  std::string id;
  std::optional<int64_t> cursor;
  std::optional<std::string> data;
  bool eof = false;
  int signo = SIGTERM;
  std::optional<int64_t> timeout_s;
};

Result<int> ParseSignal(const std::string& name) {
  std::string bare = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  for (const char* allowed :
       {"TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT"}) {
    if (bare != allowed) continue;
    for (int signo = 1; signo < NSIG; ++signo) {
      const char* abbrev = sigabbrev_np(signo);
      if (abbrev && bare == abbrev) return signo;
    }
  }
  return Error::Msg("arguments.signal: unknown signal \"" + name +
                    "\"; use one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, "
                    "SIGUSR2, SIGSTOP, SIGCONT");
}

// Which fields each action takes besides `action` (and `id`, which all but list need).
Status CheckFieldsOfAction(const mcp::Json& json, const std::string& action) {
  static const std::pair<const char*, std::vector<std::string>> kOwners[] = {
      {"cursor", {"output", "wait"}},
      {"data", {"write"}},
      {"eof", {"write"}},
      {"signal", {"signal"}},
      {"timeout_s", {"wait"}},
      {"id", {"output", "write", "signal", "wait"}}};
  for (const auto& [field, actions] : kOwners) {
    if (!json.contains(field)) continue;
    if (std::find(actions.begin(), actions.end(), action) != actions.end()) continue;
    std::string list;
    for (const std::string& a : actions) list += (list.empty() ? "" : ", ") + a;
    return Error::Msg(std::string("arguments.") + field + ": not taken by action=" + action +
                      " (only by " + list + ")");
  }
  return Ok();
}

Result<ProcessArgs> ParseProcessArgs(const mcp::Json& json) {
  ArgReader reader(json, {"action", "id", "cursor", "data", "eof", "signal", "timeout_s"});
  ProcessArgs args;
  args.action = reader.String("action");
  args.id = reader.OptionalString("id").value_or("");
  args.cursor = reader.OptionalInteger("cursor");
  args.data = reader.OptionalString("data");
  args.eof = reader.OptionalBool("eof").value_or(false);
  std::optional<std::string> signal = reader.OptionalString("signal");
  args.timeout_s = reader.OptionalInteger("timeout_s");
  if (Status st = reader.Finish(); !st) return st.error();
  if (std::find_if(std::begin(kActions), std::end(kActions),
                   [&](const char* a) { return args.action == a; }) == std::end(kActions))
    return Error::Msg("arguments.action: unknown action \"" + args.action +
                      "\"; use list, output, write, signal or wait");
  if (Status st = CheckFieldsOfAction(json, args.action); !st) return st.error();
  if (args.action != "list" && args.id.empty())
    return Error::Msg("arguments.id: required for action=" + args.action +
                      " (the id run_command background=true returned; action=list shows them)");
  if (args.cursor && *args.cursor < 0)
    return Error::Msg("arguments.cursor: " + std::to_string(*args.cursor) +
                      " is negative; pass a next_cursor from an earlier result, or 0");
  if (args.action == "write" && !args.data && !args.eof)
    return Error::Msg("arguments.data: action=write needs data, or eof=true to close stdin");
  if (args.data && args.data->size() > kMaxWriteBytes)
    return Error::Msg("arguments.data: " + std::to_string(args.data->size()) +
                      " bytes is more than one write takes (" + std::to_string(kMaxWriteBytes) +
                      "); send it in parts");
  if (signal) {
    auto signo = ParseSignal(*signal);
    if (!signo) return signo.error();
    args.signo = *signo;
  }
  if (args.timeout_s && *args.timeout_s < 0)
    return Error::Msg("arguments.timeout_s: must be >= 0 (0: only look)");
  return args;
}

mcp::Json StateJson(const BackgroundProcess& p, const ProcessState& s) {
  mcp::Json j = {
      {"id", p.id},       {"kind", p.kind},     {"command", ToValidUtf8(p.command.substr(0, 200))},
      {"state", s.state}, {"detail", s.detail}, {"output_path", p.output_path}};
  if (s.state == "exited") j["exit_code"] = s.exit_code;
  if (s.state == "killed") j["signal"] = s.signal;
  return j;
}

// Shared by the actions that act on one process.
struct Target {
  std::shared_ptr<BackgroundProcess> process;
  std::string cell_id;  // the session's cell now
};

mcp::ToolResult List(ProcessTable& table, const std::string& key, const sandbox::CellLease& lease) {
  mcp::Json items = mcp::Json::array();
  std::string text;
  for (const auto& p : table.List(key)) {
    ProcessState s = table.Inspect(*p, lease.id());
    items.push_back(StateJson(*p, s));
    text += p->id + " [" + p->kind + "] " + s.detail + ": " +
            ToValidUtf8(p->command.substr(0, 200)) + "\n";
  }
  if (text.empty()) text = "no background processes (start one with run_command background=true)\n";
  mcp::ToolResult result = mcp::ToolResult::Text(std::move(text));
  result.structured_content = {{"processes", items}};
  return result;
}

mcp::ToolResult OutputResult(const ToolEnv& env, const mcp::Context& ctx, const Target& t,
                             const ProcessState& s, const sandbox::CellLease& lease,
                             std::optional<int64_t> cursor) {
  ProcessTable& table = *env.processes;
  uint64_t from = cursor ? static_cast<uint64_t>(*cursor) : table.Cursor(*t.process);
  const CellToolsConfig* config = SessionConfig(env, ctx);
  size_t keep = config ? config->keep_bytes_per_stream : env.config.keep_bytes_per_stream;
  auto window = ReadProcessOutput(lease, t.process->output_path, from, keep, t.process->id);
  if (!window) return mcp::ToolResult::Error(window.error().message);
  table.SetCursor(*t.process, window->next_cursor);
  std::string text = t.process->id + ": " + s.detail + "\n";
  text += "--- output from byte " + std::to_string(from) + " to " +
          std::to_string(window->next_cursor) + " (next_cursor " +
          std::to_string(window->next_cursor) + ") ---\n";
  text += window->text.empty() ? "(no new output)\n" : window->text;
  if (!window->text.empty() && window->text.back() != '\n') text += "\n";
  mcp::ToolResult result = mcp::ToolResult::Text(std::move(text));
  mcp::Json j = StateJson(*t.process, s);
  j["output"] = window->text;
  j["cursor"] = from;
  j["next_cursor"] = window->next_cursor;
  j["output_bytes"] = window->file_size;
  j["truncated"] = window->left_out > 0;
  result.structured_content = std::move(j);
  // All of it, to open with resources/read in byte windows (workspace_resources.h).
  result.content.push_back(
      WorkspaceResourceLink(t.process->output_path, "text/plain", window->file_size,
                            "all output of background process " + t.process->id + " so far"));
  return result;
}

mcp::ToolResult Write(const Target& t, const ProcessArgs& args) {
  auto& exec = *t.process->exec;
  size_t written = 0;
  if (args.data) {
    // A full pipe (the process is not reading) is retried briefly, then reported.
    for (int attempt = 0; attempt < 100 && written < args.data->size(); ++attempt) {
      auto n = exec.WriteStdin(std::string_view(*args.data).substr(written));
      if (!n) {
        std::string why = n.error().err == EPIPE   ? "the process closed its stdin"
                          : n.error().err == EBADF ? "its stdin was closed (eof=true earlier)"
                                                   : n.error().message;
        return mcp::ToolResult::Error("process write " + t.process->id + ": " + why + "; " +
                                      std::to_string(written) + " bytes were written");
      }
      written += *n;
      if (written < args.data->size()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (written < args.data->size())
      return mcp::ToolResult::Error(
          "process write " + t.process->id + ": " + std::to_string(written) + " of " +
          std::to_string(args.data->size()) +
          " bytes were written; its stdin pipe is full (the process is not reading it). Send "
          "the rest later, starting at byte " +
          std::to_string(written) + " of your data");
  }
  if (args.eof) exec.CloseStdin();
  mcp::ToolResult result = mcp::ToolResult::Text(
      "wrote " + std::to_string(written) + " bytes to " + t.process->id + "'s stdin" +
      (args.eof ? "; stdin closed (the process reads EOF)" : ""));
  result.structured_content = {
      {"id", t.process->id}, {"bytes_written", written}, {"stdin_open", exec.stdin_open()}};
  return result;
}

mcp::ToolResult Signal(const Target& t, const ProcessArgs& args, const sandbox::CellLease& lease,
                       const ProcessState& s) {
  const std::string name = std::string("SIG") + sigabbrev_np(args.signo);
  if (s.state != "running")
    return mcp::ToolResult::Error("process signal " + t.process->id + ": not running (" + s.detail +
                                  "); nothing to signal");
  Status st = lease.SignalExec(t.process->exec->exec_id(), args.signo);
  if (!st) {
    return mcp::ToolResult::Error(
        "process signal " + t.process->id + ": " + st.error().message +
        (st.error().err == ESRCH ? " (it has just exited; action=wait shows how)" : ""));
  }
  mcp::ToolResult result = mcp::ToolResult::Text(
      "sent " + name + " to " + t.process->id +
      "'s process group. Next: action=wait id=" + t.process->id + " to see it end.");
  result.structured_content = {{"id", t.process->id}, {"signal", name}};
  return result;
}

mcp::ToolResult Process(const ToolEnv& env, mcp::Context& ctx, const ProcessArgs& args) {
  if (!env.processes)
    return mcp::ToolResult::Error(
        "process: this server keeps no background processes (no process table)");
  ProcessTable& table = *env.processes;
  table.Prune();
  const std::string key = CallKey(ctx);
  std::shared_ptr<BackgroundProcess> process;
  if (args.action != "list") {
    process = table.Find(key, args.id);
    if (!process)
      return mcp::ToolResult::Error("arguments.id: no background process \"" + args.id +
                                    "\" in this session; action=list shows the ids");
  }
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const sandbox::CellLease& lease = *acquired.lease;
  if (args.action == "list") return List(table, key, lease);
  Target t{std::move(process), lease.id()};
  if (args.action == "write") return Write(t, args);
  if (args.action == "signal") return Signal(t, args, lease, table.Inspect(*t.process, t.cell_id));
  if (args.action == "output")
    return OutputResult(env, ctx, t, table.Inspect(*t.process, t.cell_id), lease, args.cursor);
  // wait: until it ends, the timeout, a cancellation or the session's end.
  const CellToolsConfig& config = *acquired.config;
  int64_t seconds =
      args.timeout_s.value_or(std::min<int64_t>(kDefaultWaitSeconds, config.max_timeout.count()));
  if (seconds > config.max_timeout.count())
    return mcp::ToolResult::Error("arguments.timeout_s: " + std::to_string(seconds) +
                                  " is over this session's maximum of " +
                                  std::to_string(config.max_timeout.count()) + " s");
  auto stop = std::make_shared<std::stop_source>();
  ctx.OnCancel([stop] { stop->request_stop(); });
  std::stop_callback on_close(lease.stop_token(), [stop] { stop->request_stop(); });
  ProcessState s =
      table.Inspect(*t.process, t.cell_id, std::chrono::seconds(seconds), stop->get_token());
  if (s.state == "running" && stop->stop_requested())
    return mcp::ToolResult::Error("process wait " + t.process->id +
                                  ": cancelled; the process still runs");
  if (s.state == "running") s.detail += "; still running after " + std::to_string(seconds) + " s";
  return OutputResult(env, ctx, t, s, lease, args.cursor);
}

// One schema for every action's result (each fills the fields of its own).
mcp::Json ProcessOutputSchema() {
  auto string = [](const char* d) { return mcp::Json{{"type", "string"}, {"description", d}}; };
  auto integer = [](const char* d) { return mcp::Json{{"type", "integer"}, {"description", d}}; };
  auto boolean = [](const char* d) { return mcp::Json{{"type", "boolean"}, {"description", d}}; };
  return {{"type", "object"},
          {"properties",
           {{"processes",
             {{"type", "array"},
              {"items", {{"type", "object"}}},
              {"description", "list: the session's processes, each as the fields below"}}},
            {"id", string("the process id")},
            {"kind", string("command (run_command) or python (the python tool)")},
            {"command", string("what was started (first 200 bytes)")},
            {"state", string("running, exited, killed or stopped (its cell ended)")},
            {"detail", string("the state in words")},
            {"exit_code", integer("exited: its exit status")},
            {"signal", string("killed: the signal; signal: the signal sent")},
            {"output_path", string("the cell file with its stdout and stderr")},
            {"output", string("output/wait: the output from cursor on (head and tail when long)")},
            {"cursor", integer("output/wait: where this read started")},
            {"next_cursor", integer("output/wait: where the next read starts")},
            {"output_bytes", integer("output/wait: the output's size so far")},
            {"truncated", boolean("output/wait: the middle of the new output was left out")},
            {"bytes_written", integer("write: bytes that went to its stdin")},
            {"stdin_open", boolean("write: its stdin is still open")}}}};
}

mcp::Json ProcessInputSchema(const ToolEnv& env) {
  mcp::Json actions = mcp::Json::array();
  for (const char* a : kActions) actions.push_back(a);
  return {{"type", "object"},
          {"properties",
           {{"action",
             {{"type", "string"},
              {"enum", actions},
              {"description",
               "list: every background process of this session; output: new output since "
               "cursor; write: data to its stdin; signal: send a signal; wait: until it "
               "exits or timeout_s passes, then its new output"}}},
            {"id", {{"type", "string"}, {"description", "the process id (not for list)"}}},
            {"cursor",
             {{"type", "integer"},
              {"minimum", 0},
              {"description",
               "output/wait: byte offset to read from (a next_cursor of an earlier result; 0: "
               "from the start). Default: where this session's last read stopped"}}},
            {"data", {{"type", "string"}, {"description", "write: text for its stdin"}}},
            {"eof", {{"type", "boolean"}, {"description", "write: close its stdin after data"}}},
            {"signal",
             {{"type", "string"},
              {"description", "signal: SIGTERM (default), SIGKILL, SIGINT, SIGHUP, ..."}}},
            {"timeout_s",
             {{"type", "integer"},
              {"minimum", 0},
              {"maximum", TimeoutSchema(env)["maximum"]},
              {"description", "wait: seconds to wait at most (default 30; 0: only look)"}}}}},
          {"required", {"action"}},
          {"additionalProperties", false}};
}

}  // namespace

std::pair<std::string, nlohmann::json> DescribeBackgroundProcesses(ProcessTable* table,
                                                                   const std::string& key,
                                                                   const std::string& cell_id) {
  std::string text;
  nlohmann::json items = nlohmann::json::array();
  if (!table) return {std::move(text), std::move(items)};
  for (const auto& p : table->List(key)) {
    ProcessState s = table->Inspect(*p, cell_id);
    items.push_back(StateJson(*p, s));
    text += "background process " + p->id + " [" + p->kind + "]: " + s.detail + "\n";
  }
  return {std::move(text), std::move(items)};
}

mcp::Tool MakeProcessTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "process";
  tool.title = "Background processes";
  tool.description =
      "Manages the background processes of this session (started by run_command with "
      "background=true; the python tool's interpreter is one too): list them, read their "
      "new output (stdout and stderr interleaved, kept in the cell, so it can be read after a "
      "reconnect), write to their stdin, send a signal, or wait for the exit.";
  tool.input_schema = ProcessInputSchema(env);
  tool.output_schema = ProcessOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto args = ParseProcessArgs(json);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return Process(env, ctx, *args);
  };
  return tool;
}

}  // namespace mcpcell::tools
