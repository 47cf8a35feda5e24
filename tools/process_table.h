// ProcessTable: the background processes of every MCP session (issue 32): what
// `run_command background=true` and the python tool's interpreter started, and what the
// `process` tool lists, reads, writes, signals and waits for.
//
// A process runs under cell init as a detached exec (sandbox/detached_exec.h): no server
// thread and no lease is tied to it, so the session's cell pauses and expires as usual.
// Its stdout and stderr go, interleaved as written, into one bounded file of the cell
// under /workspace/.mcpcell/processes/ (kept with the workspace, so a client that
// reconnects, or the session after a hibernation, can still read it). The sandbox user can
// change that file; that only misleads the session itself, whose own output it is.
//
// The table is the sessions' state, owned by whoever owns their lifetime (serve/
// session_state.h; ToolEnv::processes points at it): EndSession drops a session's entries
// (and its python interpreter) when the session ends; entries of a session whose
// CellSession is gone or closed also go at the next Prune (every start and process call).
// Each entry remembers its cell: when the session's cell is a different one (hibernated,
// restored, replaced after a crash), the process is reported as stopped.
//
// Ends: the end listener (SetEndListener, e.g. the audit trail's exec.end) hears each
// process's end exactly once, when it is first seen: by Inspect, by a Prune, or at
// EndSession (a process still running then ends with the session's cell).
//
// Threading: every method is thread-safe (one mutex; nothing blocks under it; the end
// listener runs outside it).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/cell_session.h"
#include "sandbox/detached_exec.h"

namespace mcpcell::tools {

// Live (not yet seen to end) processes a session may have at once.
inline constexpr size_t kMaxBackgroundProcesses = 16;
// Ended processes a session's list keeps (the oldest go first).
inline constexpr size_t kMaxEndedProcesses = 32;
inline constexpr const char* kProcessOutputDir = "/workspace/.mcpcell/processes";

struct BackgroundProcess {
  std::string id;                   // "p1", "p2", ... in the order the session started them
  std::string session_key, tenant;  // whose (the audit trail's exec.end)
  std::string kind;                 // "command" (run_command) or "python" (the python tool)
  std::string command;              // what was run, for list
  std::string cell_id;              // the cell it runs in
  std::string output_path;
  std::chrono::system_clock::time_point started_at;
  std::shared_ptr<sandbox::DetachedExec> exec;
  // Where this session's last `process output` stopped (its default cursor). Under the
  // table's mutex (Cursor / SetCursor).
  uint64_t read_cursor = 0;
  bool end_reported = false;  // the end listener heard its end (under the table's mutex)
};

// What a process is doing now, for list and the other actions' results.
struct ProcessState {
  std::string state;  // "running", "exited", "killed", "stopped"
  int exit_code = -1;
  std::string signal;  // "SIGTERM" when killed
  std::string detail;  // one line for the model
  uint64_t cpu_ms = 0, peak_memory_bytes = 0;
};

// One session's persistent python interpreter (python.cc): which background process it
// is, and the lock that keeps its calls in order.
struct PythonInterpreter {
  std::mutex mu;
  std::string process_id;  // "" before the first start
  uint64_t next_request = 1;
  std::string restart_note;  // why the next call starts a new interpreter
};

class ProcessTable {
 public:
  // Called once per process with the state it ended in; set before the first session.
  using EndFn = std::function<void(const BackgroundProcess&, const ProcessState&)>;
  void SetEndListener(EndFn fn) { on_end_ = std::move(fn); }

  // The id a new process of session `key` gets, and its output file (unique per server).
  std::string NextId(const std::string& key);
  // Adds a started process (the caller checked Running against kMaxBackgroundProcesses).
  void Add(const std::string& key, std::weak_ptr<sandbox::CellSession> session,
           std::shared_ptr<BackgroundProcess> process);
  // How many of session `key`'s processes may still be running (checked before a start).
  size_t Running(const std::string& key);
  std::shared_ptr<BackgroundProcess> Find(const std::string& key, const std::string& id);
  // Session `key`'s processes, oldest first.
  std::vector<std::shared_ptr<BackgroundProcess>> List(const std::string& key);
  // Drops session `key`'s process `id` (python's interpreter when it is replaced).
  void Remove(const std::string& key, const std::string& id);
  uint64_t Cursor(const BackgroundProcess& p);
  void SetCursor(BackgroundProcess& p, uint64_t cursor);
  // Session `key`'s python interpreter slot (made on first use; goes with the session).
  std::shared_ptr<PythonInterpreter> Interpreter(const std::string& key);
  // InspectProcess, and the end listener told when this is the first sight of the end.
  ProcessState Inspect(BackgroundProcess& p, const std::string& cell_id,
                       std::chrono::milliseconds wait = {}, const std::stop_token& stop = {});

  // Entries of sessions that are gone or closed; ended processes past kMaxEndedProcesses.
  void Prune();
  // Drops session `key`'s entries and interpreter; a process not yet seen to end is
  // reported ended with the session (its cell ends with it).
  void EndSession(const std::string& key, const std::string& why);
  // EndSession for every session (server shutdown).
  void EndAll(const std::string& why);
  // Sessions with entries (tests, session counts).
  size_t sessions() const;

 private:
  struct SessionProcesses {
    std::weak_ptr<sandbox::CellSession> session;
    uint64_t next_id = 1;
    std::vector<std::shared_ptr<BackgroundProcess>> processes;
    std::shared_ptr<PythonInterpreter> python;
  };
  // Tells the end listener about `p` ended in `s`, once.
  void ReportEnd(BackgroundProcess& p, const ProcessState& s);
  // Reports the processes of a dropped session (outside mu_).
  void ReportDropped(std::vector<std::shared_ptr<BackgroundProcess>>& dropped,
                     const std::string& why);

  mutable std::mutex mu_;
  std::map<std::string, SessionProcesses> sessions_;
  EndFn on_end_;
};
// Looks at `p` (waiting up to `wait` for it to end; `stop` cuts the wait short).
// `cell_id`: the session's cell now ("" when it has none).
ProcessState InspectProcess(BackgroundProcess& p, const std::string& cell_id,
                            std::chrono::milliseconds wait = {}, const std::stop_token& stop = {});

// session_info's lines and structured list of session `key`'s background processes in
// `table` (each with its state: "stopped" once its cell ended, e.g. hibernated); ("", [])
// when none (or no table).
std::pair<std::string, nlohmann::json> DescribeBackgroundProcesses(ProcessTable* table,
                                                                   const std::string& key,
                                                                   const std::string& cell_id);

}  // namespace mcpcell::tools
