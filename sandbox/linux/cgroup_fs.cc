// cgroupfs file helpers and formats shared by the v1 and v2 implementations.
#include "sandbox/linux/cgroup_fs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

namespace mcpcell::sandbox::cgroupfs {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\n' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\n' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

// Reads an optional counter: a missing file (controller absent) is zero.
Result<uint64_t> OptionalValue(const std::string& dir, const std::string& file) {
  Result<std::string> text = ReadFile(dir, file);
  if (!text.ok() && text.error().err == ENOENT) return uint64_t{0};
  if (!text.ok()) return text.error();
  return ParseValue(*text, dir + "/" + file);
}

Result<uint64_t> OptionalKeyed(const std::string& dir, const std::string& file,
                               const std::string& key) {
  Result<std::string> text = ReadFile(dir, file);
  if (!text.ok() && text.error().err == ENOENT) return uint64_t{0};
  if (!text.ok()) return text.error();
  return ParseKeyed(*text, key, dir + "/" + file);
}

}  // namespace

Status WriteFile(const std::string& dir, const std::string& file, const std::string& value) {
  const std::string path = dir + "/" + file;
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys("open(\"" + path + "\", O_WRONLY)");
  // cgroupfs takes one write per value; a short write is an error, not a partial value.
  ssize_t n = write(fd, value.data(), value.size());
  const int saved = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Error::Sys("write(\"" + path + "\", \"" + value + "\")", n < 0 ? saved : EIO);
  }
  return Ok();
}

Result<std::string> ReadFile(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys("open(\"" + path + "\")");
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Error e = Error::Sys("read(\"" + path + "\")");
      close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > kMaxFileBytes) {
      close(fd);
      return Error::Msg(path + ": larger than 1 MiB");
    }
  }
  close(fd);
  return out;
}

bool FileExists(const std::string& dir, const std::string& file) {
  return access((dir + "/" + file).c_str(), F_OK) == 0;
}

Result<uint64_t> ParseValue(const std::string& text, const std::string& what) {
  const std::string t = Trim(text);
  if (t == "max") return std::numeric_limits<uint64_t>::max();
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 20) {
    return Error::Msg(what + ": expected a number, got \"" + t.substr(0, 40) + "\"");
  }
  errno = 0;
  unsigned long long v = std::strtoull(t.c_str(), nullptr, 10);
  if (errno == ERANGE) return Error::Msg(what + ": number out of range");
  return static_cast<uint64_t>(v);
}

Result<uint64_t> ParseKeyed(const std::string& text, const std::string& key,
                            const std::string& what) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.compare(0, space, key) != 0 || space != key.size()) {
      continue;
    }
    return ParseValue(line.substr(space + 1), what + " " + key);
  }
  return Error::Msg(what + ": no \"" + key + "\" line");
}

Result<std::vector<pid_t>> ParsePids(const std::string& text, const std::string& what) {
  std::vector<pid_t> pids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty()) continue;
    Result<uint64_t> v = ParseValue(line, what);
    if (!v.ok()) return v.error();
    if (*v == 0 || *v > static_cast<uint64_t>(std::numeric_limits<pid_t>::max())) {
      return Error::Msg(what + ": bad pid " + line);
    }
    pids.push_back(static_cast<pid_t>(*v));
  }
  return pids;
}

std::vector<std::string> ParseControllerList(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  const std::string t = Trim(text);
  while (pos < t.size()) {
    size_t end = t.find(' ', pos);
    if (end == std::string::npos) end = t.size();
    if (end > pos) out.push_back(t.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

CpuBandwidth CpuBandwidthFor(uint32_t millicores) {
  const uint64_t m = std::max<uint32_t>(millicores, 1);
  const uint64_t shortest = (kMinCpuQuotaUs * 1000 + m - 1) / m;  // quota >= the minimum
  const uint64_t period = std::clamp(shortest, kCpuPeriodUs, kMaxCpuPeriodUs);
  return {std::max(kMinCpuQuotaUs, m * period / 1000), period};
}

std::vector<std::pair<std::string, std::string>> V2LimitWrites(const CgroupLimits& limits,
                                                               bool swap_file_present) {
  std::vector<std::pair<std::string, std::string>> w;
  if (limits.memory_max_bytes != 0) {
    w.emplace_back("memory.max", std::to_string(limits.memory_max_bytes));
    // Swap off: otherwise the kernel pushes the excess to swap instead of OOM-killing, and
    // the limit no longer bounds what the cell costs the host.
    if (swap_file_present) w.emplace_back("memory.swap.max", "0");
  }
  if (limits.pids_max != 0) w.emplace_back("pids.max", std::to_string(limits.pids_max));
  if (limits.cpu_millicores != 0) {
    const CpuBandwidth cpu = CpuBandwidthFor(limits.cpu_millicores);
    w.emplace_back("cpu.max", std::to_string(cpu.quota_us) + " " + std::to_string(cpu.period_us));
  }
  return w;
}

std::vector<V1Write> V1LimitWrites(const CgroupLimits& limits, bool memsw_present) {
  std::vector<V1Write> w;
  if (limits.memory_max_bytes != 0) {
    const std::string bytes = std::to_string(limits.memory_max_bytes);
    // memsw (memory+swap) must be >= memory, so memory goes first; equal values mean no
    // swap on top of the memory limit.
    w.push_back({"memory", "memory.limit_in_bytes", bytes});
    if (memsw_present) w.push_back({"memory", "memory.memsw.limit_in_bytes", bytes});
  }
  if (limits.pids_max != 0) w.push_back({"pids", "pids.max", std::to_string(limits.pids_max)});
  if (limits.cpu_millicores != 0) {
    const CpuBandwidth cpu = CpuBandwidthFor(limits.cpu_millicores);
    // A fresh cgroup's quota is -1 (unlimited), so the period can go first.
    w.push_back({"cpu", "cpu.cfs_period_us", std::to_string(cpu.period_us)});
    w.push_back({"cpu", "cpu.cfs_quota_us", std::to_string(cpu.quota_us)});
  }
  return w;
}

Result<CgroupUsage> ReadV2Usage(const std::string& dir) {
  CgroupUsage u;
  // cpu.stat's usage_usec is kept by the core even without the cpu controller.
  Result<uint64_t> cpu = OptionalKeyed(dir, "cpu.stat", "usage_usec");
  Result<uint64_t> current = OptionalValue(dir, "memory.current");
  Result<uint64_t> peak = OptionalValue(dir, "memory.peak");  // kernel >= 5.19
  Result<uint64_t> ooms = OptionalKeyed(dir, "memory.events", "oom_kill");
  Result<uint64_t> pids = OptionalValue(dir, "pids.current");
  Result<uint64_t> pid_hits = OptionalKeyed(dir, "pids.events", "max");
  for (auto* r : {&cpu, &current, &peak, &ooms, &pids, &pid_hits}) {
    if (!r->ok()) return r->error().Wrap("cgroup usage");
  }
  u.cpu_usage_ns = *cpu * 1000;
  u.memory_current_bytes = *current;
  u.memory_peak_bytes = std::max(*peak, *current);
  u.oom_kill_count = *ooms;
  u.pids_current = *pids;
  u.pids_limit_hits = *pid_hits;
  return u;
}

KeyedCounterFile::KeyedCounterFile(std::string dir, std::string file, std::string key)
    : path_(dir + "/" + file), key_(std::move(key)) {}

KeyedCounterFile::~KeyedCounterFile() {
  if (fd_ >= 0) close(fd_);
}

Result<uint64_t> KeyedCounterFile::Read() const {
  std::lock_guard lock(mu_);
  if (fd_ < 0) {
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0 && errno == ENOENT) return uint64_t{0};
    if (fd_ < 0) return Error::Sys("open(\"" + path_ + "\")");
  }
  char buf[4096];
  ssize_t n;
  do {
    n = pread(fd_, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::Sys("pread(\"" + path_ + "\")");
  // These files are a few short lines; a full buffer would mean a format we do not know.
  if (n == static_cast<ssize_t>(sizeof buf)) return Error::Msg(path_ + ": longer than 4 KiB");
  return ParseKeyed(std::string(buf, n), key_, path_);
}

Result<CgroupUsage> ReadV1Usage(const std::string& memory_dir, const std::string& pids_dir,
                                const std::string& cpuacct_dir) {
  CgroupUsage u;
  Result<uint64_t> cpu = OptionalValue(cpuacct_dir, "cpuacct.usage");
  Result<uint64_t> current = OptionalValue(memory_dir, "memory.usage_in_bytes");
  Result<uint64_t> peak = OptionalValue(memory_dir, "memory.max_usage_in_bytes");
  // memory.oom_control has "oom_kill N" since 4.13.
  Result<uint64_t> ooms = OptionalKeyed(memory_dir, "memory.oom_control", "oom_kill");
  Result<uint64_t> pids = OptionalValue(pids_dir, "pids.current");
  Result<uint64_t> pid_hits = OptionalKeyed(pids_dir, "pids.events", "max");
  for (auto* r : {&cpu, &current, &peak, &ooms, &pids, &pid_hits}) {
    if (!r->ok()) return r->error().Wrap("cgroup usage");
  }
  u.cpu_usage_ns = *cpu;
  u.memory_current_bytes = *current;
  u.memory_peak_bytes = std::max(*peak, *current);
  u.oom_kill_count = *ooms;
  u.pids_current = *pids;
  u.pids_limit_hits = *pid_hits;
  return u;
}

Result<size_t> KillListed(const std::string& dir) {
  Result<std::string> text = ReadFile(dir, "cgroup.procs");
  if (!text.ok()) return text.error();
  Result<std::vector<pid_t>> pids = ParsePids(*text, dir + "/cgroup.procs");
  if (!pids.ok()) return pids.error();
  for (pid_t pid : *pids) {
    // ESRCH: it exited between the read and the kill. Nothing else is expected.
    if (kill(pid, SIGKILL) != 0 && errno != ESRCH) {
      return Error::Sys("kill(" + std::to_string(pid) + ", SIGKILL)");
    }
  }
  return pids->size();
}

Status WaitEmpty(const std::string& dir, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (int delay = 1;; delay = std::min(delay * 2, 50)) {
    Result<std::string> text = ReadFile(dir, "cgroup.procs");
    if (!text.ok()) {
      if (text.error().err == ENOENT) return Ok();
      return text.error();
    }
    if (Trim(*text).empty()) return Ok();
    if (NowMs() >= deadline) {
      return Error::Msg(dir + ": processes still present after " + std::to_string(timeout_ms) +
                        " ms: " + Trim(*text).substr(0, 80));
    }
    SleepMs(delay);
  }
}

Status RemoveDir(const std::string& dir, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (int delay = 1;; delay = std::min(delay * 2, 50)) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return Ok();
    if (errno != EBUSY || NowMs() >= deadline) return Error::Sys("rmdir(\"" + dir + "\")");
    SleepMs(delay);
  }
}

Status EnableControllers(const std::string& dir, const std::vector<std::string>& controllers,
                         std::vector<std::string>* enabled) {
  Result<std::string> text = ReadFile(dir, "cgroup.subtree_control");
  if (!text.ok()) return text.error();
  const std::vector<std::string> on = ParseControllerList(*text);
  for (const std::string& c : controllers) {
    if (std::find(on.begin(), on.end(), c) != on.end()) continue;
    if (Status s = WriteFile(dir, "cgroup.subtree_control", "+" + c); !s.ok()) return s;
    if (enabled != nullptr) enabled->push_back(c);
  }
  return Ok();
}

std::pair<std::string, std::string> CpuWeightWrite(CgroupMode mode, uint32_t weight) {
  if (mode == CgroupMode::kV2) return {"cpu.weight", std::to_string(weight)};
  // v1 cpu.shares: 1024 is the default as 100 is for cpu.weight; the kernel's range is
  // [2, 262144].
  const uint64_t shares = std::clamp<uint64_t>(uint64_t{weight} * 1024 / 100, 2, 262144);
  return {"cpu.shares", std::to_string(shares)};
}

}  // namespace mcpcell::sandbox::cgroupfs
