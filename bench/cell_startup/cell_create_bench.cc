// cell_create_bench: the server's own CPU per Cell::Create, in a process shaped like a
// server (resident memory and idle threads), side by side with another build of this
// bench (--baseline), interleaved in blocks (issue 29's target for a new session's server
// CPU is in bench/cell_startup/README.md): a fork-style launch of cell init costs in
// proportion to the server's page tables.
//
//   build/bin/cell_create_bench [--rounds N] [--resident-mib M] [--threads T]
//                               [--baseline /other/build/bin/cell_create_bench]
//
// CPU is this process's user + system time (getrusage(RUSAGE_SELF): every thread, no
// child's) across Cell::Create alone; Destroy is outside the measurement. Each round makes
// a cell in a state dir of the bench's own and destroys it. With --raw (used for the
// baseline) it prints one "cpu_us wall_us" line per round and nothing else.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/state_dir.h"

namespace {

using mcpcell::sandbox::Cell;
using mcpcell::sandbox::CellCreateOptions;
using mcpcell::sandbox::DefaultCellSpec;
using mcpcell::sandbox::GenerateCellId;

struct Options {
  int rounds = 60;
  int resident_mib = 512;
  int threads = 16;
  bool raw = false;
  std::string baseline;
};

struct Sample {
  double cpu_ms, wall_ms;
};

double CpuMs() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// What makes this process look like a server: touched memory and idle threads.
class Ballast {
 public:
  Ballast(int mib, int threads) : bytes_(static_cast<size_t>(mib) << 20) {
    memory_ = static_cast<char*>(std::malloc(bytes_ ? bytes_ : 1));
    std::memset(memory_, 1, bytes_);
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_; });
      });
    }
  }
  ~Ballast() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    std::free(memory_);
  }

 private:
  size_t bytes_;
  char* memory_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

bool MakeOne(const std::string& state, Sample& out) {
  const double cpu0 = CpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  auto cell = Cell::Create(DefaultCellSpec(GenerateCellId(), state), CellCreateOptions{});
  const double cpu1 = CpuMs();
  const auto t1 = std::chrono::steady_clock::now();
  if (!cell) {
    std::fprintf(stderr, "cell_create_bench: %s\n", cell.error().message.c_str());
    return false;
  }
  out = {cpu1 - cpu0, std::chrono::duration<double, std::milli>(t1 - t0).count()};
  if (auto s = (*cell)->Destroy(); !s) {
    std::fprintf(stderr, "cell_create_bench: destroy: %s\n", s.error().message.c_str());
    return false;
  }
  return true;
}

// Runs the baseline binary for `rounds` rounds with the same shape; appends its samples.
bool RunBaseline(const Options& o, int rounds, std::vector<Sample>& out) {
  std::string cmd = o.baseline + " --raw --rounds " + std::to_string(rounds) + " --resident-mib " +
                    std::to_string(o.resident_mib) + " --threads " + std::to_string(o.threads);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return false;
  Sample s;
  while (std::fscanf(p, "%lf %lf", &s.cpu_ms, &s.wall_ms) == 2) out.push_back(s);
  return ::pclose(p) == 0;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

void Print(const char* name, const std::vector<Sample>& s) {
  std::vector<double> cpu, wall;
  double sum = 0;
  for (const Sample& x : s) {
    cpu.push_back(x.cpu_ms);
    wall.push_back(x.wall_ms);
    sum += x.cpu_ms;
  }
  std::printf(
      "%-10s %4zu  cpu mean %6.3f  p50 %6.3f  p90 %6.3f ms   wall p50 %6.2f  p90 %6.2f ms\n", name,
      s.size(), s.empty() ? 0 : sum / static_cast<double>(s.size()), Percentile(cpu, 0.5),
      Percentile(cpu, 0.9), Percentile(wall, 0.5), Percentile(wall, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cell_create_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--rounds") {
      o.rounds = std::atoi(next().c_str());
    } else if (a == "--resident-mib") {
      o.resident_mib = std::atoi(next().c_str());
    } else if (a == "--threads") {
      o.threads = std::atoi(next().c_str());
    } else if (a == "--baseline") {
      o.baseline = next();
    } else if (a == "--raw") {
      o.raw = true;
    } else {
      std::fprintf(stderr, "cell_create_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.rounds < 1 || o.resident_mib < 0 || o.threads < 0) {
    std::fprintf(stderr, "cell_create_bench: --rounds >= 1, --resident-mib and --threads >= 0\n");
    return 2;
  }
  char tmpl[] = "/tmp/mcpcell-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string state = tmpl;
  std::vector<Sample> mine, base;
  {
    Ballast ballast(o.resident_mib, o.threads);
    Sample warm;
    if (!MakeOne(state, warm)) return 1;  // first cell: seccomp compile, cgroup probe
    const int block = o.baseline.empty() ? o.rounds : std::max(1, o.rounds / 10);
    for (int done = 0; done < o.rounds; done += block) {
      const int n = std::min(block, o.rounds - done);
      if (!o.baseline.empty() && !RunBaseline(o, n, base)) {
        std::fprintf(stderr, "cell_create_bench: baseline %s failed\n", o.baseline.c_str());
        return 1;
      }
      for (int i = 0; i < n; ++i) {
        Sample s;
        if (!MakeOne(state, s)) return 1;
        if (o.raw) std::printf("%.4f %.4f\n", s.cpu_ms, s.wall_ms);
        mine.push_back(s);
      }
    }
  }
  (void)mcpcell::sandbox::RemoveCellDir(state);
  ::rmdir(state.c_str());
  if (o.raw) return 0;
  std::printf("%d MiB resident, %d idle threads; per Cell::Create, this process's CPU:\n",
              o.resident_mib, o.threads);
  Print("this", mine);
  if (!base.empty()) {
    Print("baseline", base);
    double a = 0, b = 0;
    for (const Sample& s : mine) a += s.cpu_ms;
    for (const Sample& s : base) b += s.cpu_ms;
    a /= static_cast<double>(mine.size());
    b /= static_cast<double>(base.size());
    std::printf("cpu mean this/baseline %.2f (%.3f vs %.3f ms)\n", a / b, a, b);
  }
  return 0;
}
