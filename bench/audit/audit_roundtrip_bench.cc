// audit_roundtrip_bench: the warm `run_command true` round trip with auditing on, beside
// off, in one run (issue 27: at most 5% slower with auditing on).
//
// Two `mcpcell serve` children over pipes (as Claude Desktop runs it), each with a state
// dir of its own: "off" with --policy-off (default: the shipped `default` profile) and
// "on" with --policy-on (a policy whose [audit] section turns auditing on). Each round
// makes one warm call to each, in an order that alternates, so machine noise hits both
// alike. Prints p50, p95, the on/off ratio of the medians, and how many trail records
// each server wrote per call (read from <state dir>/audit), which shows what is audited.
//
// Usage: audit_roundtrip_bench [--rounds N] [--mcpcell PATH] [--policy-on P] [--policy-off P]
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "audit/query.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// One `mcpcell serve` child over pipes, stderr to /dev/null.
class Server {
 public:
  Server(const std::string& binary, const std::string& state_dir, const std::string& policy) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> cmd = {binary, "serve", "--state-dir", state_dir, "--policy", policy};
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) throw std::runtime_error("spawn " + binary + ": " + std::strerror(rc));
    Request("initialize", {{"protocolVersion", "2025-06-18"},
                           {"capabilities", Json::object()},
                           {"clientInfo", {{"name", "audit-bench"}, {"version", "1"}}}});
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  ~Server() {
    close(to_);
    int status;
    waitpid(pid_, &status, 0);
    close(from_);
  }
  void Call(const Json& args) {
    Json r = Request("tools/call", {{"name", "run_command"}, {"arguments", args}});
    if (r.value("isError", false)) throw std::runtime_error("run_command: " + r.dump());
  }

 private:
  Json Request(const std::string& method, Json params) {
    int id = next_id_++;
    Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    for (;;) {
      Json m = Json::parse(ReadLine());
      if (m.contains("id") && m["id"] == id) {
        if (m.contains("error")) throw std::runtime_error(m["error"].dump());
        return m["result"];
      }
    }
  }
  void Send(const Json& m) {
    std::string line = m.dump() + "\n";
    if (write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("write to server");
  }
  std::string ReadLine() {
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      char chunk[65536];
      ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) throw std::runtime_error("server closed stdout (see its --log-file)");
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 1;
  std::string buf_;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

uint64_t TrailRecords(const std::string& state_dir) {
  uint64_t n = 0;
  std::string dir = state_dir + "/audit";
  if (!std::filesystem::exists(dir)) return 0;
  (void)mcpcell::audit::ForEachRecord(
      dir, [&n](const Json&) { ++n; }, nullptr);
  return n;
}

std::string SelfDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 300;
  std::string binary = SelfDir() + "/mcpcell";
  std::string policy_off = "default", policy_on = "default";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (flag == "--mcpcell")
      binary = argv[i + 1];
    else if (flag == "--policy-on")
      policy_on = argv[i + 1];
    else if (flag == "--policy-off")
      policy_off = argv[i + 1];
    else {
      std::fprintf(stderr, "audit_roundtrip_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (rounds < 10) rounds = 10;
  std::string templ = std::filesystem::temp_directory_path().string() + "/audit-rt-XXXXXX";
  if (!mkdtemp(templ.data())) return 2;
  // A root server runs cells as other uids: they must be able to search the state dir.
  std::filesystem::permissions(templ, std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  const std::string off_dir = templ + "/off", on_dir = templ + "/on";
  std::filesystem::create_directories(off_dir);
  std::filesystem::create_directories(on_dir);
  std::vector<double> off_ms, on_ms;
  uint64_t off_records = 0, on_records = 0;
  try {
    Server off(binary, off_dir, policy_off), on(binary, on_dir, policy_on);
    const Json args = {{"command", "true"}};
    for (int i = 0; i < 5; ++i) off.Call(args), on.Call(args);  // cells made, caches warm
    off_records = TrailRecords(off_dir);
    on_records = TrailRecords(on_dir);
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        bool audited = (r + k) % 2 == 0;
        auto t0 = Clock::now();
        (audited ? on : off).Call(args);
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        (audited ? on_ms : off_ms).push_back(ms);
      }
    }
    off_records = TrailRecords(off_dir) - off_records;
    on_records = TrailRecords(on_dir) - on_records;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "audit_roundtrip_bench: %s\n", e.what());
    std::filesystem::remove_all(templ);
    return 1;
  }
  std::filesystem::remove_all(templ);
  double ratio = Percentile(on_ms, 0.5) / Percentile(off_ms, 0.5);
  std::printf("warm run_command true, %d rounds interleaved\n", rounds);
  std::printf("  %-28s p50 %7.3f ms  p95 %7.3f ms  trail records/call %.2f\n",
              ("auditing off (" + policy_off + ")").c_str(), Percentile(off_ms, 0.5),
              Percentile(off_ms, 0.95), static_cast<double>(off_records) / rounds);
  std::printf("  %-28s p50 %7.3f ms  p95 %7.3f ms  trail records/call %.2f\n",
              ("auditing on (" + policy_on + ")").c_str(), Percentile(on_ms, 0.5),
              Percentile(on_ms, 0.95), static_cast<double>(on_records) / rounds);
  std::printf("  on/off (p50): %.3f  (target <= 1.05: %s)\n", ratio,
              ratio <= 1.05 ? "met" : "NOT met");
  return 0;
}
