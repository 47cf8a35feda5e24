// The run pool's client, as `mcpcell run` uses it: connect to a `mcpcell pool` (server.h)
// on its socket, hand it one command with the run's own stdin, stdout and stderr, forward
// signals while it runs, and read how it ended.
// Threading: one Run at a time per client; Signal may be called from another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::run_pool {

struct PoolExec {
  std::string key;  // the cell wanted: PoolKey (cell_policy.h) of the run's policy
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
  // Applies one event frame of the pool to `out`; true when the run is over.
  bool OnEvent(const PoolExec& exec, const nlohmann::json& body, bool& started, int& pending_signal,
               PoolOutcome& out);
  UniqueFd fd_;
};

}  // namespace mcpcell::run_pool
