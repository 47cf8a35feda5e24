// Appends per second to one audit file, with records shaped like the server's (exec.end
// with a command hash and usage figures), from one thread and from several at once, then
// the time to verify the trail. Checkpoints every 10000 records and rotation at 64 MiB, as
// the defaults are; signed with --signing-key PEM (once per checkpoint).
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "audit/record.h"
#include "audit/trail.h"
#include "audit/verify.h"

using namespace mcpcell;
using Clock = std::chrono::steady_clock;

namespace {

nlohmann::json ExecEnd(int i) {
  return {{"tool", "run_command"},
          {"program", "sh"},
          {"command_sha256", audit::Sha256Hex(std::to_string(i))},
          {"exit_status", 0},
          {"timed_out", false},
          {"duration_ms", 12},
          {"cpu_ms", 8},
          {"peak_memory_bytes", 4 << 20}};
}

double Run(audit::Trail* trail, int records, int threads) {
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([=] {
      for (int i = t; i < records; i += threads) {
        Status s = trail->Append("exec.end", "tenant-a", "session-" + std::to_string(t),
                                 "cell-" + std::to_string(t), ExecEnd(i));
        if (!s) {
          std::fprintf(stderr, "append: %s\n", s.error().message.c_str());
          std::exit(1);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int records = 200000, threads = 4;
  std::string dir, signing_key;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--records"))
      records = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--signing-key"))
      signing_key = argv[i + 1];
    else {
      std::fprintf(
          stderr,
          "usage: audit_bench [--records N] [--threads N] [--dir DIR] [--signing-key PEM]\n");
      return 2;
    }
  }
  bool temp = dir.empty();
  if (temp) {
    char templ[] = "/tmp/audit-bench-XXXXXX";
    if (!mkdtemp(templ)) return 1;
    dir = templ;
  }
  audit::TrailOptions options;
  options.dir = dir + "/audit";
  options.signing_key = signing_key;
  auto trail = audit::Trail::Open(options);
  if (!trail) {
    std::fprintf(stderr, "open: %s\n", trail.error().message.c_str());
    return 1;
  }
  double one = Run(trail->get(), records, 1);
  double many = Run(trail->get(), records, threads);
  (void)(*trail)->Close();
  auto start = Clock::now();
  auto report = audit::VerifyTrail(options.dir, nullptr);
  double verify = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("appends/s, 1 thread:  %.0f (%d records in %.2f s)\n", records / one, records, one);
  std::printf("appends/s, %d threads: %.0f (%d records in %.2f s)\n", threads, records / many,
              records, many);
  std::printf("verify: %.0f records/s (%s)\n", report ? report->records / verify : 0.0,
              report && report->ok() ? "ok" : "FAILED");
  if (temp) std::filesystem::remove_all(dir);
  return report && report->ok() ? 0 : 1;
}
