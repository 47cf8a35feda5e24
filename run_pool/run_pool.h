// The run pool: cells made ahead of need for `mcpcell run`, kept by `mcpcell pool`, and the
// client `mcpcell run` uses when one listens on its socket. (Not the warm pool of
// `mcpcell serve --warm-cells`; the run pool keeps its ready cells in a sandbox::WarmPool
// of its own.) Below, "pool" means the run pool.
//
// A one-shot `mcpcell run` that makes its own cell pays for the whole cell (clone, two
// overlays, cgroup, cell init's setup, and at the end their teardown): most of its wall
// time. `mcpcell pool` keeps `size` fresh cells ready (sandbox::WarmPool), and a
// run that finds it on <state_dir>/pool.sock hands it the command and its own stdin, stdout
// and stderr (SCM_RIGHTS): the pool runs the command in a ready cell, reports start and
// exit, and destroys the cell after the run has its status. A cell is never used twice.
//
// Only a run whose cell options (CellShape: disk, memory, pids, cpu, seccomp) are the
// pool's own gets a pooled cell; any other run, one with a host workspace or its own cell
// init, or one that finds no pool, makes its own cell as before. The socket is the pool
// user's alone (mode 0600, and the peer's uid is checked).
//
// Protocol: SOCK_SEQPACKET, one JSON object per datagram (at most kMaxPoolFrameBytes).
//   run -> pool  {"op":"exec","cell":KEY,"argv":[...],"env":[...],"cwd":S,"timeout_ms":N,
//                 "stdio":[B,B,B]}  with the fds flagged true, in order (stdin, stdout,
//                 stderr); {"op":"signal","signo":N} while it runs; {"op":"status"}.
//   pool -> run  {"event":"started","cell":ID} once the command runs;
//                {"event":"exited","exit_code":N,"signaled":B,"signo":N,"timed_out":B,
//                 "oom_killed":B}; {"event":"error","message":S,"errno":N,"fallback":B}
//                 (fallback: the command was not started, the run may make its own cell);
//                {"event":"status","ready":N,"size":N,"cell":KEY,"problem":S}.
// A run that goes away (its connection closes) before the exit has its command's process
// group killed, and its cell destroyed. Everything a peer sends is validated; a bad
// request gets an error naming the problem and the pool goes on serving.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/warm_pool.h"

namespace CLI {
class App;
}

namespace mcpcell::run_pool {

// The options that shape a cell, shared by `run` and `pool` (same flags, same meaning).
struct CellOptions {
  std::string state_dir;
  std::string disk = "1G";
  std::string memory;
  uint64_t pids = 0;
  uint32_t cpu_millicores = 0;
  bool no_seccomp = false;
};
void AddCellOptions(CLI::App& command, CellOptions& options);

// CellOptions parsed and checked.
struct CellShape {
  uint64_t disk_bytes = 0;    // the fresh /workspace tmpfs
  uint64_t memory_bytes = 0;  // 0: the default
  uint64_t pids = 0;
  uint32_t cpu_millicores = 0;
  bool seccomp = true;
  // Canonical text of every field: two shapes make the same cell iff their keys are equal.
  std::string Key() const;
};
Result<CellShape> ParseCellOptions(const CellOptions& options);

// A spec of `shape` for the cell `cell_id` (GenerateCellId) in `state_dir`, on the template
// `skeleton_dir` (PrepareHostTemplate). `workspace`: a host directory bound at /workspace, or empty
// for the shape's tmpfs.
Result<sandbox::CellSpec> BuildCellSpec(const CellShape& shape, std::string cell_id,
                                        const std::string& state_dir,
                                        const std::string& skeleton_dir,
                                        const std::string& workspace = "");

std::string DefaultPoolSocket(const std::string& state_dir);

inline constexpr size_t kMaxPoolFrameBytes = 128 * 1024;

// ---- the client: mcpcell run ----

struct PoolExec {
  std::string key;  // CellShape::Key of the cell wanted
  std::vector<std::string> argv, env;
  std::string cwd;
  int64_t timeout_ms = 0;
  int stdio[3] = {-1, -1, -1};  // given to the command as-is; -1: none
  std::function<void()> on_started;
  // A signalfd (non-blocking) whose signals go to the command's process group, as soon
  // as it runs; -1: none. Run waits on it and the pool's socket in one poll.
  int signal_fd = -1;
};

struct PoolOutcome {
  // kRan: the fields below hold the command's end. kNotStarted: the pool did not start
  // it (`message` says why) and the run may make its own cell. kFailed: it could not run
  // or the pool broke off (`message`, `err`).
  enum Kind { kRan, kNotStarted, kFailed } kind = kFailed;
  int exit_code = 0;
  bool signaled = false;
  int signo = 0;
  bool timed_out = false;
  bool oom_killed = false;
  std::string cell_id;
  std::string message;
  int err = 0;
  // kNotStarted: a signal read from PoolExec::signal_fd meanwhile, never sent (0: none).
  // The run must not start the command in a cell of its own after it.
  int unsent_signal = 0;
};

class PoolClient {
 public:
  // Connects to the pool at `socket_path`. An error with err ENOENT, ECONNREFUSED or EACCES
  // means there is no pool this user may use there.
  static Result<std::unique_ptr<PoolClient>> Connect(const std::string& socket_path);
  // Runs one command; blocks until it ended.
  PoolOutcome Run(const PoolExec& exec);
  // Forwards a signal to the running command's process group; thread-safe.
  Status Signal(int signo);

 private:
  explicit PoolClient(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// ---- the server: mcpcell pool ----

class PoolServer {
 public:
  struct Options {
    std::string socket_path;
    CellShape shape;
    std::string state_dir, skeleton_dir;
    size_t size = 2;
    sandbox::CellCreateOptions create;
    // Shell command lines run (`/bin/sh -c`, as the sandbox user, stdin empty, output
    // dropped, 10 s each) in every cell the pool makes, in order, before the cell is
    // handed out: the first run of an interpreter in a fresh cell looks up every file it
    // opens through the cell's new overlay, which slows a python start noticeably; a
    // warm-up pays that ahead of the run. One that fails is logged (once) and the cell is
    // still used; a cell that cannot run them is destroyed.
    std::vector<std::string> warm;
  };
  // Binds and listens (mode 0600); a live pool already on the path is an error, a stale
  // socket file is replaced. Starts making cells.
  static Result<std::unique_ptr<PoolServer>> Listen(Options options);
  ~PoolServer();  // Stop(), closes and unlinks the socket

  // Accepts and serves runs until `stop` is requested; then kills the commands still
  // running, waits for their connections' ends and destroys every cell.
  void Serve(std::stop_token stop);

 private:
  struct Connection;
  struct RunWatch;
  class ConnectionWatcher;
  PoolServer(Options options, UniqueFd listener);
  // One run's connection: its request read and checked, then answered (status) or served
  // (exec: a cell taken from the warm pool, the command run, the cell destroyed).
  void Handle(Connection& connection);
  void SendStatus(int fd);
  void ServeExec(Connection& connection, const nlohmann::json& request, std::vector<UniqueFd>& fds);
  // A cell from the warm pool, else one made now; nullptr when none could be made.
  std::unique_ptr<sandbox::CellInstance> TakeOrMakeCell();
  // Runs the command in `cell`, telling the run when it started (`started` then true).
  Result<sandbox::ExecResult> RunCommand(sandbox::CellInstance* cell, sandbox::ExecOptions& exec,
                                         const std::shared_ptr<RunWatch>& watch, bool& started);
  Status Warm(sandbox::CellInstance& cell, std::stop_token stop);

  const Options options_;
  UniqueFd listener_;
  // Per Options::warm entry; the warm pool's thread only. Before warm_pool_, whose thread uses it.
  std::vector<bool> warm_failure_logged_;
  sandbox::WarmPool warm_pool_;
  std::unique_ptr<ConnectionWatcher> watcher_;
  std::atomic<uint64_t> served_{0};
};

}  // namespace mcpcell::run_pool
