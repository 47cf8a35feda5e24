#include "tools/exec_runner.h"

#include <signal.h>
#include <string.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <stop_token>

#include "policies/secret_source.h"
#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"
#include "tools/output_capture.h"
#include "tools/progress_streamer.h"
#include "tools/redaction.h"
#include "tools/workspace_resources.h"

namespace mcpcell::tools {
namespace {

using sandbox::OutputStream;

// Saves one stream's full output in the cell once it outgrows what the result keeps.
// Until then it only buffers (most outputs are small and never touch the disk).
class OutputSaver {
 public:
  OutputSaver(const sandbox::CellLease& channel, std::string path, size_t keep, size_t cap)
      : channel_(channel), path_(std::move(path)), keep_(keep), cap_(cap) {}

  void Append(std::string_view chunk) {
    if (failed_ || written_ + buffer_.size() >= cap_) {
      cut_ = cut_ || !chunk.empty();
      return;
    }
    size_t room = cap_ - written_ - buffer_.size();
    if (chunk.size() > room) cut_ = true;
    buffer_.append(chunk.substr(0, room));
    if (!active_ && buffer_.size() > keep_) active_ = true;
    if (active_ && buffer_.size() >= kFlushBytes) Flush();
  }

  // Returns the path when the output was saved, else "".
  std::string Finish() {
    if (!active_) return "";
    kept_ = written_ + buffer_.size();
    if (cut_) buffer_ += "\n[mcpcell: output cut here: the saved copy is capped]\n";
    Flush();
    return failed_ ? "" : path_;
  }
  const std::string& error() const { return error_; }
  // How much of the output the saved copy holds when it was capped (0: all of it).
  uint64_t capped_at() const { return cut_ ? kept_ : 0; }
  // The saved file's size after Finish (its resource_link's size).
  uint64_t saved_bytes() const { return written_; }

 private:
  static constexpr size_t kFlushBytes = 512 * 1024;
  void Flush() {
    if (failed_ || buffer_.empty()) return;
    Status st = channel_.WriteFileAt(path_, written_, buffer_, /*truncate=*/written_ == 0);
    if (!st) {
      failed_ = true;
      error_ = st.error().message;
      return;
    }
    written_ += buffer_.size();
    buffer_.clear();
  }

  const sandbox::CellLease& channel_;
  std::string path_;
  size_t keep_, cap_;
  std::string buffer_;
  uint64_t written_ = 0, kept_ = 0;  // kept_: the output's bytes saved (set by Finish)
  bool active_ = false, failed_ = false, cut_ = false;
  std::string error_;
};

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

struct Rendered {
  std::string out, err, out_path, err_path;
  uint64_t out_saved = 0, err_saved = 0;  // the saved files' sizes
  // The egress proxy's refusals during the call: clients such as `curl -f` or one whose
  // CONNECT was refused print only the status, so the reason is shown here.
  std::vector<std::string> egress_refusals;
};

mcp::ToolResult BuildResult(const ExecCall& call, const sandbox::ExecResult& r,
                            const OutputCapture& out, const OutputCapture& err,
                            const Rendered& text, std::chrono::seconds timeout,
                            const std::string& replaced) {
  int64_t duration_ms = r.wall_time.count() / 1000;
  int64_t cpu_ms = (r.user_cpu + r.system_cpu).count() / 1000;
  mcp::Json s = {
      {"exit_code", r.signaled ? -1 : r.exit_code},
      {"signal", r.signaled ? SignalName(r.signo) : ""},
      {"stdout", text.out},
      {"stderr", text.err},
      {"stdout_truncated", out.truncated()},
      {"stderr_truncated", err.truncated()},
      {"stdout_bytes", out.total()},
      {"stderr_bytes", err.total()},
      {"full_stdout_path", text.out_path},
      {"full_stderr_path", text.err_path},
      {"timed_out", r.timed_out},
      {"oom_killed", r.oom_killed},
      {"duration_ms", duration_ms},
      {"cpu_ms", cpu_ms},
      {"peak_memory_bytes", r.peak_memory_bytes},
  };
  std::string head;
  if (!replaced.empty()) head += "note: " + replaced + "\n";
  bool is_error = false;
  if (r.timed_out) {
    is_error = true;
    head += "timed out after " + std::to_string(timeout.count()) +
            " s: the whole process group was killed. Run it with a larger timeout_s, in "
            "the background (run_command background=true, then the process tool), or make it "
            "faster.\n";
  } else if (r.oom_killed) {
    is_error = true;
    head +=
        "killed: out of memory (the cell's memory limit). Use less memory, e.g. process "
        "the data in chunks.\n";
  } else if (r.signaled && r.signo == SIGXFSZ) {
    // RLIMIT_FSIZE: the program wrote past the cell's file-size limit; the kernel's
    // default action for SIGXFSZ ends it. A limit of the cell, so the tool failed.
    is_error = true;
    head +=
        "killed by SIGXFSZ: a file grew past the cell's file-size limit (see session_info). "
        "Write less, or split the output over several files.\n";
  } else if (r.signaled) {
    head += "killed by " + SignalName(r.signo) + "\n";
  } else if (r.exit_code == 128 + SIGXFSZ) {
    // The shell's way of saying a child of it died of SIGXFSZ (or the program chose 153).
    head += "exit code: " + std::to_string(r.exit_code) +
            " (128 + SIGXFSZ: a process may have been killed for writing a file past the "
            "cell's file-size limit; see session_info)\n";
  } else {
    head += "exit code: " + std::to_string(r.exit_code) + "\n";
  }
  head += "duration: " + std::to_string(duration_ms) + " ms, cpu: " + std::to_string(cpu_ms) +
          " ms, peak memory: " + HumanBytes(r.peak_memory_bytes) + "\n";
  auto section = [&](const char* name, const std::string& body, uint64_t total) {
    if (total == 0) return std::string(name) + ": (empty)\n";
    std::string t = std::string("--- ") + name + " (" + std::to_string(total) + " bytes) ---\n";
    t += body;
    if (!body.empty() && body.back() != '\n') t += '\n';
    return t;
  };
  head += section("stdout", text.out, out.total());
  head += section("stderr", text.err, err.total());
  if (!text.egress_refusals.empty()) {
    head += "--- egress refused (the cell's network proxy; see session_info) ---\n";
    for (const std::string& line : text.egress_refusals) head += line + "\n";
    s["egress_refusals"] = text.egress_refusals;
  }
  mcp::ToolResult result = mcp::ToolResult::Text(std::move(head));
  // The saved copies as links a client can open (resources/read, in byte windows) without
  // a tool call: workspace_resources.h.
  if (!text.out_path.empty())
    result.content.push_back(WorkspaceResourceLink(text.out_path, "text/plain", text.out_saved,
                                                   "full stdout of this " + call.tool + " call"));
  if (!text.err_path.empty())
    result.content.push_back(WorkspaceResourceLink(text.err_path, "text/plain", text.err_saved,
                                                   "full stderr of this " + call.tool + " call"));
  result.structured_content = std::move(s);
  result.is_error = is_error;
  return result;
}

// The session's own limit: the schema allows the largest maximum of any policy served.
std::optional<mcp::ToolResult> TimeoutOverSessionMax(const CellToolsConfig* session_config,
                                                     const std::optional<int64_t>& timeout_s) {
  if (!session_config || !timeout_s ||
      std::chrono::seconds(*timeout_s) <= session_config->max_timeout)
    return std::nullopt;
  return mcp::ToolResult::Error(
      "arguments.timeout_s: " + std::to_string(*timeout_s) + " is over this session's maximum of " +
      std::to_string(session_config->max_timeout.count()) + " s (policy " +
      session_config->policy_name + "); ask for at most that");
}

// The call's files (run_code's source), with their directories, before the program runs.
std::optional<mcp::ToolResult> WriteCallFiles(const sandbox::CellLease& channel,
                                              const ExecCall& call) {
  for (const auto& [path, content] : call.files) {
    auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      Status st = channel.Mkdir(path.substr(0, slash), 0755, /*parents=*/true);
      if (!st) return SandboxError(call.tool, st.error());
    }
    Status st = channel.WriteFile(path, content, 0644);
    if (!st) return SandboxError(call.tool, st.error(), "Could not write the code into the cell.");
  }
  return std::nullopt;
}

// exec.start's fields: the tool, the program (run_code's interpreter, run_command's shell)
// and the command text's SHA-256 (the text itself with [audit] commands = "full"). The
// command text is what the model sent: run_code's code (argv's last element, or the source
// file when it was too long for argv) and run_command's command (`sh -c`'s argument).
nlohmann::json ExecStartFields(const CellToolsConfig& config, const ExecCall& call) {
  std::string text;
  if (!call.files.empty()) {
    text = call.files.front().second;
  } else if (!call.argv.empty()) {
    text = call.argv.back();
  }
  nlohmann::json fields = CommandFields(config, text);
  fields["tool"] = call.tool;
  fields["program"] = call.argv.empty() ? "" : call.argv.front();
  return fields;
}

nlohmann::json ExecEndFields(const ExecCall& call, const sandbox::ExecResult& r) {
  return {{"tool", call.tool},
          {"exit_status", r.signaled ? -1 : r.exit_code},
          {"signal", r.signaled ? SignalName(r.signo) : ""},
          {"timed_out", r.timed_out},
          {"cancelled", r.cancelled},
          {"oom_killed", r.oom_killed},
          {"duration_ms", r.wall_time.count() / 1000},
          {"cpu_ms", (r.user_cpu + r.system_cpu).count() / 1000},
          {"peak_memory_bytes", r.peak_memory_bytes}};
}

}  // namespace

// The session's granted secrets (secrets_view.h) first, then the call's own variables; a
// call may not set a secret's name (the placeholder or value is the operator's to give).
std::optional<mcp::ToolResult> AddSecretEnv(const ToolEnv& env, const mcp::Context& ctx,
                                            const ExecCall& call, std::vector<std::string>& out) {
  if (!env.secrets) return std::nullopt;
  const std::string key = CallKey(ctx);
  for (const std::string& name : env.secrets->Names(key)) {
    for (const auto& [var, value] : call.options.env) {
      if (var != name) continue;
      return mcp::ToolResult::Error("arguments.env." + name + ": " + name +
                                    " is a secret the operator granted to this session and "
                                    "cannot be set by a call (session_info lists the secrets)");
    }
  }
  auto granted = env.secrets->ExecEnv(key);
  if (!granted) {
    return mcp::ToolResult::Error(granted.error().message +
                                  "; the program was not run (report this to the operator)");
  }
  out.insert(out.begin(), granted->begin(), granted->end());
  return std::nullopt;
}

std::string NewCallId() {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld-%llu",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

mcp::ToolResult RunInCell(const ToolEnv& env, mcp::Context& ctx, const ExecCall& call) {
  const std::optional<int64_t>& timeout_s = call.options.timeout_s;
  if (auto over = TimeoutOverSessionMax(SessionConfig(env, ctx), timeout_s)) return *over;
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  const CellToolsConfig& config = *acquired.config;
  auto timeout = timeout_s ? std::chrono::seconds(*timeout_s) : config.default_timeout;
  sandbox::CellLease& lease = *acquired.lease;
  sandbox::CellLease& channel = lease;

  if (auto error = WriteCallFiles(channel, call)) return *error;

  // Cancellation by the client, and the session closing, both kill the process group.
  auto stop = std::make_shared<std::stop_source>();
  ctx.OnCancel([stop] { stop->request_stop(); });
  std::stop_callback on_close(lease.stop_token(), [stop] { stop->request_stop(); });

  const uint64_t refusals_before = env.egress ? env.egress->RefusalCursor(lease.id()) : 0;
  const std::string id = NewCallId();
  const std::string dir = std::string(kOutputDir) + "/" + call.tool + "-" + id;
  OutputCapture out(config.keep_bytes_per_stream), err(config.keep_bytes_per_stream);
  OutputSaver out_saver(channel, dir + ".stdout", config.keep_bytes_per_stream,
                        config.max_saved_bytes_per_stream);
  OutputSaver err_saver(channel, dir + ".stderr", config.keep_bytes_per_stream,
                        config.max_saved_bytes_per_stream);
  bool made_dir = false;
  ProgressStreamer progress(ctx, config);

  sandbox::ExecOptions opts;
  opts.argv = call.argv;
  opts.env = EnvStrings(call.options);
  if (auto refused = AddSecretEnv(env, ctx, call, opts.env)) return *refused;
  opts.cwd = call.options.cwd;
  opts.stdin_data = call.options.stdin_data;
  opts.timeout = timeout;
  opts.keep_bytes = 0;  // OutputCapture keeps head and tail itself
  opts.stop = stop->get_token();
  // Secret values are redacted once per stream, before anything keeps or sends a byte
  // (tools/redaction.h): the result's head and tail, the saved copy and the progress.
  // The call's redactor (shared with cell_tools.cc's wrapper), else one of our own.
  CallRedactorScope* scope = CallRedactorScope::Current();
  std::shared_ptr<const Redactor> redactor =
      scope ? scope->Get() : MakeRedactor(env.secret_values, CallKey(ctx));
  StreamRedactor out_redactor(redactor), err_redactor(redactor);
  auto deliver = [&](bool is_out, std::string_view chunk) {
    (is_out ? out : err).Append(chunk);
    if ((is_out ? out : err).total() > config.keep_bytes_per_stream && !made_dir) {
      made_dir = true;
      (void)channel.Mkdir(kOutputDir, 0755, /*parents=*/true);
    }
    (is_out ? out_saver : err_saver).Append(chunk);
    progress.Add(is_out ? "stdout" : "stderr", chunk);
  };
  opts.on_output = [&](OutputStream stream, std::string_view chunk) {
    bool is_out = stream == OutputStream::kStdout;
    deliver(is_out, (is_out ? out_redactor : err_redactor).Feed(chunk));
  };
  AuditEvent(env, ctx, lease.id(), "exec.start", ExecStartFields(config, call));
  auto result = channel.Exec(opts);
  deliver(true, out_redactor.Finish());
  deliver(false, err_redactor.Finish());
  for (std::string& var : opts.env) policies::WipeSecret(var);  // env-mode values
  progress.Stop();
  MeterCell(env, ctx, lease);
  AuditEvent(env, ctx, lease.id(), "exec.end",
             result ? ExecEndFields(call, *result)
                    : nlohmann::json{{"tool", call.tool}, {"error", result.error().message}});
  if (!result) {
    return SandboxError(call.tool, result.error(),
                        channel.alive() ? "Check the command and its arguments."
                                        : "The cell stopped; the next call gets a fresh cell.");
  }
  if (result->cancelled) {
    if (lease.stop_token().stop_requested())
      return mcp::ToolResult::Error(
          "stopped: the session is ending (closed, or past its maximum lifetime), so its cell "
          "and this program were killed. Start a new MCP session to continue.");
    return mcp::ToolResult::Error("cancelled: the process group was killed");
  }
  Rendered text;
  text.out_path = out_saver.Finish();
  text.err_path = err_saver.Finish();
  text.out_saved = out_saver.saved_bytes();
  text.err_saved = err_saver.saved_bytes();
  text.out = out.Render(text.out_path, out_saver.capped_at());
  text.err = err.Render(text.err_path, err_saver.capped_at());
  // The proxy reports a refusal before the program can read the answer: all are here.
  if (env.egress) text.egress_refusals = env.egress->RefusalsSince(lease.id(), refusals_before);
  return BuildResult(call, *result, out, err, text, timeout, lease.replaced_reason());
}

mcp::Json ExecOutputSchema() {
  auto integer = [](const char* d) { return mcp::Json{{"type", "integer"}, {"description", d}}; };
  auto boolean = [](const char* d) { return mcp::Json{{"type", "boolean"}, {"description", d}}; };
  auto string = [](const char* d) { return mcp::Json{{"type", "string"}, {"description", d}}; };
  return {
      {"type", "object"},
      {"properties",
       {
           {"exit_code", integer("exit status; -1 when killed by a signal")},
           {"signal", string("the signal that killed the program, e.g. SIGKILL; empty if none")},
           {"stdout", string("standard output (head and tail when cut)")},
           {"stderr", string("standard error (head and tail when cut)")},
           {"stdout_truncated", boolean("stdout was cut; see full_stdout_path")},
           {"stderr_truncated", boolean("stderr was cut; see full_stderr_path")},
           {"stdout_bytes", integer("bytes written to stdout")},
           {"stderr_bytes", integer("bytes written to stderr")},
           {"full_stdout_path",
            string("where stdout is saved in the cell, if cut: all of it, or its first part "
                   "when it outgrew the saved copy's cap (compare the file's size with "
                   "stdout_bytes)")},
           {"full_stderr_path",
            string("where stderr is saved in the cell, if cut: all of it, or its first part "
                   "when it outgrew the saved copy's cap (compare the file's size with "
                   "stderr_bytes)")},
           {"timed_out", boolean("the timeout killed the process group")},
           {"oom_killed", boolean("the cell's memory limit killed a process")},
           {"duration_ms", integer("wall-clock time")},
           {"cpu_ms", integer("user + system CPU time")},
           {"peak_memory_bytes", integer("peak resident memory of the program")},
           {"egress_refusals",
            {{"type", "array"},
             {"items", {{"type", "string"}}},
             {"description",
              "requests the egress proxy refused during this call, one reason a line"}}},
       }},
      {"required",
       {"exit_code", "signal", "stdout", "stderr", "stdout_truncated", "stderr_truncated",
        "timed_out", "oom_killed", "duration_ms", "cpu_ms", "peak_memory_bytes"}},
      {"additionalProperties", false},
  };
}

mcp::Json TimeoutSchema(const ToolEnv& env) {
  // One schema serves every session: its maximum is the largest of any policy served, and
  // each call is checked against its own session's maximum (RunInCell).
  std::chrono::seconds max = env.config.max_timeout;
  bool same = true;
  for (const CellToolsConfig* c : env.AllConfigs()) {
    max = std::max(max, c->max_timeout);
    same = same && c->max_timeout == env.config.max_timeout &&
           c->default_timeout == env.config.default_timeout;
  }
  std::string limits = same ? "default " + std::to_string(env.config.default_timeout.count()) +
                                  ", at most " + std::to_string(max.count())
                            : "default and maximum set by this session's policy; session_info "
                              "shows them";
  return {{"type", "integer"},
          {"minimum", 1},
          {"maximum", max.count()},
          {"description", "wall-clock limit in seconds (" + limits +
                              "); the whole process group is killed when it passes"}};
}

}  // namespace mcpcell::tools
