// The policy compiler: Policy (+ the serve command's flags) -> the sandbox's CellSpec.
//
// ApplyOverrides composes command-line choices (--mount, --output, --workspace, per-limit
// flags of `serve`, `run` and `pool`, --no-seccomp) into a policy with the same checks the loader
// applies, so the flags are just a shorter way to write a profile. CompileCellSpec (the cell, its
// package environment included: package_env.h) and CompileCellEgress (its egress proxy settings)
// are the only places a policy becomes mechanism; DescribePolicy/DescribeCellSpec print both for
// `mcpcell policy`. Threading: stateless functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "egress/proxy.h"
#include "policies/policy.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::policies {

// Where --output appears inside the cell.
inline constexpr const char* kOutputCellPath = "/output";
// The egress proxy's port on 127.0.0.1 inside every cell. Fixed: each cell has its own
// network namespace, so the same port never collides.
inline constexpr uint16_t kEgressProxyPort = 3128;

// Placeholder secrets (docs/secrets.md): the bundle of CAs a cell trusts (the system's and the
// egress proxy's interception CA), written by `mcpcell serve` at start to CaBundleHostPath
// and mounted read-only at kCellCaBundlePath in the cells of policies with placeholder
// secrets, with CaBundleEnv pointing the usual clients at it.
inline constexpr const char* kCellCaBundlePath = "/etc/mcpcell/ca-bundle.pem";
std::string CaBundleHostPath(const std::string& state_dir);
// Makes CaBundleHostPath an empty file when it is missing (as ApplyOverrides makes the
// directories it names), so that a spec compiles and validates before a server has written
// the bundle (`mcpcell policy check`); `mcpcell serve` replaces it at start.
Status EnsureCaBundleFile(const std::string& state_dir);
// SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, PIP_CERT, CURL_CA_BUNDLE, "NAME=value".
std::vector<std::string> CaBundleEnv();

struct PolicyOverrides {
  // Default member initializers so designated initializers build under -Wextra.
  std::optional<uint64_t> memory_bytes = {};
  std::optional<uint64_t> pids = {};
  std::optional<uint32_t> cpu_millicores = {};
  std::optional<uint64_t> disk_bytes = {};
  std::optional<std::chrono::seconds> exec_default = {};
  std::optional<std::chrono::seconds> exec_max = {};
  std::optional<std::chrono::seconds> session_idle = {};
  std::optional<std::chrono::seconds> session_max = {};
  std::optional<std::chrono::seconds> session_pause_idle = {};  // 0: off
  std::optional<uint64_t> output_keep_bytes = {};
  std::optional<bool> seccomp = {};      // false: no seccomp filter (debugging only)
  std::vector<std::string> mounts = {};  // "SRC:DST[:ro|rw]" (default ro)
  std::string output_dir = {};           // host dir bound read-write at /output (made if missing)
  std::string workspace_dir = {};        // persistent workspace (made if missing)
};

// `policy` with the overrides applied and checked (mounts like the loader's, "--mount
// <spec>: ..." in errors). Creates output_dir and workspace_dir if missing.
Result<Policy> ApplyOverrides(Policy policy, const PolicyOverrides& overrides,
                              const std::string& state_dir);

// Parses "SRC:DST[:ro|rw]".
Result<MountPolicy> ParseMountFlag(const std::string& flag);

// The spec of cell `cell_id` under this policy; `skeleton_dir` is the state dir's template
// (sandbox::PrepareHostTemplate). Validated by sandbox::ValidateCellSpec. With placeholder
// secrets, makes the CA bundle file if missing (EnsureCaBundleFile).
Result<sandbox::CellSpec> CompileCellSpec(const Policy& policy, const std::string& cell_id,
                                          const std::string& state_dir,
                                          const std::string& skeleton_dir);

// The variables that point a cell's clients at its egress proxy (HTTP_PROXY and friends,
// NO_PROXY, npm's and pip's settings), "NAME=value" each. CompileCellSpec adds them.
std::vector<std::string> EgressProxyEnv();

// What the egress proxy enforces for a cell under `policy` (allowlist, limits); the
// caller fills in the session and tenant. egress = "deny": an empty allowlist.
Result<egress::CellEgress> CompileCellEgress(const Policy& policy);

// The effective policy as a profile file (every key, defaults filled in).
std::string DescribePolicy(const Policy& policy);
// The compiled spec, one field a line. Every field a policy can change is printed, so two
// specs that print the same (cell id aside) make the same cell (run_pool/cell_policy.h).
std::string DescribeCellSpec(const sandbox::CellSpec& spec);
// One line for session_info: "no network: ..." or "egress only through the proxy ... to: a, b".
std::string NetworkSummary(const Policy& policy);

}  // namespace mcpcell::policies
