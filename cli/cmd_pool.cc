// `mcpcell pool [options]`: the run pool, fresh cells kept ready for `mcpcell run`
// (run_pool/server.h; not serve's warm pool of --warm-cells).
//
// Runs in the foreground until SIGINT, SIGTERM or SIGHUP: prepares the state dir (reaps
// cells a crashed predecessor left, builds the template), listens on <state_dir>/pool.sock
// (or --socket) and keeps --size cells of its policy and cell flags ready
// (run_pool/cell_policy.h). A `mcpcell run` with the same state dir whose policy and flags
// compile to the same cell then runs its command in one of them; on stop
// the commands still running are killed and every cell is destroyed.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "policies/compiler.h"
#include "run_pool/cell_policy.h"
#include "run_pool/protocol.h"
#include "run_pool/server.h"
#include "sandbox/cell.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/state_dir.h"

namespace mcpcell::cli {
namespace {

using run_pool::DefaultPoolSocket;
using run_pool::PoolServer;

struct PoolOptions {
  run_pool::CellFlags cell;
  std::string socket;
  size_t size = 2;
  std::string init_path;
  std::vector<std::string> warm;
  bool no_warm = false;
};

// Without --warm: python3 started once in each cell, when the template has it (python is
// what agents run most, and the interpreter whose start opens the most files).
std::vector<std::string> DefaultWarmUps() {
  for (const char* path : {"/usr/local/bin/python3", "/usr/bin/python3"}) {
    if (::access(path, X_OK) == 0) return {"python3 -c pass"};
  }
  return {};
}

int RunPool(const PoolOptions& o) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, s);
  // Before any thread exists, so that only the sigwaitinfo below takes them.
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A log line to a closed stderr must not kill the pool and orphan its cells (cell init
  // resets every disposition, so its programs do not inherit this).
  ::signal(SIGPIPE, SIG_IGN);
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "mcpcell pool: %s\n", what.c_str());
    return 1;
  };
  if (o.size == 0 || o.size > 64) return fail("--size must be 1..64");
  auto policy = run_pool::ResolveCellPolicy(o.cell);
  if (!policy) return fail(policy.error().message);
  const std::string& state_dir = o.cell.state_dir;
  auto key = run_pool::PoolKey(*policy, state_dir);
  if (!key) return fail(key.error().message);
  if (Status s = sandbox::EnsureStateDir(state_dir); !s) return fail(s.error().message);
  if (Status s = sandbox::CheckCellsCanReachStateDir(state_dir); !s)
    return fail("state dir " + state_dir + ": " + s.error().message);
  auto reaped = sandbox::ReapOrphans(state_dir);
  if (!reaped) return fail("reaping orphaned cells: " + reaped.error().message);
  if (!reaped->empty())
    std::fprintf(stderr, "mcpcell pool: reaped %zu cell(s) left in %s\n", reaped->size(),
                 state_dir.c_str());
  auto skeleton = sandbox::PrepareHostTemplate(state_dir);
  if (!skeleton) return fail("template: " + skeleton.error().message);

  PoolServer::Options options;
  options.socket_path = o.socket.empty() ? DefaultPoolSocket(state_dir) : o.socket;
  options.key = *key;
  options.make_spec = [policy = *policy, state_dir,
                       skeleton_dir = *skeleton](const std::string& cell_id) {
    return policies::CompileCellSpec(policy, cell_id, state_dir, skeleton_dir);
  };
  options.size = o.size;
  options.create.init_path = o.init_path;
  if (!o.no_warm) options.warm = o.warm.empty() ? DefaultWarmUps() : o.warm;
  for (const std::string& w : options.warm) {
    if (w.empty()) return fail("--warm: an empty command");
  }
  auto server = PoolServer::Listen(options);
  if (!server) return fail(server.error().message);
  std::string warming;
  for (const std::string& w : options.warm) warming += (warming.empty() ? "" : "; ") + w;
  if (warming.empty()) warming = "none";
  std::fprintf(stderr,
               "mcpcell pool: listening on %s, keeping %zu cell(s) of policy \"%s\" (%s) ready, "
               "warm-up: %s\n",
               options.socket_path.c_str(), o.size, policy->name.c_str(), policy->source.c_str(),
               warming.c_str());
  std::jthread serving([&](std::stop_token stop) { (*server)->Serve(stop); });
  int sig = 0;
  while (sig <= 0) sig = sigwaitinfo(&stop_signals, nullptr);
  std::fprintf(stderr, "mcpcell pool: SIG%s, stopping\n", sigabbrev_np(sig));
  serving.request_stop();
  serving.join();
  server->reset();  // destroys the ready cells, removes the socket
  return 0;
}

const bool kRegistered = RegisterCommand("pool", [](CLI::App& parent, int* exit_code) {
  auto opts = std::make_shared<PoolOptions>();
  opts->cell.state_dir = sandbox::DefaultStateDir();
  CLI::App* sub = parent.add_subcommand(
      "pool", "Keep fresh cells ready for `mcpcell run` (same state dir, policy and cell flags)");
  run_pool::AddCellFlags(*sub, opts->cell);
  sub->add_option("--size", opts->size, "Cells kept ready")->capture_default_str();
  sub->add_option("--socket", opts->socket, "Socket to listen on (default <state-dir>/pool.sock)");
  sub->add_option("--init", opts->init_path, "Path of mcpcell-init (default: next to mcpcell)");
  CLI::Option* warm =
      sub->add_option("--warm", opts->warm,
                      "A shell command run in every cell before it is handed out (repeatable; "
                      "default: python3 -c pass, when the template has python3)")
          ->allow_extra_args(false);
  sub->add_flag("--no-warm", opts->no_warm, "Hand out cells without any warm-up command")
      ->excludes(warm);
  sub->callback([opts, exit_code] { *exit_code = RunPool(*opts); });
});

}  // namespace
}  // namespace mcpcell::cli
