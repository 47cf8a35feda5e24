// `mcpcell run [options] -- CMD ARGS...`: run one command in a fresh cell and go.
//
// Steps: compile the cell's spec from --policy (default: the shipped "default" profile) with
// the cell flags as overrides (run_pool/cell_policy.h), create the cell, exec the
// command with this process's own stdin/stdout/stderr handed to it (SCM_RIGHTS, no
// copying), forward SIGINT/SIGTERM/SIGHUP/SIGQUIT to its process group, destroy the cell,
// and exit with the command's status (128+N when killed by signal N, like a shell).
// Exit codes of our own: 124 timeout (as timeout(1)), 125 the cell could not be created or
// the run failed, 126 the command could not be executed, 127 it was not found.
// --timings prints the per-step setup breakdown (server steps, cell init's steps, exec)
// to stderr.
#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "policies/compiler.h"
#include "run_pool/cell_policy.h"
#include "run_pool/client.h"
#include "run_pool/protocol.h"
#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

using run_pool::DefaultPoolSocket;
using run_pool::PoolClient;
using run_pool::PoolExec;
using run_pool::PoolOutcome;

using sandbox::Cell;
using Clock = std::chrono::steady_clock;

struct RunOptions {
  std::vector<std::string> command;
  bool timings = false;
  run_pool::CellFlags cell;  // --workspace included
  std::string cwd;
  std::vector<std::string> env;
  double timeout_s = 0;
  std::string init_path;
  std::string pool_socket;  // empty: <state_dir>/pool.sock
  bool no_pool = false;
};

void PrintTimings(const Cell& cell, uint64_t exec_us, uint64_t run_us, uint64_t destroy_us) {
  std::fprintf(stderr, "mcpcell run: setup timings (us)\n");
  for (const auto& [step, us] : cell.timings().steps_us) {
    std::fprintf(stderr, "  %-18s %8llu\n", step.c_str(), static_cast<unsigned long long>(us));
  }
  std::fprintf(stderr, "  %-18s %8llu\n  %-18s %8llu\n", "create total",
               static_cast<unsigned long long>(cell.timings().total_us), "exec",
               static_cast<unsigned long long>(exec_us));
  std::fprintf(stderr, "  %-18s %8llu\n  %-18s %8llu\n", "command",
               static_cast<unsigned long long>(run_us), "destroy",
               static_cast<unsigned long long>(destroy_us));
  for (const auto& [step, us] : cell.destroy_timings().steps_us) {
    std::fprintf(stderr, "    %-16s %8llu\n", step.c_str(), static_cast<unsigned long long>(us));
  }
}

// Forwards terminal and termination signals to the command's process group: the command
// runs in cell init's session, so the terminal's SIGINT reaches only us.
class SignalForwarder {
 public:
  SignalForwarder() {
    sigemptyset(&set_);
    // SIGUSR1 is ours: the destructor wakes the thread with it instead of a polling tick.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1}) sigaddset(&set_, s);
    // Blocked before any thread exists, so every thread inherits the mask and only
    // sigwaitinfo below sees them.
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    forwarded_ = set_;
    sigdelset(&forwarded_, SIGUSR1);
  }
  // Started before the cell is made, so that making the thread is not on the way from the
  // cell to the command. A signal that comes before the command's process group is known
  // (while the cell is made, or before init's ExecStarted reached us although the command
  // already runs) is kept, the latest one, and forwarded as soon as it is.
  void Start() {
    thread_ = std::thread([this] {
      while (!stop_) {
        const int sig = sigwaitinfo(&set_, nullptr);
        if (sig > 0 && sig != SIGUSR1) pending_ = sig;
        if (!armed_.load(std::memory_order_acquire)) continue;
        if (const int forward = pending_.exchange(0); forward != 0) forward_(forward);
      }
    });
  }
  // Where signals go from now on (the command's process group, through the cell's channel
  // or the pool). Called once; what `forward` uses must outlive the thread: call Stop first.
  void SetTarget(std::function<void(int)> forward) {
    forward_ = std::move(forward);
    armed_.store(true, std::memory_order_release);
    // Forwarded by the thread, never from here (the caller may be inside the channel).
    if (pending_.load() != 0 && thread_.joinable()) pthread_kill(thread_.native_handle(), SIGUSR1);
  }
  // The signals it forwards (SIGINT, SIGTERM, SIGHUP, SIGQUIT), for a signalfd.
  const sigset_t& forwarded() const { return forwarded_; }
  // A signal that came before the command was started (while the cell was made), taken
  // so that the thread does not forward it later; 0 if none. One the thread has not
  // dequeued yet (it may not have run at all on a loaded machine) is taken here directly.
  int TakeEarlySignal() {
    if (const int kept = pending_.exchange(0); kept != 0) return kept;
    sigset_t terminating = set_;
    sigdelset(&terminating, SIGUSR1);
    const timespec now{0, 0};
    const int sig = sigtimedwait(&terminating, nullptr, &now);
    return sig > 0 ? sig : 0;
  }
  // Ends the thread; no signal is forwarded after it returns. Idempotent.
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) {
      pthread_kill(thread_.native_handle(), SIGUSR1);
      thread_.join();
    }
  }
  ~SignalForwarder() { Stop(); }

 private:
  sigset_t set_;
  sigset_t forwarded_;
  std::atomic<bool> stop_{false};
  std::function<void(int)> forward_;  // set once, before armed_
  std::atomic<bool> armed_{false};
  std::atomic<int> pending_{0};
  std::thread thread_;
};

// Nothing of the host's environment enters the cell but TERM, so that interactive programs
// draw on the terminal they were given; then the -e entries. Given with the exec (overlaid
// on the cell's defaults), so that a cell made ahead by a pool gets them too.
Result<std::vector<std::string>> CommandEnvironment(const RunOptions& o) {
  std::vector<std::string> env;
  if (const char* term = std::getenv("TERM"); term && *term)
    env.push_back(std::string("TERM=") + term);
  for (const std::string& e : o.env) {
    if (e.find('=') == std::string::npos || e[0] == '=')
      return Error::Msg("-e/--env: \"" + e + "\" is not KEY=VALUE");
    env.push_back(e);
  }
  return env;
}

int ExitForError(int err) {
  return err == ENOENT ? 127 : (err == EACCES || err == ENOEXEC || err == EISDIR) ? 126 : 125;
}

int ExitStatusOf(const sandbox::ExecResult& r) {
  if (r.timed_out) return 124;
  return r.signaled ? 128 + r.signo : r.exit_code;
}

// Our own stdio goes to the command as-is; one we were started without (closed) becomes
// an empty pipe instead of a send error, and nothing of it is kept.
int OpenOrNone(int fd) { return ::fcntl(fd, F_GETFD) >= 0 ? fd : -1; }

uint64_t Micros(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// The command in a cell the run pool made ahead (run_pool/server.h), when a run pool of
// this user listens on the socket and makes cells of `key` (run_pool::PoolKey). nullopt: no
// such run pool, or it did not start the command; the run then makes its own cell.
std::optional<int> RunInPool(const RunOptions& o, const std::string& key,
                             const std::vector<std::string>& env, SignalForwarder& forwarder) {
  const std::string socket =
      o.pool_socket.empty() ? DefaultPoolSocket(o.cell.state_dir) : o.pool_socket;
  const auto connect_start = Clock::now();
  auto pool_client = PoolClient::Connect(socket);
  if (!pool_client) {
    const int err = pool_client.error().err;
    // No pool there, a stale socket, or another user's: quietly our own cell. A pool named
    // with --pool that cannot be reached is worth a word.
    if (!o.pool_socket.empty() || (err != ENOENT && err != ECONNREFUSED && err != EACCES))
      std::fprintf(stderr, "mcpcell run: not using the pool: %s\n",
                   pool_client.error().message.c_str());
    return std::nullopt;
  }
  if (const int early = forwarder.TakeEarlySignal(); early != 0) {
    std::fprintf(stderr, "mcpcell run: SIG%s before the command started; it was not run\n",
                 sigabbrev_np(early));
    return 128 + early;
  }
  PoolExec exec;
  exec.key = key;
  exec.argv = o.command;
  exec.env = env;
  exec.cwd = o.cwd;
  exec.timeout_ms = static_cast<int64_t>(o.timeout_s * 1000);
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) exec.stdio[fd] = OpenOrNone(fd);
  const auto exec_start = Clock::now();
  Clock::time_point started_at = exec_start;
  // No thread here: Run waits on the pool's socket and a signalfd of the forwarded
  // signals (blocked since the forwarder was made) in one poll.
  UniqueFd signals(::signalfd(-1, &forwarder.forwarded(), SFD_CLOEXEC | SFD_NONBLOCK));
  exec.signal_fd = signals.get();
  exec.on_started = [&] { started_at = Clock::now(); };
  PoolOutcome outcome = (*pool_client)->Run(exec);
  const auto exec_end = Clock::now();
  if (outcome.kind == PoolOutcome::kNotStarted && outcome.unsent_signal != 0) {
    // Interrupted while the pool had the request: not started anywhere, as above.
    std::fprintf(stderr, "mcpcell run: SIG%s before the command started; it was not run\n",
                 sigabbrev_np(outcome.unsent_signal));
    return 128 + outcome.unsent_signal;
  }
  if (outcome.kind == PoolOutcome::kNotStarted) {
    if (!o.pool_socket.empty() || o.timings)
      std::fprintf(stderr, "mcpcell run: not using the pool: %s\n", outcome.message.c_str());
    return std::nullopt;
  }
  if (o.timings) {
    std::fprintf(stderr, "mcpcell run: setup timings (us)\n");
    std::fprintf(stderr, "  %-18s %8llu\n  %-18s %8llu\n  %-18s %8llu\n", "pool connect",
                 static_cast<unsigned long long>(Micros(exec_start - connect_start)), "exec",
                 static_cast<unsigned long long>(Micros(started_at - exec_start)), "command",
                 static_cast<unsigned long long>(Micros(exec_end - started_at)));
    std::fprintf(stderr, "  cell %s was made ahead by the pool on %s, which destroys it now\n",
                 outcome.cell_id.c_str(), socket.c_str());
  }
  if (outcome.kind == PoolOutcome::kFailed) {
    std::fprintf(stderr, "mcpcell run: %s\n", outcome.message.c_str());
    return ExitForError(outcome.err);
  }
  if (outcome.timed_out)
    std::fprintf(stderr, "mcpcell run: timed out after %.3g s, killed\n", o.timeout_s);
  if (outcome.oom_killed)
    std::fprintf(stderr, "mcpcell run: the cell ran out of memory (OOM kill)\n");
  if (outcome.timed_out) return 124;
  return outcome.signaled ? 128 + outcome.signo : outcome.exit_code;
}

// The run's own cell of `policy`, in a state dir made ready for it (the template built);
// its problems are printed.
Result<std::unique_ptr<Cell>> MakeOwnCell(const RunOptions& o, const policies::Policy& policy) {
  Status reachable = sandbox::EnsureStateDir(o.cell.state_dir);
  if (reachable) reachable = sandbox::CheckCellsCanReachStateDir(o.cell.state_dir);
  if (!reachable) return reachable.error().Wrap("state dir " + o.cell.state_dir);
  auto skeleton = sandbox::PrepareHostTemplate(o.cell.state_dir);
  if (!skeleton) return skeleton.error().Wrap("template");
  auto spec =
      policies::CompileCellSpec(policy, sandbox::GenerateCellId(), o.cell.state_dir, *skeleton);
  if (!spec) return spec.error();
  sandbox::CellCreateOptions create;
  create.init_path = o.init_path;
  auto cell = Cell::Create(*spec, create);
  if (!cell) return cell.error().Wrap("creating the cell");
  for (const std::string& w : (*cell)->warnings())
    std::fprintf(stderr, "mcpcell run: warning: %s\n", w.c_str());
  // No egress proxy serves the cell (the policy's egress is "deny"): its listener is closed,
  // so a request to the proxy's port is refused at once instead of waiting.
  UniqueFd((*cell)->TakeEgressListener()).Reset();
  return cell;
}

// The command in a cell of the run's own, made now and destroyed after it; the exit status.
int RunInOwnCell(const RunOptions& o, const policies::Policy& policy,
                 const std::vector<std::string>& env, SignalForwarder& forwarder) {
  auto cell = MakeOwnCell(o, policy);
  if (!cell) {
    std::fprintf(stderr, "mcpcell run: %s\n", cell.error().message.c_str());
    return 125;
  }
  auto destroy_cell = [&] {
    forwarder.Stop();  // before the cell and its channel go
    if (Status s = (*cell)->Destroy(); !s.ok())
      std::fprintf(stderr, "mcpcell run: destroying the cell: %s\n", s.error().message.c_str());
  };
  // Interrupted (Ctrl-C, a SIGTERM from a supervisor) while the cell was made: the command
  // is not started at all rather than started and signalled at once, which would let it
  // run for a moment. One that comes after this check is forwarded to the command.
  if (const int early = forwarder.TakeEarlySignal(); early != 0) {
    destroy_cell();
    std::fprintf(stderr, "mcpcell run: SIG%s before the command started; it was not run\n",
                 sigabbrev_np(early));
    return 128 + early;
  }
  sandbox::ExecOptions exec;
  exec.argv = o.command;
  exec.env = env;
  exec.cwd = o.cwd;
  exec.stdin_fd = OpenOrNone(STDIN_FILENO);
  exec.stdout_fd = OpenOrNone(STDOUT_FILENO);
  exec.stderr_fd = OpenOrNone(STDERR_FILENO);
  exec.keep_bytes = 0;
  exec.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  const auto exec_start = Clock::now();
  Clock::time_point started_at = exec_start;
  sandbox::CellChannel* channel = &(*cell)->channel();
  exec.on_started = [&](uint64_t id, pid_t) {
    started_at = Clock::now();
    forwarder.SetTarget([channel, id](int sig) { (void)channel->SignalExec(id, sig); });
  };
  auto result = channel->Exec(exec);
  const auto exec_end = Clock::now();
  destroy_cell();
  if (o.timings)
    PrintTimings(**cell, Micros(started_at - exec_start), Micros(exec_end - started_at),
                 Micros(Clock::now() - exec_end));
  if (!result.ok()) {
    std::fprintf(stderr, "mcpcell run: %s\n", result.error().message.c_str());
    return ExitForError(result.error().err);
  }
  if (result->timed_out)
    std::fprintf(stderr, "mcpcell run: timed out after %.3g s, killed\n", o.timeout_s);
  if (result->oom_killed)
    std::fprintf(stderr, "mcpcell run: the cell ran out of memory (OOM kill)\n");
  return ExitStatusOf(*result);
}

int RunCommand(const RunOptions& o) {
  SignalForwarder forwarder;  // first: blocks the signals before any thread starts
  auto policy = run_pool::ResolveCellPolicy(o.cell);
  auto env = CommandEnvironment(o);
  if (!policy || !env) {
    std::fprintf(stderr, "mcpcell run: %s\n",
                 (!policy ? policy.error() : env.error()).message.c_str());
    return 125;
  }
  // A pool's cells have a tmpfs workspace and the pool's own cell init.
  if (!o.no_pool && o.cell.workspace.empty() && o.init_path.empty()) {
    auto key = run_pool::PoolKey(*policy, o.cell.state_dir);
    if (!key) {
      std::fprintf(stderr, "mcpcell run: %s\n", key.error().message.c_str());
      return 125;
    }
    if (std::optional<int> status = RunInPool(o, *key, *env, forwarder)) return *status;
  }
  forwarder.Start();
  return RunInOwnCell(o, *policy, *env, forwarder);
}

const bool kRegistered = RegisterCommand("run", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<RunOptions>();
  opts->cell.state_dir = sandbox::DefaultStateDir();
  CLI::App* sub = parent.add_subcommand(
      "run", "Run one command in a fresh cell: mcpcell run [options] -- CMD ARGS...");
  sub->add_flag("--timings", opts->timings, "Print the per-step setup breakdown to stderr");
  run_pool::AddCellFlags(*sub, opts->cell);
  sub->add_option("--workspace", opts->cell.workspace,
                  "Host directory bound at /workspace, made if missing (default: a fresh "
                  "tmpfs, see --disk)");
  sub->add_option("--cwd", opts->cwd, "Working directory inside the cell (default /workspace)");
  // One value per -e: without this a vector option swallows what follows, up to "--".
  sub->add_option("-e,--env", opts->env, "KEY=VALUE added to the environment (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--timeout", opts->timeout_s,
                  "Wall-clock timeout in seconds; kills the process group");
  sub->add_option("--init", opts->init_path, "Path of mcpcell-init (default: next to mcpcell)");
  sub->add_option("--pool", opts->pool_socket,
                  "Socket of a `mcpcell pool` to take a ready cell from "
                  "(default: <state-dir>/pool.sock when one listens there)");
  sub->add_flag("--no-pool", opts->no_pool, "Always make a cell of this run's own");
  sub->add_option("command", opts->command, "The command and its arguments, after --")->required();
  sub->callback([opts, exit_code] { *exit_code = RunCommand(*opts); });
});

}  // namespace
}  // namespace mcpcell::cli
