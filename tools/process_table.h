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
// The table lives as long as the server; a session's entries go once its CellSession is
// gone or closed (checked on every call of these tools, by any session). Each entry
// remembers its cell: when the session's cell is a different one (hibernated, restored,
// replaced after a crash), the process is reported as stopped.
//
// Threading: every method is thread-safe (one mutex; nothing blocks under it).
#pragma once

#include <chrono>
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
  std::string id;       // "p1", "p2", ... in the order the session started them
  std::string kind;     // "command" (run_command) or "python" (the python tool)
  std::string command;  // what was run, for list
  std::string cell_id;  // the cell it runs in
  std::string output_path;
  std::chrono::system_clock::time_point started_at;
  std::shared_ptr<sandbox::DetachedExec> exec;
  // Where this session's last `process output` stopped (its default cursor). Under the
  // table's mutex (Cursor / SetCursor).
  uint64_t read_cursor = 0;
};

class ProcessTable {
 public:
  // The server's one table.
  static ProcessTable& Instance();

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

  // Entries of sessions that are gone or closed; ended processes past kMaxEndedProcesses.
  void Prune();

 private:
  struct SessionProcesses {
    std::weak_ptr<sandbox::CellSession> session;
    uint64_t next_id = 1;
    std::vector<std::shared_ptr<BackgroundProcess>> processes;
  };
  std::mutex mu_;
  std::map<std::string, SessionProcesses> sessions_;
};

// What a process is doing now, for list and the other actions' results.
struct ProcessState {
  std::string state;  // "running", "exited", "killed", "stopped"
  int exit_code = -1;
  std::string signal;  // "SIGTERM" when killed
  std::string detail;  // one line for the model
  uint64_t cpu_ms = 0, peak_memory_bytes = 0;
};
// Looks at `p` (waiting up to `wait` for it to end; `stop` cuts the wait short).
// `cell_id`: the session's cell now ("" when it has none).
ProcessState InspectProcess(BackgroundProcess& p, const std::string& cell_id,
                            std::chrono::milliseconds wait = {}, const std::stop_token& stop = {});

// session_info's lines and structured list of session `key`'s background processes (each
// with its state: "stopped" once its cell ended, e.g. hibernated); ("", []) when none.
std::pair<std::string, nlohmann::json> DescribeBackgroundProcesses(const std::string& key,
                                                                   const std::string& cell_id);

}  // namespace mcpcell::tools
