// The load generator's four ways of loading a server, each one run against one server:
//   closed: K sessions (each with its cell, made by a first call) call back to back;
//   open:   calls arrive at a fixed rate over K sessions whatever the answers do (latency
//           counted from each call's scheduled time, so a stalled server is not hidden);
//   burst:  N new sessions at once, each initialize + one call (connect -> first result);
//   hold:   N sessions live at once, each with its cell, then warm calls spread over them.
// The figures of the measured phase come back in a RunResult; the server's CPU, threads,
// RSS and fds are read from /proc/<pid> before, during (sampled) and after it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace http_load {

enum class Mode { kClosed, kOpen, kBurst, kHold };

struct RunOptions {
  Mode mode = Mode::kClosed;
  int sessions = 16;          // closed, open: sessions; burst, hold: new/live sessions
  int calls = 100;            // closed: per session; hold: warm calls in all
  double rate = 200;          // open: calls per second
  double duration_s = 10;     // open
  int concurrency = 16;       // hold: warm calls in flight
  int open_concurrency = 32;  // hold: sessions being opened at once
  std::string command = "true";
  // burst: a first burst of `prime` new sessions (not measured, closed after), then
  // `settle_s` seconds before the measured burst, so a pool that grows with demand can show
  // what it does for the next burst (settle alone: time to fill a pool's floor).
  int prime = 0;
  double settle_s = 0;
  std::chrono::milliseconds timeout{60000};
};

struct RunResult {
  std::vector<double> latency_ms;          // the measured phase, sorted
  std::map<std::string, uint64_t> errors;  // by kind, every phase
  uint64_t ok = 0;                         // measured calls (or sessions, in burst) that succeeded
  double wall_s = 0;                       // the measured phase
  double server_cpu_ms = 0;                // the server's CPU over the measured phase
  double client_cpu_ms = 0;                // this process's CPU over the measured phase
  uint64_t units = 0;  // calls (closed, open, hold) or new sessions (burst) measured
  uint64_t threads_max = 0, rss_max_kib = 0, fds_max = 0;  // sampled in the measured phase
  // hold only: the state with every session live
  uint64_t live = 0, threads_live = 0, fds_live = 0;
  double rss_live_kib = 0, host_kib_per_cell = 0, open_wall_s = 0;
  double host_tasks_per_cell = 0, server_fds_per_session = 0;
  double idle_cpu_percent = 0;  // the server's CPU over 3 s with every session live and no call
};

double Percentile(const std::vector<double>& sorted, double p);

// Throws std::runtime_error when the server cannot be reached at all.
RunResult RunLoad(const RunOptions& options, const std::string& url, pid_t server_pid);

}  // namespace http_load
