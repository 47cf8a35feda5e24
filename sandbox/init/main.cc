// mcpcell-init: pid 1 of a cell. Freshly exec'd by the server's cloned child (never a fork
// of the multi-threaded server), single-threaded, built without exceptions.
//
// It waits for the server's go byte (the id maps are written), starts the child that makes its
// network namespace (net.h), reads the CellSpec from fd 3, builds the cell (setup.h; a warm pool's
// cell parks first and builds its root when claimed), takes the seccomp program the server compiled
// and the cell's cgroup (the hand-over), tells the server Ready{timings} or SetupFailed{message} on
// the control socket (fd 4), and then serves the server's requests (control_loop.h) until the
// server closes the socket. If init exits, the kernel kills every process of the pid namespace.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <span>
#include <string>

#include "sandbox/control/protocol.h"
#include "sandbox/init/archive_tool.h"
#include "sandbox/init/control_loop.h"
#include "sandbox/init/exec.h"
#include "sandbox/init/setup.h"
#include "sandbox/linux/caps.h"
#include "sandbox/linux/net.h"
#include "sandbox/linux/seccomp.h"
#include "sandbox/linux/user.h"

namespace mcpcell::sandbox {
namespace {

[[noreturn]] void FailSetup(const std::string& message) {
  std::fprintf(stderr, "mcpcell-init: setup failed: %s\n", message.c_str());
  (void)control::SendMessage(kInitControlFd, control::SetupFailed{message});
  _exit(1);
}

// Sends Ready: the cell is parked (no listener) or ready to serve.
void SendReady(StepTimer& timer, int egress_listener) {
  control::Ready ready;
  ready.step_timings_us = std::move(timer.steps());
  ready.egress_listener = egress_listener >= 0 ? 1 : 0;
  std::span<const int> fds;
  if (egress_listener >= 0) fds = std::span<const int>(&egress_listener, 1);
  if (Status s = control::SendMessage(kInitControlFd, ready, fds); !s) {
    std::fprintf(stderr, "mcpcell-init: sending Ready: %s\n", s.error().message.c_str());
    _exit(1);
  }
}

// Builds the cell's filesystem and takes the hand-over, in the order the root order asks
// (setup.h): at once, or after parking until a claim brings the spec's layers (`spec` is
// then the claimed one and `timer` has started again).
CellRoot BuildCell(CellSpec& spec, LoopbackNamespaceChild& net, StepTimer& timer,
                   ServerHandover& handover) {
  if (Status s = MakeCellMountsPrivate(timer); !s) FailSetup(s.error().message);
  Result<RootOrder> order = ReceiveRootOrder(spec, timer);
  if (!order) FailSetup(order.error().message);
  if (!order->park) {
    Result<CellRoot> root = BuildCellRoot(spec, order->layer_mounts, timer);
    if (!root) FailSetup(root.error().message);
    // Last: the later init joins, the likelier the child is done.
    if (Status s = JoinCellNetwork(net, timer); !s) FailSetup(s.error().message);
    Result<ServerHandover> got = ReceiveHandover(timer);
    if (!got) FailSetup(got.error().Wrap("hand-over").message);
    handover = std::move(got).value();
    return std::move(root).value();
  }
  if (Status s = JoinCellNetwork(net, timer); !s) FailSetup(s.error().message);
  Result<ServerHandover> got = ReceiveHandover(timer, /*keep_sync_open=*/true);
  if (!got) FailSetup(got.error().Wrap("hand-over").message);
  handover = std::move(got).value();
  SendReady(timer, -1);  // parked
  Result<CellClaim> claim = ReceiveClaim(spec);
  if (!claim) FailSetup(claim.error().message);
  timer = StepTimer();
  spec = std::move(claim->spec);
  Result<CellRoot> root = BuildCellRoot(spec, claim->layer_mounts, timer);
  if (!root) FailSetup(root.error().message);
  return std::move(root).value();
}

// The server writes the id maps once init is exec'd (cell_launch.cc) and then sends the
// go byte: until then init's uid is unmapped, so nothing else may come first. With a range,
// init becomes root of its namespace (its capabilities came through execve as ambient).
void WaitForIdMaps() {
  char go = 0;
  ssize_t n;
  do {
    n = ::read(kInitSyncFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) FailSetup(Error::Sys("read(sync socket, go)").message);
  if (n == 0) _exit(1);  // the server gave up before the maps; it reports why
  if (go == kGoRange) {
    if (Status s = BecomeNamespaceRoot(); !s) FailSetup(s.error().Wrap("credentials").message);
  } else if (go != kGoSingle) {
    FailSetup(std::string("sync socket: go byte ") + std::to_string(go) + ", expected '" +
              kGoRange + "' or '" + kGoSingle + "'");
  }
}

[[noreturn]] void Run() {
  StepTimer timer;
  WaitForIdMaps();
  timer.Mark("id_maps_wait");
  // A session of our own and no controlling terminal: /dev/tty in the cell cannot reach
  // the terminal the server was started from.
  if (::setsid() < 0) FailSetup(Error::Sys("setsid()").message);
  // First, so that the network namespace is made on the other CPU while init works (net.h).
  Result<LoopbackNamespaceChild> net = StartLoopbackNamespace();
  if (!net) FailSetup(net.error().Wrap("net").message);
  // "net_inline": no CPU was free for a child, the net step makes the namespace itself.
  timer.Mark(net->pidfd >= 0 ? "net_start" : "net_inline");
  Result<CellSpec> spec = ReadSpecFromFd(kInitSpecFd);
  if (!spec) FailSetup(spec.error().Wrap("spec").message);
  timer.Mark("spec");
  // The cell's cgroup and the seccomp program, which the server made while init built the
  // filesystem (setup.h). The program is installed on init below and inherited by every exec.
  ServerHandover handover;
  CellRoot root = BuildCell(*spec, *net, timer, handover);
  if (spec->seccomp == handover.seccomp.filter.empty()) {
    FailSetup(spec->seccomp ? "hand-over: no seccomp program, but the spec enables seccomp"
                            : "hand-over: a seccomp program, but the spec disables seccomp");
  }
  static SeccompProgram seccomp;
  seccomp = std::move(handover.seccomp);
  if (Status s = EnterCellCgroup(handover, timer); !s) FailSetup(s.error().message);
  // Once for every process the cell will run, which inherit it through fork: default
  // signal dispositions (an ignored signal survives execve, and the server's are unknown),
  // empty bounding and ambient capability sets and locked securebits (caps.h). Init keeps
  // its permitted set; it never execs, so the empty bounding set costs it nothing.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);  // EINVAL for RT gaps: fine
  }
  if (Status s = DropBoundingAndAmbientCaps(); !s) FailSetup(s.error().Wrap("caps").message);
  if (Status s = VerifyBoundingAndAmbientEmpty(); !s) FailSetup(s.error().Wrap("caps").message);
  timer.Mark("caps");
  static InitContext ctx;
  ctx.sandbox_uid = spec->sandbox_uid;
  ctx.sandbox_gid = spec->sandbox_gid;
  ctx.env_defaults = spec->env;
  ctx.workspace = "/workspace";
  ctx.rlimits = spec->rlimits;
  ctx.seccomp = spec->seccomp ? &seccomp : nullptr;
  ctx.root_fd = root.root_fd.Release();
  // Once, on init itself: every exec inherits it through fork (exec.h).
  if (Status s = ApplySeccompToInit(ctx); !s) FailSetup(s.error().message);

  // The egress proxy's listening socket: opened here, in the cell's network namespace,
  // handed to the server with Ready and closed here, so no process of the cell holds it.
  int egress_listener = -1;
  if (spec->egress_proxy_port != 0) {
    Result<int> fd = ListenOnLoopback(spec->egress_proxy_port);
    if (!fd) FailSetup(fd.error().Wrap("egress proxy listener").message);
    egress_listener = *fd;
    timer.Mark("egress_listener");
  }

  SendReady(timer, egress_listener);
  if (egress_listener >= 0) ::close(egress_listener);
  ServeControl(kInitControlFd, ctx);
}

}  // namespace
}  // namespace mcpcell::sandbox

int main(int argc, char** argv) {
  // The same binary is the archive helper that runs as an exec inside a cell (archive_tool.h).
  if (argc > 1 && mcpcell::sandbox::IsArchiveToolMode(argv[1]))
    return mcpcell::sandbox::ArchiveToolMain(argc, argv);
  mcpcell::sandbox::Run();
}
