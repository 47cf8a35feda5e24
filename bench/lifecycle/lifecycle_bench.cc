// lifecycle_bench: what pausing, resuming, restoring and forking a session costs (issue 28).
//
// `--rows pause` (the default): one CellSession (the namespace backend, as `mcpcell serve`
// makes it) whose cell holds 50 processes and about 200 MiB resident: one python3 holding
// 200 MiB of touched memory and 49 `sleep`s, started by the first call. Each round, in
// this order:
//   `call running`  Acquire + Exec /bin/true on the running session (the baseline),
//   `pause`         PauseIdleCell: the freeze of the cgroup, as the reaper does it,
//   `resume`        Acquire on the paused session: the thaw, before any request,
//   `call paused`   a second pause, then Acquire + Exec /bin/true: what a client waits for
//                   when its call arrives at a paused session.
// Prints p50 and p95 per row, the processes and memory of the cell, and the difference and
// ratio of `call paused` to `call running`.
// `--rows fork` (fork_rows.h): restore and fork from a snapshot of a 1 MiB and a 1 GiB
// workspace beside a warm-pool session's first call; `--rows all` runs both. Targets and
// figures: bench/lifecycle/README.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/lifecycle/fork_rows.h"
#include "sandbox/cell.h"
#include "sandbox/cell_session.h"
#include "sandbox/state_dir.h"

namespace {

namespace sb = mcpcell::sandbox;
using Clock = std::chrono::steady_clock;

constexpr const char* kBusyCell =
    "for i in $(seq 49); do sleep 100000 & done; "
    "python3 -c 'import time; b = b\"x\" * (200 << 20); time.sleep(100000)' & "
    "sleep 1";  // python3 has touched its memory by then

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string p(buf, n > 0 ? n : 0);
  return p.substr(0, p.rfind('/'));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

bool Run(const sb::CellLease& lease, const std::string& command) {
  sb::ExecOptions o;
  o.argv = {"/bin/sh", "-c", command};
  o.timeout = std::chrono::seconds(60);
  auto r = lease.Exec(o);
  if (!r) std::fprintf(stderr, "exec %s: %s\n", command.c_str(), r.error().message.c_str());
  return r && !r->signaled && r->exit_code == 0;
}

// Waits past the session's pause_idle and pauses it; the time of PauseIdleCell, or -1.
double Pause(sb::CellSession& session) {
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const Clock::time_point t = Clock::now();
  mcpcell::Status s = session.PauseIdleCell();
  const double ms = MsSince(t);
  if (!s || !session.Info().paused) {
    std::fprintf(stderr, "pause: %s\n", s ? "not paused" : s.error().message.c_str());
    return -1;
  }
  return ms;
}

struct Rows {
  std::vector<double> running, pause, resume, paused_call;
};

bool Round(sb::CellSession& session, Rows& rows) {
  Clock::time_point t = Clock::now();
  {
    auto lease = session.Acquire();
    if (!lease || !Run(*lease, "/bin/true")) return false;
  }
  rows.running.push_back(MsSince(t));
  const double pause = Pause(session);
  if (pause < 0) return false;
  rows.pause.push_back(pause);
  t = Clock::now();
  {
    auto lease = session.Acquire();
    if (!lease) return false;
    rows.resume.push_back(MsSince(t));
  }
  if (Pause(session) < 0) return false;
  t = Clock::now();
  {
    auto lease = session.Acquire();
    if (!lease || !Run(*lease, "/bin/true")) return false;
  }
  rows.paused_call.push_back(MsSince(t));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 50;
  std::string which = "pause";
  std::vector<uint64_t> fork_mib = {1, 1024};
  bool breakdown = false;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--rounds") == 0 && has_value) {
      rounds = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--rows") == 0 && has_value) {
      which = argv[++i];
    } else if (std::strcmp(argv[i], "--fork-mib") == 0 && has_value) {
      fork_mib = {std::strtoull(argv[++i], nullptr, 10)};
    } else if (std::strcmp(argv[i], "--breakdown") == 0) {
      breakdown = true;
    } else {
      std::fprintf(stderr,
                   "usage: lifecycle_bench [--rounds N] [--rows pause|fork|all] "
                   "[--fork-mib MIB] [--breakdown]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/mcpcell-lifecycle-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string state = tmpl;
  int status = 0;
  if (which == "fork" || which == "all") {
    for (uint64_t mib : fork_mib) {
      lifecycle_bench::ForkOptions f{SelfDir() + "/mcpcell-init", state, rounds, mib << 20,
                                     breakdown};
      if (!lifecycle_bench::RunForkRows(f)) status = 1;
    }
    (void)sb::ReapOrphans(state);
    if (which == "fork") {
      (void)sb::RemoveCellDir(state);
      std::filesystem::remove_all(state);
      return status;
    }
  }
  sb::CellSessionOptions o;
  o.create.init_path = SelfDir() + "/mcpcell-init";
  o.pause_idle = std::chrono::milliseconds(1);
  o.idle_timeout = std::chrono::hours(1);
  auto factory = [&state](const std::string& id) -> mcpcell::Result<sb::CellSpec> {
    sb::CellSpec spec = sb::DefaultCellSpec(id, state);
    spec.limits.memory_max_bytes = 1ull << 30;
    spec.limits.pids_max = 256;
    return spec;
  };
  {
    sb::CellSession session("bench", factory, o);
    {
      auto lease = session.Acquire();
      if (!lease || !Run(*lease, kBusyCell)) return 1;
      auto usage = lease->Usage();
      if (!usage) {
        std::fprintf(stderr, "no cgroup: %s\n", usage.error().message.c_str());
        return 1;
      }
      std::printf("cell: %llu processes, %.0f MiB resident\n",
                  static_cast<unsigned long long>(usage->pids_current),
                  static_cast<double>(usage->memory_current_bytes) / (1 << 20));
    }
    Rows rows;
    for (int r = 0; r < rounds && status == 0; ++r) {
      if (!Round(session, rows)) status = 1;
    }
    std::printf("%-14s %8s %8s   (%d rounds)\n", "row", "p50 ms", "p95 ms", rounds);
    auto row = [](const char* name, const std::vector<double>& v) {
      std::printf("%-14s %8.2f %8.2f\n", name, Percentile(v, 0.5), Percentile(v, 0.95));
    };
    row("call running", rows.running);
    row("pause", rows.pause);
    row("resume", rows.resume);
    row("call paused", rows.paused_call);
    const double run50 = Percentile(rows.running, 0.5),
                 paused50 = Percentile(rows.paused_call, 0.5);
    std::printf("\ncall paused - call running = %+.2f ms at p50 (target <= 5 ms); ratio %.2f\n",
                paused50 - run50, run50 > 0 ? paused50 / run50 : 0);
    (void)session.Close();
  }
  (void)sb::ReapOrphans(state);
  (void)sb::RemoveCellDir(state);
  std::filesystem::remove_all(state);
  return status;
}
