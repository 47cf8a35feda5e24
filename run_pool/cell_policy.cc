// The cell of `mcpcell run` and `mcpcell pool` (see cell_policy.h).
#include "run_pool/cell_policy.h"

#include <CLI/CLI.hpp>
#include <charconv>

#include "base/units.h"
#include "policies/loader.h"

namespace mcpcell::run_pool {
namespace {

Result<uint64_t> Count(const std::string& flag, const std::string& text, uint64_t max) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v > max)
    return Error::Msg(flag + ": \"" + text + "\" is not a whole number from 0 to " +
                      std::to_string(max));
  return v;
}

Result<uint64_t> Size(const std::string& flag, const std::string& text) {
  const uint64_t bytes = ParseSize(text).value_or(0);
  if (bytes == 0) return Error::Msg(flag + ": \"" + text + "\" is not a size like 512M or 1GiB");
  return bytes;
}

}  // namespace

void AddCellFlags(CLI::App& command, CellFlags& f) {
  command.add_option("--state-dir", f.state_dir, "State dir for cells and the template")
      ->capture_default_str();
  command
      .add_option("--policy", f.policy,
                  "Policy: a shipped profile (default, offline-strict, dev) or a .toml file, "
                  "as for `mcpcell serve`; the flags below override it. Egress and packages "
                  "need `mcpcell serve`: its network egress must be \"deny\" and its "
                  "packages mode \"disabled\"")
      ->capture_default_str();
  command.add_option("--disk", f.disk,
                     "Size of the fresh /workspace and of the writable layers, e.g. 1G "
                     "(default: the policy's; a tmpfs that counts against --memory)");
  command.add_option("--memory", f.memory, "Memory limit, e.g. 512M (default: the policy's)");
  command.add_option("--pids", f.pids,
                     "Maximum number of processes (0: no limit; default: the policy's)");
  command.add_option(
      "--cpu", f.cpu,
      "CPU limit in millicores, 1000 = one CPU (0: no limit; default: the policy's)");
  command.add_flag("--no-seccomp", f.no_seccomp, "Disable the seccomp filter (debugging only)");
}

Result<policies::PolicyOverrides> ParseCellFlags(const CellFlags& f) {
  policies::PolicyOverrides o;
  if (!f.disk.empty()) {
    auto v = Size("--disk", f.disk);
    if (!v) return v.error();
    o.disk_bytes = *v;
  }
  if (!f.memory.empty()) {
    auto v = Size("--memory", f.memory);
    if (!v) return v.error();
    o.memory_bytes = *v;
  }
  if (!f.pids.empty()) {
    auto v = Count("--pids", f.pids, 1u << 22);
    if (!v) return v.error();
    o.pids = *v;
  }
  if (!f.cpu.empty()) {
    auto v = Count("--cpu", f.cpu, 1024 * 1000);
    if (!v) return v.error();
    o.cpu_millicores = static_cast<uint32_t>(*v);
  }
  if (f.no_seccomp) o.seccomp = false;
  o.workspace_dir = f.workspace;
  return o;
}

Status CheckNeedsNoServe(const policies::Policy& p) {
  const std::string policy = "policy \"" + p.name + "\" (" + p.source + ") ";
  if (p.network.egress_allowed) {
    return Error::Msg(policy +
                      "allows egress through the proxy ([network] egress = \"allowlist\"), "
                      "which only `mcpcell serve` runs; use a policy with egress = \"deny\"");
  }
  if (p.packages.mode != policies::PackagesMode::kDisabled) {
    const char* mode = p.packages.mode == policies::PackagesMode::kOnline ? "online" : "offline";
    return Error::Msg(policy +
                      "installs packages through the package service ([packages] mode = \"" + mode +
                      "\"), which only `mcpcell serve` runs; use a policy with mode = "
                      "\"disabled\"");
  }
  if (!p.filesystem.workspace_name.empty()) {
    return Error::Msg(policy + "names a workspace the server owns and locks (workspace = "
                               "\"persistent:" + p.filesystem.workspace_name +
                      "\"), which only `mcpcell serve` does; use --workspace DIR");
  }
  return Ok();
}

Result<policies::Policy> ResolveCellPolicy(const CellFlags& f) {
  auto overrides = ParseCellFlags(f);
  if (!overrides) return overrides.error();
  auto base = policies::ResolvePolicy(f.policy, {f.state_dir});
  if (!base) return base.error().Wrap("--policy " + f.policy);
  if (Status s = CheckNeedsNoServe(*base); !s) return s.error();
  auto policy = policies::ApplyOverrides(std::move(*base), *overrides, f.state_dir);
  if (!policy) return policy.error();
  return policy;
}

Result<std::string> PoolKey(const policies::Policy& policy, const std::string& state_dir) {
  auto spec = policies::CompileCellSpec(policy, kPoolKeyCellId, state_dir, "");
  if (!spec) return spec.error();
  return policies::DescribeCellSpec(*spec);
}

}  // namespace mcpcell::run_pool
