// python: a persistent Python interpreter per MCP session (issue 32). The interpreter is a
// background process of the session (process_start.h, kind "python") running the embedded
// driver (python_driver.py) as the sandbox user under the cell's limits. Each call sends
// one framed request on the interpreter's stdin and waits for the driver's answer file;
// its stdout and stderr come from per-call files, read bounded (head and tail) like any
// output. A timeout or a cancellation sends SIGINT (KeyboardInterrupt in the code, the
// state stays); when the code has not stopped kInterruptGrace later, the interpreter is
// killed, the next call starts a new one, and the result says so. Calls of one session
// run one at a time.
#include <signal.h>

#include <map>
#include <mutex>
#include <stop_token>
#include <thread>

#include "base/base64.h"
#include "tools/cell_tools.h"
#include "tools/exec_runner.h"
#include "tools/process_output.h"
#include "tools/process_start.h"
#include "tools/python_driver.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {

constexpr const char* kPythonDir = "/tmp/.mcpcell/python";
constexpr auto kInterruptGrace = std::chrono::seconds(5);
constexpr size_t kMaxCodeBytes = 4 << 20;
constexpr uint64_t kMaxAnswerBytes = 16 << 20;

struct PythonArgs {
  std::string code;
  bool reset = false;
  std::optional<int64_t> timeout_s;
};

Result<PythonArgs> ParsePythonArgs(const mcp::Json& json) {
  ArgReader reader(json, {"code", "reset", "timeout_s"});
  PythonArgs args;
  args.code = reader.OptionalString("code").value_or("");
  args.reset = reader.OptionalBool("reset").value_or(false);
  args.timeout_s = reader.OptionalInteger("timeout_s");
  if (Status st = reader.Finish(); !st) return st.error();
  if (args.code.empty() && !args.reset)
    return Error::Msg("arguments.code: required (or reset=true alone to start afresh)");
  if (args.code.size() > kMaxCodeBytes)
    return Error::Msg("arguments.code: " + std::to_string(args.code.size()) +
                      " bytes is over the limit of " + std::to_string(kMaxCodeBytes) +
                      "; write it to a file with write_file and exec(open(path).read())");
  if (args.timeout_s && *args.timeout_s < 1)
    return Error::Msg("arguments.timeout_s: must be at least 1");
  return args;
}

// One session's interpreter is its slot in the sessions' process table (process_table.h):
// it ends with the session.
using Interpreter = PythonInterpreter;

// The running interpreter's process, started now when there is none; `note` gets a line
// when a previous one is gone.
std::variant<std::shared_ptr<BackgroundProcess>, mcp::ToolResult> EnsureRunning(
    const ToolEnv& env, mcp::Context& ctx, const sandbox::CellLease& lease,
    const CellToolsConfig& config, Interpreter& interp, bool reset, std::string& note) {
  ProcessTable& table = *env.processes;
  const std::string key = CallKey(ctx);
  std::shared_ptr<BackgroundProcess> p = table.Find(key, interp.process_id);
  if (p) {
    ProcessState s = table.Inspect(*p, lease.id());
    if (s.state == "running" && !reset) return p;
    if (s.state == "running") (void)lease.SignalExec(p->exec->exec_id(), SIGKILL);
    if (reset) {
      note = "started a new interpreter (reset=true): earlier variables are gone";
    } else if (!interp.restart_note.empty()) {
      note = interp.restart_note;
    } else {
      note = "the previous interpreter ended (" + s.detail +
             "); a new one started and earlier variables are gone";
    }
  } else if (!interp.restart_note.empty()) {
    note = interp.restart_note;
  }
  interp.restart_note.clear();
  if (Status st = lease.Mkdir(kPythonDir, 0700, /*parents=*/true); !st)
    return SandboxError("python", st.error(), WriteHint(st.error()));
  const std::string driver = std::string(kPythonDir) + "/driver.py";
  if (Status st = lease.WriteFile(driver, kPythonDriverSource, 0600); !st)
    return SandboxError("python", st.error(), WriteHint(st.error()));
  ExecCall call;
  call.tool = "python";
  call.argv = {"python3", "-u", driver};
  call.options.env = {{"MPLBACKEND", "Agg"}, {"PYTHONUNBUFFERED", "1"}};
  auto started = StartBackgroundProcess(env, ctx, lease, config, "python", call,
                                        "python3 (the python tool's interpreter)");
  if (auto* error = std::get_if<mcp::ToolResult>(&started)) return std::move(*error);
  p = std::get<std::shared_ptr<BackgroundProcess>>(started);
  interp.process_id = p->id;
  return p;
}

std::string Frame(const mcp::Json& request) {
  std::string body = request.dump();
  return std::to_string(body.size()) + "\n" + body;
}

// Sends the whole frame (the driver reads while it waits; a full pipe is retried).
Status SendRequest(BackgroundProcess& p, const std::string& frame, const std::stop_token& stop) {
  size_t sent = 0;
  while (sent < frame.size()) {
    auto n = p.exec->WriteStdin(std::string_view(frame).substr(sent));
    if (!n) return n.error().Wrap("send the code to the interpreter");
    sent += *n;
    if (sent < frame.size()) {
      if (stop.stop_requested()) return Error::Msg("cancelled while sending the code");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return Ok();
}

struct CallFiles {
  std::string out, err, answer;
};

enum class Outcome { kAnswered, kDied, kRestarted, kCancelledBeforeStart };

struct Waited {
  Outcome outcome = Outcome::kAnswered;
  bool timed_out = false, cancelled = false;
  std::string detail;  // kDied: how it ended
};

// Polls for the answer file until it is there, the interpreter ends, or (after the timeout
// or a cancellation, SIGINT and kInterruptGrace) the interpreter is killed.
Waited AwaitAnswer(const sandbox::CellLease& lease, ProcessTable& table, BackgroundProcess& p,
                   const CallFiles& files, std::chrono::seconds timeout,
                   const std::stop_token& stop) {
  using Clock = std::chrono::steady_clock;
  Waited w;
  const auto deadline = Clock::now() + timeout;
  std::optional<Clock::time_point> interrupted_at, last_sigint;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    if (lease.Stat(files.answer)) return w;
    ProcessState s = table.Inspect(p, lease.id());
    if (s.state != "running") {
      if (lease.Stat(files.answer)) return w;  // answered, then ended
      w.outcome = Outcome::kDied;
      w.detail = s.detail;
      return w;
    }
    const auto now = Clock::now();
    if (!interrupted_at && (now >= deadline || stop.stop_requested())) {
      w.timed_out = now >= deadline;
      w.cancelled = !w.timed_out;
      interrupted_at = now;
    }
    // SIGINT again each second of the grace: one that came before the driver entered the
    // code (it ignores SIGINT outside the code) must not cost the interpreter.
    if (interrupted_at && (!last_sigint || now - *last_sigint >= std::chrono::seconds(1))) {
      last_sigint = now;
      (void)lease.SignalExec(p.exec->exec_id(), SIGINT);
    }
    if (interrupted_at && now - *interrupted_at > kInterruptGrace) {
      (void)lease.SignalExec(p.exec->exec_id(), SIGKILL);
      w.outcome = Outcome::kRestarted;
      return w;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

std::string StreamText(const sandbox::CellLease& lease, const std::string& path, size_t keep,
                       const char* name) {
  auto w = ReadProcessOutput(lease, path, 0, keep, name);
  if (!w) return "";
  return w->text;
}

mcp::ToolResult BuildAnswer(const sandbox::CellLease& lease, const CallFiles& files,
                            const Waited& w, size_t keep, const std::string& note) {
  uint64_t size = 0;
  auto raw = ReadCellFile(lease, files.answer, kMaxAnswerBytes, &size);
  if (!raw) return SandboxError("python", raw.error(), "The interpreter's answer was lost.");
  mcp::Json answer = mcp::Json::parse(*raw, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object())
    return mcp::ToolResult::Error(
        "python: the interpreter's answer is not JSON (was "
        "/tmp/.mcpcell/python changed by the code?)");
  std::string out = StreamText(lease, files.out, keep, "stdout");
  std::string err = StreamText(lease, files.err, keep, "stderr");
  const std::string result =
      answer.value("result", mcp::Json()).is_string() ? answer["result"].get<std::string>() : "";
  const std::string error =
      answer.value("error", mcp::Json()).is_string() ? answer["error"].get<std::string>() : "";
  std::string text;
  if (!note.empty()) text += "note: " + note + "\n";
  if (w.timed_out)
    text +=
        "timed out: the code was interrupted (KeyboardInterrupt); variables "
        "and imports are kept\n";
  if (w.cancelled)
    text +=
        "cancelled: the code was interrupted (KeyboardInterrupt); variables "
        "and imports are kept\n";
  if (!out.empty()) text += "--- stdout ---\n" + out + (out.back() == '\n' ? "" : "\n");
  if (!err.empty()) text += "--- stderr ---\n" + err + (err.back() == '\n' ? "" : "\n");
  if (!error.empty()) text += "--- error ---\n" + error;
  if (!result.empty()) text += result + "\n";
  if (text.empty()) text = "(no output)\n";
  mcp::ToolResult r = mcp::ToolResult::Text(std::move(text));
  const mcp::Json& images = answer.value("images", mcp::Json::array());
  for (const auto& image : images)
    if (image.is_string())
      r.content.push_back({{"type", "image"}, {"data", image}, {"mimeType", "image/png"}});
  for (const auto& n : answer.value("notes", mcp::Json::array()))
    if (n.is_string()) r.AddText("note: " + n.get<std::string>());
  r.structured_content = {{"stdout", out},
                          {"stderr", err},
                          {"result", result},
                          {"error", error},
                          {"interrupted", answer.value("interrupted", false)},
                          {"timed_out", w.timed_out},
                          {"images", images.size()}};
  r.is_error = !error.empty();
  return r;
}

mcp::ToolResult RunPython(const ToolEnv& env, mcp::Context& ctx, const PythonArgs& args) {
  auto stop = std::make_shared<std::stop_source>();
  ctx.OnCancel([stop] { stop->request_stop(); });
  if (!env.processes)
    return mcp::ToolResult::Error(
        "python: this server keeps no background processes (no process table) for the "
        "interpreter; use run_code");
  std::shared_ptr<Interpreter> interp = env.processes->Interpreter(CallKey(ctx));
  std::lock_guard serial(interp->mu);
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const sandbox::CellLease& lease = *acquired.lease;
  const CellToolsConfig& config = *acquired.config;
  if (args.timeout_s && std::chrono::seconds(*args.timeout_s) > config.max_timeout)
    return mcp::ToolResult::Error("arguments.timeout_s: " + std::to_string(*args.timeout_s) +
                                  " is over this session's maximum of " +
                                  std::to_string(config.max_timeout.count()) + " s");
  std::stop_callback on_close(lease.stop_token(), [stop] { stop->request_stop(); });
  std::string note;
  auto running = EnsureRunning(env, ctx, lease, config, *interp, args.reset, note);
  if (auto* error = std::get_if<mcp::ToolResult>(&running)) return std::move(*error);
  BackgroundProcess& p = *std::get<std::shared_ptr<BackgroundProcess>>(running);
  if (args.code.empty()) {
    mcp::ToolResult r =
        mcp::ToolResult::Text((note.empty() ? "started a new interpreter" : note) + "\n");
    r.structured_content = {{"note", note.empty() ? "started a new interpreter" : note}};
    return r;
  }
  const std::string base =
      std::string(kPythonDir) + "/call-" + std::to_string(interp->next_request);
  CallFiles files{base + ".stdout", base + ".stderr", base + ".json"};
  mcp::Json request = {{"id", interp->next_request++},
                       {"code", args.code},
                       {"stdout", files.out},
                       {"stderr", files.err},
                       {"response", files.answer}};
  if (Status st = SendRequest(p, Frame(request), stop->get_token()); !st)
    return SandboxError("python", st.error(),
                        "The interpreter is not reading; call again "
                        "with reset=true.");
  Waited w =
      AwaitAnswer(lease, *env.processes, p, files,
                  args.timeout_s ? std::chrono::seconds(*args.timeout_s) : config.default_timeout,
                  stop->get_token());
  mcp::ToolResult result;
  if (w.outcome == Outcome::kAnswered) {
    result = BuildAnswer(lease, files, w, config.keep_bytes_per_stream, note);
  } else if (w.outcome == Outcome::kDied) {
    result = mcp::ToolResult::Error(
        "python: the interpreter " + w.detail +
        " while running this code (out of memory, "
        "os._exit or a crash?); its variables are gone, and the next call starts a new one.\n" +
        StreamText(lease, files.err, config.keep_bytes_per_stream, "stderr"));
  } else {
    // The killed interpreter is not used again, also before its exit is reported.
    (void)p.exec->Poll(kInterruptGrace);
    interp->process_id.clear();
    interp->restart_note =
        "the interpreter was restarted: the previous call's code did not "
        "stop on KeyboardInterrupt; earlier variables are gone";
    result = mcp::ToolResult::Error(std::string(w.timed_out ? "timed out" : "cancelled") +
                                    ": the code did not stop on KeyboardInterrupt within " +
                                    std::to_string(kInterruptGrace.count()) +
                                    " s, so the interpreter was killed; the next "
                                    "call starts a new one (earlier variables are gone).");
  }
  for (const std::string& f : {files.out, files.err, files.answer}) (void)lease.Remove(f);
  if (w.timed_out || w.cancelled) result.is_error = true;
  return result;
}

mcp::Json PythonOutputSchema() {
  auto string = [](const char* d) { return mcp::Json{{"type", "string"}, {"description", d}}; };
  auto boolean = [](const char* d) { return mcp::Json{{"type", "boolean"}, {"description", d}}; };
  return {{"type", "object"},
          {"properties",
           {{"note", string("a new interpreter started, and why (earlier state is gone)")},
            {"stdout", string("what the code wrote to stdout (head and tail when long)")},
            {"stderr", string("what the code wrote to stderr (head and tail when long)")},
            {"result", string("repr of the final expression's value; empty when none")},
            {"error", string("the exception's traceback; empty when none")},
            {"interrupted", boolean("KeyboardInterrupt stopped the code")},
            {"timed_out", boolean("timeout_s passed and the code was interrupted")},
            {"images",
             {{"type", "integer"}, {"description", "matplotlib figures returned as images"}}}}},
          {"additionalProperties", false}};
}

mcp::Json PythonInputSchema(const ToolEnv& env) {
  return {{"type", "object"},
          {"properties",
           {{"code",
             {{"type", "string"},
              {"maxLength", kMaxCodeBytes},
              {"description", "Python code; the value of a final expression is returned"}}},
            {"reset",
             {{"type", "boolean"},
              {"description", "true: start a fresh interpreter first (all state is lost)"}}},
            {"timeout_s", TimeoutSchema(env)}}},
          {"additionalProperties", false}};
}

}  // namespace

mcp::Tool MakePythonTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "python";
  tool.title = "Persistent Python";
  tool.description =
      "Runs Python code in a persistent interpreter of this session's sandbox: variables, "
      "imports and open files stay between calls. Returns stdout, stderr, the repr of a final "
      "expression, and any matplotlib figures as PNG images (no plt.show() needed). A timeout "
      "or a cancellation interrupts the code (KeyboardInterrupt) and keeps the state; "
      "reset=true starts afresh. cwd is /workspace.";
  tool.input_schema = PythonInputSchema(env);
  tool.output_schema = PythonOutputSchema();
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto args = ParsePythonArgs(json);
    if (!args) return mcp::ToolResult::Error(args.error().message);
    return RunPython(env, ctx, *args);
  };
  return tool;
}

}  // namespace mcpcell::tools
