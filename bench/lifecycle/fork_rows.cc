// Restore and fork rows of lifecycle_bench (fork_rows.h). Drives the sandbox pieces the way
// serve/session_state.cc does: a capture of the frozen cell's writable layers into a
// SnapshotStore, then "a new cell over snapshot S" (CellSession::RestartOver) for restore
// and fork, and the warm pool of a CellSessionManager for the baseline.
#include "bench/lifecycle/fork_rows.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_session.h"
#include "sandbox/snapshot_store.h"

namespace lifecycle_bench {
namespace {

namespace sb = mcpcell::sandbox;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

bool Run(const sb::CellLease& lease, const std::string& command) {
  sb::ExecOptions o;
  o.argv = {"/bin/sh", "-c", command};
  o.timeout = std::chrono::minutes(5);
  auto r = lease.Exec(o);
  if (!r) std::fprintf(stderr, "exec %s: %s\n", command.c_str(), r.error().message.c_str());
  if (r && (r->signaled || r->exit_code != 0))
    std::fprintf(stderr, "exec %s: exit %d: %s\n", command.c_str(), r->exit_code,
                 r->err.data.c_str());
  return r && !r->signaled && r->exit_code == 0;
}

// Acquire + Exec /bin/true: a session's first call as a client sees it (ms, -1 on failure).
double FirstCall(sb::CellSession& session) {
  const Clock::time_point t = Clock::now();
  auto lease = session.Acquire();
  if (!lease) {
    std::fprintf(stderr, "acquire: %s\n", lease.error().message.c_str());
    return -1;
  }
  if (!Run(*lease, "/bin/true")) return -1;
  return MsSince(t);
}

// Captures the session's cell as serve/session_state.cc does (root, usr, workspace).
mcpcell::Result<std::string> Capture(sb::CellSession& session, sb::SnapshotStore& store) {
  mcpcell::Result<sb::CaptureReport> report = mcpcell::Error::Msg("not run");
  mcpcell::Status st =
      session.WithFrozenCell([&](sb::CellInstance& cell, const sb::SessionBase*, bool) {
        auto layers = cell.WritableLayers();
        if (!layers) return mcpcell::Status(layers.error());
        auto source = [&](std::string name, std::string dir) {
          return sb::LayerSource{name, dir, layers->uid_base, layers->gid_base, {}};
        };
        std::vector<sb::LayerSource> sources = {source("root", layers->root_upper)};
        for (const auto& [path, upper] : layers->system_uppers)
          if (path == "/usr") sources.push_back(source("usr", upper));
        sources.push_back(source("workspace", layers->workspace));
        report = store.Capture("bench", "", sources, {});
        return report ? mcpcell::Ok() : mcpcell::Status(report.error());
      });
  if (!st) return st.error();
  return report->info.id;
}

mcpcell::Result<sb::SessionBase> BaseOf(sb::SnapshotStore& store, const std::string& id) {
  static const std::map<std::string, std::string> targets = {
      {"root", "/"}, {"usr", "/usr"}, {"workspace", "/workspace"}};
  auto dirs = store.LayerDirs(id);
  if (!dirs) return dirs.error();
  sb::SessionBase base{id, {}, false};
  for (const auto& [name, dir] : *dirs) base.layers.push_back({targets.at(name), dir});
  return base;
}

// Waits until the manager's warm pool has a ready cell (and, when it parks cells, a
// parked one too), so each round starts from a full pool.
void WaitForPool(sb::CellSessionManager& manager) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  while ((manager.warm_ready() == 0 || manager.warm_parked() == 0) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the refill's cleanup settles
}

struct Rows {
  std::vector<double> warm, cold, fork, fork_cold, verify, restore;
};

void Print(const Rows& rows, uint64_t bytes) {
  std::printf("\nworkspace %.0f MiB        %8s %8s\n", static_cast<double>(bytes) / (1 << 20),
              "p50 ms", "p95 ms");
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-24s %8.2f %8.2f\n", name, Percentile(v, 0.5), Percentile(v, 0.95));
  };
  row("warm pool first call", rows.warm);
  row("cold first call", rows.cold);
  row("fork first call", rows.fork);
  row("fork, cold cell", rows.fork_cold);
  row("verify", rows.verify);
  row("restore", rows.restore);
  const double warm = Percentile(rows.warm, 0.5), fork = Percentile(rows.fork, 0.5);
  std::printf("fork - warm = %+.2f ms at p50 (target <= 5 ms); ratio %.2f\n", fork - warm,
              warm > 0 ? fork / warm : 0);
}

// The Verify a server's snapshot_restore runs before it restarts a session over the
// snapshot (serve/session_state.cc): a fork pays it too.
bool VerifyBase(sb::SnapshotStore& store, const sb::SessionBase& base) {
  if (mcpcell::Status ok = store.Verify(base.snapshot_id); !ok) {
    std::fprintf(stderr, "verify: %s\n", ok.error().message.c_str());
    return false;
  }
  return true;
}

bool ForkRound(sb::CellSessionManager& manager, sb::SnapshotStore& store,
               const sb::SessionBase& base, const sb::CellSessionOptions& cold_options,
               const sb::CellSpecFactory& factory, int round, Rows& rows) {
  WaitForPool(manager);
  auto warm = manager.Get("warm-" + std::to_string(round));
  if (!warm) return false;
  const double w = FirstCall(**warm);
  (void)manager.Close("warm-" + std::to_string(round));
  WaitForPool(manager);
  const Clock::time_point t = Clock::now();
  auto child = manager.Get("fork-" + std::to_string(round));
  if (!child || !VerifyBase(store, base) || !(*child)->RestartOver(base)) return false;
  const double f = FirstCall(**child);
  const double fork = f < 0 ? -1 : MsSince(t);
  if (auto lease = (*child)->Acquire();  // the child sees the parent's files
      !lease || !Run(*lease, "test -f /workspace/f0 && grep -q parent /workspace/marker"))
    return false;
  (void)manager.Close("fork-" + std::to_string(round));
  double c = -1, fc = -1;
  {
    sb::CellSession cold("cold", factory, cold_options);
    c = FirstCall(cold);
  }
  {
    sb::CellSession cold("cold-fork", factory, cold_options);  // no pool: the cell is made now
    const Clock::time_point t2 = Clock::now();
    if (VerifyBase(store, base) && cold.RestartOver(base) && FirstCall(cold) >= 0) fc = MsSince(t2);
  }
  if (w < 0 || fork < 0 || c < 0 || fc < 0) return false;
  rows.fork_cold.push_back(fc);
  rows.warm.push_back(w);
  rows.fork.push_back(fork);
  rows.cold.push_back(c);
  return true;
}

// Restore as the server does it: verify the snapshot, restart the session over it (its cell
// is ended), then the first call in the new cell.
bool RestoreRound(sb::CellSession& parent, sb::SnapshotStore& store, const sb::SessionBase& base,
                  Rows& rows) {
  if (FirstCall(parent) < 0) return false;  // a live cell to end, as a restore finds
  Clock::time_point t = Clock::now();
  if (!VerifyBase(store, base)) return false;
  rows.verify.push_back(MsSince(t));
  t = Clock::now();
  if (auto r = parent.RestartOver(base); !r) {
    std::fprintf(stderr, "restart: %s\n", r.error().message.c_str());
    return false;
  }
  if (FirstCall(parent) < 0) return false;
  rows.restore.push_back(MsSince(t) + rows.verify.back());
  return true;
}

// Cells over the snapshot's layers made directly, cold (Create) or parked then unparked
// (what a fork from the warm pool waits for): the mean of each setup step.
void PrintBreakdown(const sb::CellSpecFactory& factory, const sb::SessionBase& base,
                    const ForkOptions& options, bool parked) {
  std::map<std::string, double> sum;
  std::vector<std::string> order;
  double total = 0;
  int n = 0;
  sb::CellCreateOptions create;
  create.init_path = options.init_path;
  for (int i = 0; i < options.rounds; ++i) {
    auto spec = factory(sb::GenerateCellId());
    if (!spec) return;
    if (!parked) spec->layers = base.layers;
    auto cell = parked ? sb::Cell::CreateParked(*spec, create) : sb::Cell::Create(*spec, create);
    if (!cell) {
      std::fprintf(stderr, "create: %s\n", cell.error().message.c_str());
      return;
    }
    const size_t made_steps = (*cell)->timings().steps_us.size();
    if (parked) {
      if (mcpcell::Status s = (*cell)->Unpark(base.layers); !s) {
        std::fprintf(stderr, "unpark: %s\n", s.error().message.c_str());
        return;
      }
    }
    const auto& steps = (*cell)->timings().steps_us;
    for (size_t k = parked ? made_steps : 0; k < steps.size(); ++k) {
      if (!sum.count(steps[k].first)) order.push_back(steps[k].first);
      sum[steps[k].first] += static_cast<double>(steps[k].second) / 1000;
    }
    const auto& t = (*cell)->timings();
    total += static_cast<double>(parked ? t.unpark_us : t.total_us) / 1000;
    ++n;
    (void)(*cell)->Destroy();
  }
  std::printf("\n%s over %zu layers, mean of %d (ms):", parked ? "unpark" : "cold cell",
              base.layers.size(), n);
  for (const std::string& step : order) std::printf(" %s %.2f,", step.c_str(), sum[step] / n);
  std::printf(" total %.2f\n", total / n);
}

}  // namespace

bool RunForkRows(const ForkOptions& options) {
  auto factory = [&options](const std::string& id) -> mcpcell::Result<sb::CellSpec> {
    sb::CellSpec spec = sb::DefaultCellSpec(id, options.state_dir);
    spec.limits.memory_max_bytes = 4ull << 30;  // the workspace tmpfs is charged here
    spec.tmpfs.workspace_bytes = 2ull << 30;
    return spec;
  };
  sb::CellSessionOptions o;
  o.create.init_path = options.init_path;
  o.idle_timeout = std::chrono::hours(1);
  sb::CellSessionOptions cold_options = o;
  o.warm_cells = 1;
  sb::CellSessionManager manager(factory, o);
  sb::SnapshotStore store(options.state_dir + "/snapshots");
  auto parent = manager.Get("parent");
  if (!parent) return false;
  {
    auto lease = (*parent)->Acquire();
    const uint64_t mib = std::max<uint64_t>(options.workspace_bytes >> 20, 1);
    const std::string fill = "cd /workspace && left=" + std::to_string(mib) +
                             "; i=0; while [ $left -gt 0 ]; do n=$((left < 64 ? left : 64)); "
                             "head -c ${n}M /dev/urandom > f$i; left=$((left - n)); "
                             "i=$((i + 1)); done; echo parent > marker";
    if (!lease || !Run(*lease, fill)) return false;
  }
  Clock::time_point t = Clock::now();
  auto id = Capture(**parent, store);
  if (!id) {
    std::fprintf(stderr, "capture: %s\n", id.error().message.c_str());
    return false;
  }
  std::printf("\ncaptured %.0f MiB in %.0f ms (snapshot %s)\n",
              static_cast<double>(options.workspace_bytes) / (1 << 20), MsSince(t), id->c_str());
  auto base = BaseOf(store, *id);
  if (!base) return false;
  // The first Verify after the capture (what the first fork or restore runs: the capture
  // recorded what it hashed) against one that reads every byte (what it cost before).
  uint64_t first_bytes = 0, all_bytes = 0;
  t = Clock::now();
  if (mcpcell::Status ok = store.Verify(*id, false, &first_bytes); !ok) return false;
  const double first_ms = MsSince(t);
  t = Clock::now();
  if (mcpcell::Status ok = store.Verify(*id, true, &all_bytes); !ok) return false;
  const double all_ms = MsSince(t);
  std::printf(
      "first verify after the capture %.2f ms (%llu bytes read); rehash of all "
      "%.2f ms (%llu bytes read)\n",
      first_ms, static_cast<unsigned long long>(first_bytes), all_ms,
      static_cast<unsigned long long>(all_bytes));
  Rows rows;
  for (int r = 0; r < options.rounds; ++r) {
    if (!ForkRound(manager, store, *base, cold_options, factory, r, rows)) return false;
    if (!RestoreRound(**parent, store, *base, rows)) return false;
  }
  Print(rows, options.workspace_bytes);
  if (options.breakdown) {
    PrintBreakdown(factory, *base, options, false);
    PrintBreakdown(factory, *base, options, true);
  }
  manager.CloseAll(false);
  (void)store.Delete("bench", *id);
  return true;
}

}  // namespace lifecycle_bench
