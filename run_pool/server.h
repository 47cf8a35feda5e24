// The run pool's server, `mcpcell pool`: cells made ahead of need for `mcpcell run`.
// (Not the warm pool of `mcpcell serve --warm-cells`; this server keeps its ready cells in a
// sandbox::WarmPool of its own.) Below, "pool" means the run pool.
//
// A one-shot `mcpcell run` that makes its own cell pays for the whole cell (clone, two
// overlays, cgroup, cell init's setup, and at the end their teardown): most of its wall
// time. `mcpcell pool` keeps `size` fresh cells ready (sandbox::WarmPool), and a run that
// finds it on <state_dir>/pool.sock hands it the command and its own stdin, stdout and
// stderr (SCM_RIGHTS): the pool runs the command in a ready cell, reports start and exit,
// and destroys the cell after the run has its status. A cell is never used twice.
//
// Only a run whose cell key (PoolKey, cell_policy.h: its compiled spec, cell id aside) is
// the pool's own gets a pooled cell; any other run, one with a host workspace or its own
// cell init, or one that finds no pool, makes its own cell. The socket is the pool user's
// alone (mode 0600, and the peer's uid is checked).
//
// Protocol (protocol.h): SOCK_SEQPACKET, one JSON object per datagram (at most
// kMaxPoolFrameBytes).
//   run -> pool  {"op":"exec","cell":KEY,"argv":[...],"env":[...],"cwd":S,"timeout_ms":N,
//                 "stdio":[B,B,B]}  with the fds flagged true, in order (stdin, stdout,
//                 stderr); {"op":"signal","signo":N} while it runs; {"op":"status"}.
//   pool -> run  {"event":"started","cell":ID} once the command runs;
//                {"event":"exited","exit_code":N,"signaled":B,"signo":N,"timed_out":B,
//                 "oom_killed":B}; {"event":"error","message":S,"errno":N,"fallback":B}
//                 (fallback: the command was not started, the run may make its own cell);
//                {"event":"status","ready":N,"size":N,"cell":KEY,"served":N,"problem":S}.
// A run that goes away (its connection closes) before the exit has its command's process
// group killed, and its cell destroyed. Everything a peer sends is validated; a bad
// request gets an error naming the problem and the pool goes on serving.
// Threading: Serve runs on the caller's thread and serves each run on a thread of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/warm_pool.h"

namespace mcpcell::run_pool {

class PoolServer {
 public:
  struct Options {
    std::string socket_path;
    // The cells' key (PoolKey): a run asking for another one gets no cell of this pool.
    std::string key;
    // The spec of a new cell of the pool, given its id.
    std::function<Result<sandbox::CellSpec>(const std::string& cell_id)> make_spec;
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
  struct Acceptors;
  PoolServer(Options options, UniqueFd listener);
  // One idle accept thread: accepts and handles runs until enough others wait or Serve stops.
  void AcceptLoop(Connection& connection, Acceptors& acceptors);
  // One run's connection: its request read and checked, then answered by its op.
  void Handle(Connection& connection);
  void SendStatus(int fd);
  // exec: a cell taken from the warm pool, the command run, the cell destroyed.
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
