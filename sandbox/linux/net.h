// The cell's network: a new network namespace whose only interface is `lo`, brought up by
// cell init. Nothing routes out; the server reaches the cell through fds (control socket,
// the egress proxy's listening socket), never through an interface.
//
// Making a network namespace is the most expensive namespace (`setup_net`: per-namespace
// sysctls, `lo`, ...), so it is not made by the server's clone, on the
// critical path: cell init starts a child of its own first thing (StartLoopbackNamespace,
// when a CPU is free),
// which unshares CLONE_NEWNET (owned by the cell's user namespace, like the others) and
// brings `lo` up on the other CPU while init reads its spec and builds the filesystem;
// before pivot_root init joins it (JoinLoopbackNamespace: setns through the child's pidfd)
// and kills and reaps the child. The child runs only this code, holds no fd of init's but
// its report pipe, and is gone before anything of the cell runs.
//
// Called by cell init (single-threaded); no exceptions.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "base/status.h"

namespace mcpcell::sandbox {

// The child making the namespace. pidfd < 0: none was started, init makes the namespace
// itself when it joins.
struct LoopbackNamespaceChild {
  int pidfd = -1;
  int report_fd = -1;  // read end: 8 bytes {step, errno}, all zero on success
};

// Whether StartLoopbackNamespace starts a child: when a CPU is free (cell init), or
// always / never (tests of both paths).
enum class NamespaceChild { kIfCpuFree, kAlways, kNever };

// Forks the child (clone3 with CLONE_PIDFD, no CLONE_VM: it runs concurrently with init),
// but only when a CPU is free for it: no more runnable tasks than CPUs this process may
// use (/proc/loadavg's running count against sched_getaffinity). On a busy host a new
// task waits milliseconds for a CPU, and init would wait
// for it; then it is not started (pidfd -1) and the namespace is made in line, as fast as
// before.
Result<LoopbackNamespaceChild> StartLoopbackNamespace(
    NamespaceChild when = NamespaceChild::kIfCpuFree);

// With a child: waits for its report (the namespace made and `lo`, down in a new
// namespace, up with SIOCSIFFLAGS IFF_UP), moves the calling process into its network
// namespace, then SIGKILLs and reaps it (also on error). Without one: unshare(CLONE_NEWNET)
// and `lo` up right here. The error names the failed step.
Status JoinLoopbackNamespace(LoopbackNamespaceChild& child);

// A listening TCP socket (CLOEXEC) on 127.0.0.1:<port> of the current network namespace:
// the egress proxy's door inside a cell. The caller owns the returned fd.
Result<int> ListenOnLoopback(uint16_t port);

}  // namespace mcpcell::sandbox
