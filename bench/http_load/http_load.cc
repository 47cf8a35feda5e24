// http_load: a load generator for mcpcell over Streamable HTTP (issue 29). Starts the
// server(s) under test (or targets running ones), runs one mode (load_modes.h) against
// each, round by round, and prints each run's figures and, with two servers, B/A ratios of
// the medians over the rounds, so a change is measured beside its baseline in one run.
//
//   http_load --server-a build/bin/mcpcell [--server-b other/mcpcell] --mode burst --sessions 100
//   http_load --server-a http://127.0.0.1:8080/mcp --pid-a 1234 --mode closed
// Exit status: 0, 1 when a server cannot be started or reached, 3 when a run had no
// successful call.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/http_load/load_modes.h"
#include "bench/http_load/server_process.h"

namespace http_load {
namespace {

struct Target {
  std::string label, server;
  pid_t pid = 0;
  std::string args;  // extra serve arguments of this one
};

using Figures = std::map<std::string, double>;  // named figures of one run

Figures Summarize(const RunOptions& o, const RunResult& r) {
  Figures f;
  f["calls/s"] = r.wall_s > 0 ? static_cast<double>(r.ok) / r.wall_s : 0;
  f["p50 ms"] = Percentile(r.latency_ms, 50);
  f["p95 ms"] = Percentile(r.latency_ms, 95);
  f["p99 ms"] = Percentile(r.latency_ms, 99);
  f["p99.9 ms"] = Percentile(r.latency_ms, 99.9);
  uint64_t errors = 0;
  for (const auto& [kind, n] : r.errors) errors += n;
  f["errors"] = static_cast<double>(errors);
  const char* per = o.mode == Mode::kBurst ? "server CPU ms/new session" : "server CPU ms/call";
  f[per] = r.units > 0 ? r.server_cpu_ms / static_cast<double>(r.units) : 0;
  f["client CPU ms/call"] = r.units > 0 ? r.client_cpu_ms / static_cast<double>(r.units) : 0;
  f["server threads max"] = static_cast<double>(r.threads_max);
  f["server RSS max MiB"] = static_cast<double>(r.rss_max_kib) / 1024.0;
  f["server fds max"] = static_cast<double>(r.fds_max);
  if (o.mode == Mode::kHold) {
    f["live sessions"] = static_cast<double>(r.live);
    f["open all s"] = r.open_wall_s;
    f["server idle CPU %"] = r.idle_cpu_percent;
    f["threads live"] = static_cast<double>(r.threads_live);
    f["fds live"] = static_cast<double>(r.fds_live);
    f["server RSS live MiB"] = r.rss_live_kib / 1024.0;
    f["host MiB/cell"] = r.host_kib_per_cell / 1024.0;
    f["host tasks/cell"] = r.host_tasks_per_cell;
    f["server fds/session"] = r.server_fds_per_session;
  }
  return f;
}

void PrintRun(const Target& t, int round, const Figures& f, const RunResult& r) {
  std::printf("%s round %d:", t.label.c_str(), round);
  for (const auto& [name, value] : f) std::printf("  %s %.3f", name.c_str(), value);
  std::printf("\n");
  for (const auto& [kind, n] : r.errors) {
    std::printf("%s round %d:   error %s x%llu\n", t.label.c_str(), round, kind.c_str(),
                static_cast<unsigned long long>(n));
  }
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Many sessions need many sockets, here and in the server (which inherits the limit): the
// soft limit goes to the hard one, and as root both go to fs.nr_open (this process only).
void RaiseFdLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  unsigned long long nr_open = 0;
  if (FILE* f = std::fopen("/proc/sys/fs/nr_open", "r")) {
    if (std::fscanf(f, "%llu", &nr_open) != 1) nr_open = 0;
    std::fclose(f);
  }
  rlimit wanted{nr_open, nr_open};
  if (nr_open > rl.rlim_max && ::setrlimit(RLIMIT_NOFILE, &wanted) == 0) return;
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

int Main(int argc, char** argv) {
  CLI::App app{"Load generator for mcpcell over Streamable HTTP (bench/http_load/README.md)"};
  RunOptions o;
  std::string mode = "closed", extra_args, parent = "/dev/shm";
  Target a{"A", "", 0, ""}, b{"B", "", 0, ""};
  int rounds = 1;
  long timeout_s = 60;
  app.add_option("--server-a", a.server, "mcpcell binary to start, or http://... of a running one")
      ->required();
  app.add_option("--server-b", b.server, "the server to compare with A (same forms)");
  app.add_option("--pid-a", a.pid, "pid of server A when it is a URL (for /proc figures)");
  app.add_option("--pid-b", b.pid, "pid of server B when it is a URL");
  app.add_option("--server-args", extra_args, "extra arguments for started servers (one string)");
  app.add_option("--server-args-a", a.args, "more arguments for server A only (after those)");
  app.add_option("--server-args-b", b.args, "more arguments for server B only (after those)");
  app.add_option("--state-parent", parent,
                 "where started servers get their state dir (a tmpfs, like /run on most hosts)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_option("--mode", mode, "closed | open | burst | hold")
      ->check(CLI::IsMember({"closed", "open", "burst", "hold"}))
      ->capture_default_str();
  app.add_option("--sessions", o.sessions, "sessions (burst: new at once; hold: live)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--calls", o.calls, "closed: calls per session; hold: warm calls in all")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rate", o.rate, "open: calls per second")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--duration", o.duration_s, "open: seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "hold: warm calls in flight")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--open-concurrency", o.open_concurrency, "hold: sessions opened at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--command", o.command, "run_command's command")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--prime", o.prime,
                 "burst: new sessions of an unmeasured first burst (0: none), then --settle")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--settle", o.settle_s, "burst: seconds between start (or prime) and the burst")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--rounds", rounds, "runs per server, alternating A and B")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.mode = mode == "open"    ? Mode::kOpen
           : mode == "burst" ? Mode::kBurst
           : mode == "hold"  ? Mode::kHold
                             : Mode::kClosed;
  o.timeout = std::chrono::seconds(timeout_s);
  RaiseFdLimit();

  std::vector<Target> targets = {a};
  if (!b.server.empty()) targets.push_back(b);
  for (const Target& t : targets) {
    std::printf("%s = %s %s\n", t.label.c_str(), t.server.c_str(), t.args.c_str());
  }
  std::map<std::string, std::map<std::string, std::vector<double>>>
      all;              // target -> figure -> runs
  int failed_runs = 0;  // runs in which no measured call (or new session) succeeded
  for (int round = 1; round <= rounds; ++round) {
    for (const Target& t : targets) {
      try {
        ServerUnderTest server(t.server, t.pid, extra_args + " " + t.args, parent);
        RunResult r = RunLoad(o, server.url(), server.pid());
        Figures f = Summarize(o, r);
        PrintRun(t, round, f, r);
        if (r.ok == 0) failed_runs++;
        for (const auto& [name, value] : f) all[t.label][name].push_back(value);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "http_load: %s round %d: %s\n", t.label.c_str(), round, e.what());
        return 1;
      }
    }
  }
  if (targets.size() == 2) {
    std::printf("medians over %d round(s), B/A:\n", rounds);
    for (const auto& [name, runs] : all["A"]) {
      const double ma = Median(runs), mb = Median(all["B"][name]);
      std::printf("  %-26s A %10.3f  B %10.3f  B/A %s\n", name.c_str(), ma, mb,
                  ma != 0 ? std::to_string(mb / ma).substr(0, 5).c_str() : "-");
    }
  }
  if (failed_runs > 0) {
    std::fprintf(stderr, "http_load: %d run(s) had no successful call; see the errors above\n",
                 failed_runs);
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace http_load

int main(int argc, char** argv) { return http_load::Main(argc, argv); }
