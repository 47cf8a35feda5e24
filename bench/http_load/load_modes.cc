// See load_modes.h. Everything runs as coroutines on one io_context thread; a phase
// spawns its workers and a /proc sampler, and ends when io_context::run() runs out of work.
#include "bench/http_load/load_modes.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench/http_load/mcp_http_session.h"
#include "bench/http_load/server_process.h"

namespace http_load {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double SelfCpuMs() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

class LoadRun {
 public:
  LoadRun(const RunOptions& o, const std::string& url, pid_t pid)
      : o_(o), endpoint_(ResolveUrl(io_, url)), pid_(pid) {}

  RunResult Run();

 private:
  using Worker = std::function<awaitable<void>(int)>;
  // Runs `workers` copies of `worker` (given their index) and the sampler to completion.
  void Phase(int workers, const Worker& worker);
  awaitable<void> Sampler();
  // Makes sessions [0, n) live, `parallel` at a time, each with one call (its cell).
  void OpenSessions(int n, int parallel);
  void Measure(const std::function<void()>& body);
  void Count(const std::string& error) {
    if (!error.empty()) result_.errors[error]++;
  }
  void CloseSessions();
  void Closed();
  void Open();
  void Burst();
  void Hold();

  const RunOptions& o_;
  asio::io_context io_;
  Endpoint endpoint_;
  pid_t pid_;
  std::vector<std::unique_ptr<McpSession>> sessions_;
  RunResult result_;
  int active_ = 0;
  bool sampling_ = false;
};

void LoadRun::Phase(int workers, const Worker& worker) {
  active_ = workers;
  for (int i = 0; i < workers; ++i) {
    asio::co_spawn(
        io_,
        [this, &worker, i]() -> awaitable<void> {
          co_await worker(i);
          --active_;
        },
        asio::detached);
  }
  if (sampling_) asio::co_spawn(io_, Sampler(), asio::detached);
  io_.run();
  io_.restart();
}

awaitable<void> LoadRun::Sampler() {
  asio::steady_timer timer(io_);
  while (active_ > 0) {
    ProcSample s = SampleProcess(pid_);
    result_.threads_max = std::max(result_.threads_max, s.threads);
    result_.rss_max_kib = std::max(result_.rss_max_kib, s.rss_kib);
    result_.fds_max = std::max(result_.fds_max, s.fds);
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(use_awaitable);
  }
}

void LoadRun::OpenSessions(int n, int parallel) {
  while (static_cast<int>(sessions_.size()) < n) {
    sessions_.push_back(std::make_unique<McpSession>(io_, endpoint_, o_.timeout));
  }
  int next = 0;
  Phase(std::min(parallel, n), [this, &next, n](int) -> awaitable<void> {
    while (next < n) {
      McpSession& s = *sessions_[next++];
      std::string error = co_await s.Open();
      if (error.empty()) error = co_await s.RunCommand(o_.command);
      Count(error.empty() ? "" : "set-up: " + error);
    }
  });
}

// Runs `body` (one or more phases) with the server's and this process's CPU read around it.
void LoadRun::Measure(const std::function<void()>& body) {
  const ProcSample before = SampleProcess(pid_);
  const double client_before = SelfCpuMs();
  const Clock::time_point t0 = Clock::now();
  sampling_ = true;
  body();
  sampling_ = false;
  result_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  result_.client_cpu_ms = SelfCpuMs() - client_before;
  const ProcSample after = SampleProcess(pid_);
  if (before.ok && after.ok) result_.server_cpu_ms = after.cpu_ms - before.cpu_ms;
}

void LoadRun::Closed() {
  OpenSessions(o_.sessions, o_.sessions);
  Measure([this] {
    Phase(o_.sessions, [this](int i) -> awaitable<void> {
      McpSession& s = *sessions_[i];
      for (int c = 0; c < o_.calls && s.open(); ++c) {
        const Clock::time_point t = Clock::now();
        const std::string error = co_await s.RunCommand(o_.command);
        Count(error);
        if (error.empty()) result_.latency_ms.push_back(Ms(Clock::now() - t));
        result_.units++;
      }
    });
  });
}

void LoadRun::Open() {
  OpenSessions(o_.sessions, o_.sessions);
  const uint64_t total = static_cast<uint64_t>(o_.rate * o_.duration_s);
  Measure([this, total] {
    Phase(1, [this, total](int) -> awaitable<void> {
      asio::steady_timer timer(io_);
      const Clock::time_point t0 = Clock::now();
      for (uint64_t i = 0; i < total; ++i) {
        const Clock::time_point due = t0 + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(i / o_.rate));
        timer.expires_at(due);
        co_await timer.async_wait(use_awaitable);
        McpSession& s = *sessions_[i % sessions_.size()];
        ++active_;
        asio::co_spawn(
            io_,
            [this, &s, due]() -> awaitable<void> {
              const std::string error = co_await s.RunCommand(o_.command);
              Count(error);
              if (error.empty()) result_.latency_ms.push_back(Ms(Clock::now() - due));
              --active_;
            },
            asio::detached);
        result_.units++;
      }
    });
  });
}

void LoadRun::Burst() {
  if (o_.prime > 0) {
    for (int i = 0; i < o_.prime; ++i) {
      sessions_.push_back(std::make_unique<McpSession>(io_, endpoint_, o_.timeout));
    }
    Phase(o_.prime, [this](int i) -> awaitable<void> {
      McpSession& s = *sessions_[i];
      std::string error = co_await s.Open();
      if (error.empty()) error = co_await s.RunCommand(o_.command);
      if (!error.empty()) result_.errors["prime: " + error]++;
    });
    CloseSessions();
    sessions_.clear();
  }
  if (o_.settle_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o_.settle_s));
  for (int i = 0; i < o_.sessions; ++i) {
    sessions_.push_back(std::make_unique<McpSession>(io_, endpoint_, o_.timeout));
  }
  Measure([this] {
    const Clock::time_point t0 = Clock::now();
    Phase(o_.sessions, [this, t0](int i) -> awaitable<void> {
      McpSession& s = *sessions_[i];
      std::string error = co_await s.Open();
      if (error.empty()) error = co_await s.RunCommand(o_.command);
      Count(error);
      if (error.empty()) result_.latency_ms.push_back(Ms(Clock::now() - t0));
    });
  });
  result_.units = static_cast<uint64_t>(o_.sessions);
}

void LoadRun::Hold() {
  const ProcSample before = SampleProcess(pid_);
  const Clock::time_point t0 = Clock::now();
  OpenSessions(o_.sessions, o_.open_concurrency);
  result_.open_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const ProcSample live = SampleProcess(pid_);
  for (const auto& s : sessions_) result_.live += s->open();
  result_.threads_live = live.threads;
  result_.fds_live = live.fds;
  result_.rss_live_kib = static_cast<double>(live.rss_kib);
  if (result_.live > 0) {
    const double n = static_cast<double>(result_.live);
    result_.host_tasks_per_cell =
        (static_cast<double>(live.host_tasks) - static_cast<double>(before.host_tasks)) / n;
    result_.server_fds_per_session =
        (static_cast<double>(live.fds) - static_cast<double>(before.fds)) / n;
    result_.host_kib_per_cell = (static_cast<double>(before.host_available_kib) -
                                 static_cast<double>(live.host_available_kib)) /
                                static_cast<double>(result_.live);
  }
  // What holding the sessions costs by itself, before any warm call.
  const Clock::time_point idle_from = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const ProcSample idle_end = SampleProcess(pid_);
  if (live.ok && idle_end.ok) {
    result_.idle_cpu_percent = (idle_end.cpu_ms - live.cpu_ms) / Ms(Clock::now() - idle_from) * 100;
  }
  std::vector<McpSession*> live_sessions;
  for (const auto& s : sessions_) {
    if (s->open()) live_sessions.push_back(s.get());
  }
  if (live_sessions.empty()) return;
  uint64_t next = 0;
  Measure([&] {
    Phase(o_.concurrency, [&](int) -> awaitable<void> {
      while (next < static_cast<uint64_t>(o_.calls)) {
        // Spread over the sessions so every cell is woken, not the same few.
        McpSession& s = *live_sessions[(next++ * 7919) % live_sessions.size()];
        const Clock::time_point t = Clock::now();
        const std::string error = co_await s.RunCommand(o_.command);
        Count(error);
        if (error.empty()) result_.latency_ms.push_back(Ms(Clock::now() - t));
        result_.units++;
      }
    });
  });
}

void LoadRun::CloseSessions() {
  size_t next = 0;
  Phase(std::min<int>(32, static_cast<int>(sessions_.size())),
        [this, &next](int) -> awaitable<void> {
          while (next < sessions_.size()) co_await sessions_[next++]->Close();
        });
}

RunResult LoadRun::Run() {
  switch (o_.mode) {
    case Mode::kClosed:
      Closed();
      break;
    case Mode::kOpen:
      Open();
      break;
    case Mode::kBurst:
      Burst();
      break;
    case Mode::kHold:
      Hold();
      break;
  }
  CloseSessions();
  std::sort(result_.latency_ms.begin(), result_.latency_ms.end());
  result_.ok = result_.latency_ms.size();
  return std::move(result_);
}

}  // namespace

RunResult RunLoad(const RunOptions& options, const std::string& url, pid_t server_pid) {
  try {
    return LoadRun(options, url, server_pid).Run();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace http_load
