// What this host supports for cells, and what follows from it (`mcpcell doctor`).
//
// Each probe tests the real thing where it can (a forked child unshares a user namespace
// and mounts an overlay in it; openat2 is called) rather than guessing from versions, and
// says what the server will do about the answer: enforce, degrade with a report, or fail.
// Probes fork short-lived children; call ProbeHost from a single-threaded process (the
// doctor command) or accept that fork in a threaded process only runs async-signal-safe
// code in the child (which is what the probes do).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::sandbox {

enum class ProbeVerdict { kOk, kDegraded, kMissing };
const char* ProbeVerdictName(ProbeVerdict verdict);

struct ProbeResult {
  std::string name;  // "user namespaces", "overlayfs in a user namespace", ...
  ProbeVerdict verdict = ProbeVerdict::kMissing;
  std::string detail;       // what was found ("max_user_namespaces=63439")
  std::string consequence;  // what the server does about it
};

struct HostReport {
  bool root = false;
  std::vector<ProbeResult> probes;
  // True when cells can be created at all (user + mount namespaces, overlay, seccomp).
  bool cells_possible = false;
};

// Individual probes, exposed so tests can check each against the kernel directly.
ProbeResult ProbePrivilege();
ProbeResult ProbeUserNamespaces();
ProbeResult ProbeOverlayInUserNamespace();
ProbeResult ProbeCgroups();
ProbeResult ProbeSeccomp();
ProbeResult ProbeOpenat2();
ProbeResult ProbeCloneIntoCgroup();
// Whether cells get their own /dev/null, zero, ... (devices.h): tries to make them in a
// scratch directory under `dir` (an existing directory on the state dir's filesystem),
// removed again; degraded when cells must share the host's nodes, saying why.
ProbeResult ProbeDeviceNodes(const std::string& dir);

// A step of a probe that failed in its forked child: the step as the probe names it
// ("write uid_map") and its errno.
struct ProbeStepFailure {
  std::string step;
  int err = 0;
};

// What a failed step lacked, when it was a capability of this process: which one, why, and
// how to grant it (podman, Kubernetes, systemd); "" when the failure is not that. Today:
// writing a uid_map that maps uid 0 of the parent namespace (`mapped_uid`) needs
// CAP_SETFCAP since Linux 5.12, which container runtimes drop by default.
// `effective_caps`: the prober's effective set (bit CAP_x set when held).
std::string MissingCapabilityAdvice(const ProbeStepFailure& failure, uid_t mapped_uid,
                                    uint64_t effective_caps);

// The overlay probe's verdict from what its child reported (`failure` null: every step
// worked), for a prober of `euid` with `effective_caps`; separate so its text is testable
// without a host that fails.
ProbeResult OverlayProbeVerdict(const ProbeStepFailure* failure, const std::string& failure_text,
                                uid_t euid, uint64_t effective_caps);

// `state_dir`: where the cells' device nodes would live ("" = the default state dir); the
// probe uses its nearest existing directory.
HostReport ProbeHost(const std::string& state_dir = "");

// Human-readable report, one block per probe.
std::string FormatHostReport(const HostReport& report);

}  // namespace mcpcell::sandbox
