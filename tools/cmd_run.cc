// `mcpcell run [options] -- CMD ARGS...`: run one command in a fresh cell and go.
//
// Steps: build a CellSpec from the defaults and the options, create the cell, exec the
// command with this process's own stdin/stdout/stderr handed to it (SCM_RIGHTS, no
// copying), forward SIGINT/SIGTERM/SIGHUP/SIGQUIT to its process group, destroy the cell,
// and exit with the command's status (128+N when killed by signal N, like a shell).
// Exit codes of our own: 124 timeout (as timeout(1)), 125 the cell could not be created or
// the run failed, 126 the command could not be executed, 127 it was not found.
// --timings prints the per-step setup breakdown (server steps, cell init's steps, exec)
// to stderr.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/state_dir.h"
#include "tools/command.h"

namespace mcpcell::tools {
namespace {

using sandbox::Cell;
using Clock = std::chrono::steady_clock;

struct RunOptions {
  std::vector<std::string> command;
  bool timings = false;
  std::string state_dir;
  std::string workspace;
  std::string cwd;
  std::vector<std::string> env;
  std::string memory;
  std::string disk = "1G";
  uint64_t pids = 0;
  uint32_t cpu_millicores = 0;
  double timeout_s = 0;
  bool no_seccomp = false;
  std::string init_path;
};

// "512M", "2G", "1048576" -> bytes; 0 on a malformed value (reported by the caller).
uint64_t ParseBytes(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  uint64_t unit = 1;
  if (*end == 'K' || *end == 'k') unit = 1ull << 10;
  if (*end == 'M' || *end == 'm') unit = 1ull << 20;
  if (*end == 'G' || *end == 'g') unit = 1ull << 30;
  if (unit != 1) ++end;
  if (end == text.c_str() || *end != '\0') return 0;
  return v * unit;
}

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
        const uint64_t id = exec_id_.load();
        sandbox::CellChannel* channel = channel_.load();
        if (id == 0 || channel == nullptr) continue;
        if (const int forward = pending_.exchange(0); forward != 0) {
          (void)channel->SignalExec(id, forward);
        }
      }
    });
  }
  // `channel` must outlive the thread: call Stop before the cell goes.
  void SetExec(sandbox::CellChannel* channel, uint64_t id) {
    channel_ = channel;
    exec_id_ = id;
    // Forwarded by the thread, never from here (the caller may be inside the channel).
    if (pending_.load() != 0 && thread_.joinable()) pthread_kill(thread_.native_handle(), SIGUSR1);
  }
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
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> exec_id_{0};
  std::atomic<sandbox::CellChannel*> channel_{nullptr};
  std::atomic<int> pending_{0};
  std::thread thread_;
};

sandbox::Result<sandbox::CellSpec> BuildSpec(const RunOptions& o) {
  sandbox::CellSpec spec = sandbox::DefaultCellSpec(sandbox::GenerateCellId(), o.state_dir);
  auto skeleton = sandbox::PrepareHostTemplate(o.state_dir);
  if (!skeleton.ok()) return skeleton.error().Wrap("template");
  spec.rootfs.skeleton_dir = *skeleton;
  spec.workspace_host_dir = o.workspace;
  if (o.workspace.empty()) {
    // A fresh workspace is a tmpfs of the cell's own, as under serve's default policy: it
    // vanishes with the cell and has a real size limit, and the host keeps no directory
    // to make and remove.
    spec.tmpfs.workspace_bytes = ParseBytes(o.disk);
    if (spec.tmpfs.workspace_bytes == 0)
      return sandbox::Error::Msg("--disk: \"" + o.disk + "\" is not a size like 1G");
  }
  // Nothing of the host's environment enters the cell but TERM, so that interactive
  // programs draw on the terminal they were given.
  if (const char* term = std::getenv("TERM"); term && *term)
    spec.env.push_back(std::string("TERM=") + term);
  for (const std::string& e : o.env) spec.env.push_back(e);
  if (!o.memory.empty()) {
    spec.limits.memory_max_bytes = ParseBytes(o.memory);
    if (spec.limits.memory_max_bytes == 0)
      return sandbox::Error::Msg("--memory: \"" + o.memory + "\" is not a size like 512M");
  }
  spec.limits.pids_max = o.pids;
  spec.limits.cpu_millicores = o.cpu_millicores;
  spec.seccomp = !o.no_seccomp;
  if (sandbox::Status s = sandbox::ValidateCellSpec(spec); !s.ok()) return s.error();
  return spec;
}

int ExitStatusOf(const sandbox::ExecResult& r) {
  if (r.timed_out) return 124;
  return r.signaled ? 128 + r.signo : r.exit_code;
}

int RunCommand(const RunOptions& o) {
  SignalForwarder forwarder;  // first: blocks the signals before the cell's threads start
  forwarder.Start();
  auto spec = BuildSpec(o);
  if (!spec.ok()) {
    std::fprintf(stderr, "mcpcell run: %s\n", spec.error().message.c_str());
    return 125;
  }
  sandbox::CellCreateOptions create;
  create.init_path = o.init_path;
  auto cell = Cell::Create(*spec, create);
  if (!cell.ok()) {
    std::fprintf(stderr, "mcpcell run: creating the cell: %s\n", cell.error().message.c_str());
    return 125;
  }
  for (const std::string& w : (*cell)->warnings())
    std::fprintf(stderr, "mcpcell run: warning: %s\n", w.c_str());
  auto destroy_cell = [&] {
    forwarder.Stop();  // before the cell and its channel go
    if (sandbox::Status s = (*cell)->Destroy(); !s.ok())
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
  exec.cwd = o.cwd;
  // Our own stdio goes to the command as-is; one we were started without (closed) becomes
  // an empty pipe instead of a send error, and nothing of it is kept.
  auto open_or_none = [](int fd) { return ::fcntl(fd, F_GETFD) >= 0 ? fd : -1; };
  exec.stdin_fd = open_or_none(STDIN_FILENO);
  exec.stdout_fd = open_or_none(STDOUT_FILENO);
  exec.stderr_fd = open_or_none(STDERR_FILENO);
  exec.keep_bytes = 0;
  exec.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  const auto exec_start = Clock::now();
  Clock::time_point started_at = exec_start;
  exec.on_started = [&](uint64_t id, pid_t) {
    started_at = Clock::now();
    forwarder.SetExec(&(*cell)->channel(), id);
  };
  auto result = (*cell)->channel().Exec(exec);
  const auto exec_end = Clock::now();
  destroy_cell();
  auto us = [](Clock::duration d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  if (o.timings)
    PrintTimings(**cell, us(started_at - exec_start), us(exec_end - started_at),
                 us(Clock::now() - exec_end));
  if (!result.ok()) {
    std::fprintf(stderr, "mcpcell run: %s\n", result.error().message.c_str());
    const int err = result.error().err;
    return err == ENOENT ? 127 : (err == EACCES || err == ENOEXEC || err == EISDIR) ? 126 : 125;
  }
  if (result->timed_out)
    std::fprintf(stderr, "mcpcell run: timed out after %.3g s, killed\n", o.timeout_s);
  if (result->oom_killed)
    std::fprintf(stderr, "mcpcell run: the cell ran out of memory (OOM kill)\n");
  return ExitStatusOf(*result);
}

const bool kRegistered = RegisterCommand("run", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<RunOptions>();
  opts->state_dir = sandbox::DefaultStateDir();
  CLI::App* sub = parent.add_subcommand(
      "run", "Run one command in a fresh cell: mcpcell run [options] -- CMD ARGS...");
  sub->add_flag("--timings", opts->timings, "Print the per-step setup breakdown to stderr");
  sub->add_option("--state-dir", opts->state_dir, "State dir for cells and the template")
      ->capture_default_str();
  sub->add_option("--workspace", opts->workspace,
                  "Host directory bound at /workspace (default: a fresh tmpfs, see --disk)");
  sub->add_option("--disk", opts->disk,
                  "Size of the fresh /workspace, a tmpfs that counts against --memory")
      ->capture_default_str();
  sub->add_option("--cwd", opts->cwd, "Working directory inside the cell (default /workspace)");
  sub->add_option("-e,--env", opts->env, "KEY=VALUE added to the environment (repeatable)");
  sub->add_option("--memory", opts->memory, "Memory limit, e.g. 512M (swap off)");
  sub->add_option("--pids", opts->pids, "Maximum number of processes");
  sub->add_option("--cpu", opts->cpu_millicores, "CPU limit in millicores (1000 = one CPU)");
  sub->add_option("--timeout", opts->timeout_s,
                  "Wall-clock timeout in seconds; kills the process group");
  sub->add_flag("--no-seccomp", opts->no_seccomp, "Disable the seccomp filter (debugging only)");
  sub->add_option("--init", opts->init_path, "Path of mcpcell-init (default: next to mcpcell)");
  sub->add_option("command", opts->command, "The command and its arguments, after --")->required();
  sub->callback([opts, exit_code] { *exit_code = RunCommand(*opts); });
});

}  // namespace
}  // namespace mcpcell::tools
