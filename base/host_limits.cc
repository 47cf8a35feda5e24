// See host_limits.h.
#include "base/host_limits.h"

#include <sys/resource.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mcpcell {
namespace {

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n") - a + 1);
}

std::optional<uint64_t> ParseCount(const std::string& text) {
  const std::string t = Trim(text);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

// The whitespace-separated words of a line.
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

class Assessor {
 public:
  Assessor(const TextSource& read, const CellFootprint& per_cell) : read_(read), cell_(per_cell) {}
  HostCapacity Run();

 private:
  std::optional<std::string> Read(const std::string& path) {
    std::optional<std::string> text = read_(path);
    if (!text) out_.unreadable.push_back(path);
    return text;
  }
  std::optional<uint64_t> ReadCount(const std::string& path) {
    std::optional<std::string> text = Read(path);
    if (!text) return std::nullopt;
    std::optional<uint64_t> v = ParseCount(*text);
    if (!v) out_.unreadable.push_back(path + " (not a number: \"" + Trim(*text) + "\")");
    return v;
  }
  void Add(std::string name, std::string detail, uint64_t free, uint64_t per_cell) {
    out_.limits.push_back({std::move(name), std::move(detail), free / (per_cell ? per_cell : 1)});
  }
  // limit - in use, as free room (0 when over).
  static uint64_t Free(uint64_t limit, uint64_t used) { return limit > used ? limit - used : 0; }
  void Tasks();
  void CgroupPids();
  void Fds();
  void Memory();
  void Namespaces();
  void Inotify();

  const TextSource& read_;
  const CellFootprint cell_;
  HostCapacity out_;
};

// Every task (thread) of the host takes a pid; /proc/loadavg's fourth field is
// "running/all tasks".
void Assessor::Tasks() {
  std::optional<uint64_t> used;
  if (std::optional<std::string> avg = Read("/proc/loadavg")) {
    const std::vector<std::string> w = Words(*avg);
    if (w.size() >= 4 && w[3].find('/') != std::string::npos) {
      used = ParseCount(w[3].substr(w[3].find('/') + 1));
    }
    if (!used) out_.unreadable.push_back("/proc/loadavg (no running/all tasks field)");
  }
  for (const char* key : {"pid_max", "threads-max"}) {
    std::optional<uint64_t> max = ReadCount(std::string("/proc/sys/kernel/") + key);
    if (!max || !used) continue;
    Add(std::string("pids: kernel.") + key,
        std::to_string(*max) + " (" + std::to_string(*used) + " tasks now)", Free(*max, *used),
        cell_.tasks);
  }
}

// Cells are made in the cgroup tree the server runs in: every pids.max from the cgroup
// this process is in up to the root caps them (v2, or v1's pids hierarchy).
void Assessor::CgroupPids() {
  std::optional<std::string> own = Read("/proc/self/cgroup");
  if (!own) return;
  std::string base, path;
  std::istringstream lines(*own);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (line.compare(0, b + 1, "0::") == 0 && base.empty()) {
      base = "/sys/fs/cgroup";
      path = line.substr(b + 1);
    } else if (controllers.find(",pids,") != std::string::npos) {
      base = "/sys/fs/cgroup/pids";
      path = line.substr(b + 1);
    }
  }
  if (base.empty()) return;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    const std::string dir = base + path;
    std::optional<std::string> max = read_(dir + "/pids.max");
    if (max && Trim(*max) != "max") {
      std::optional<uint64_t> limit = ParseCount(*max);
      std::optional<uint64_t> used = ParseCount(read_(dir + "/pids.current").value_or(""));
      if (limit && used) {
        Add("pids: cgroup " + dir + "/pids.max",
            std::to_string(*limit) + " (" + std::to_string(*used) + " in use)", Free(*limit, *used),
            cell_.tasks);
      } else {
        out_.unreadable.push_back(dir + "/pids.max or pids.current");
      }
    }
    if (path.empty()) break;
    path.resize(path.rfind('/'));
  }
}

// The server holds a few fds per live session and cell: `serve` raises its soft
// RLIMIT_NOFILE to the hard one at start (RaiseFdLimitToHard), so the hard one caps them;
// fs.file-max caps the host.
void Assessor::Fds() {
  if (std::optional<std::string> limits = Read("/proc/self/limits")) {
    std::istringstream lines(*limits);
    bool found = false;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("Max open files", 0) != 0) continue;
      const std::vector<std::string> w = Words(line.substr(14));
      std::optional<uint64_t> soft = w.empty() ? std::nullopt : ParseCount(w[0]);
      std::optional<uint64_t> hard = w.size() < 2 ? std::nullopt : ParseCount(w[1]);
      if (!soft || !hard) break;
      found = true;
      Add("fds: RLIMIT_NOFILE (hard)",
          std::to_string(*hard) + " per process (soft " + std::to_string(*soft) +
              " here; serve raises its soft limit to the hard one; raise the hard one with "
              "LimitNOFILE= or ulimit -Hn)",
          *hard, cell_.server_fds);
    }
    if (!found) out_.unreadable.push_back("/proc/self/limits (no \"Max open files\" line)");
  }
  if (std::optional<std::string> nr = Read("/proc/sys/fs/file-nr")) {
    const std::vector<std::string> w = Words(*nr);
    std::optional<uint64_t> used = w.size() == 3 ? ParseCount(w[0]) : std::nullopt;
    std::optional<uint64_t> max = w.size() == 3 ? ParseCount(w[2]) : std::nullopt;
    if (used && max) {
      Add("fds: fs.file-max", std::to_string(*max) + " (" + std::to_string(*used) + " open now)",
          Free(*max, *used), cell_.server_fds);
    } else {
      out_.unreadable.push_back("/proc/sys/fs/file-nr (not \"allocated unused max\")");
    }
  }
}

void Assessor::Memory() {
  std::optional<std::string> meminfo = Read("/proc/meminfo");
  if (!meminfo) return;
  std::istringstream lines(*meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    const std::vector<std::string> w = Words(line.substr(13));
    std::optional<uint64_t> kib = w.empty() ? std::nullopt : ParseCount(w[0]);
    if (!kib) break;
    Add("memory: MemAvailable",
        std::to_string(*kib / 1024) + " MiB (an idle cell: " + std::to_string(cell_.memory_kib) +
            " KiB)",
        *kib, cell_.memory_kib);
    return;
  }
  out_.unreadable.push_back("/proc/meminfo (no MemAvailable line)");
}

// Each cell makes one namespace of each kind; the kernel does not show how many exist.
void Assessor::Namespaces() {
  for (const char* kind : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    const std::string key = std::string("max_") + kind + "_namespaces";
    std::optional<uint64_t> max = ReadCount("/proc/sys/user/" + key);
    if (!max) continue;
    Add("namespaces: user." + key, std::to_string(*max) + " (those in use are not counted)", *max,
        1);
  }
}

void Assessor::Inotify() {
  std::optional<uint64_t> instances = ReadCount("/proc/sys/fs/inotify/max_user_instances");
  std::optional<uint64_t> watches = ReadCount("/proc/sys/fs/inotify/max_user_watches");
  if (!instances || !watches) return;
  out_.inotify = std::to_string(*instances) + " instances and " + std::to_string(*watches) +
                 " watches for all cells of the server's user together: programs that watch "
                 "files (tail -f, dev servers, test watchers) in more than " +
                 std::to_string(*instances) +
                 " cells at once fail with EMFILE (fs.inotify.max_user_instances)";
}

HostCapacity Assessor::Run() {
  Tasks();
  CgroupPids();
  Fds();
  Memory();
  Namespaces();
  Inotify();
  for (const HostLimit& l : out_.limits) {
    if (l.cells && (!out_.cells || *l.cells < *out_.cells)) {
      out_.cells = l.cells;
      out_.binding = l.name;
    }
  }
  return std::move(out_);
}

}  // namespace

TextSource RealTextSource() {
  return [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return std::nullopt;
    return ss.str();
  };
}

Result<FdLimit> RaiseFdLimitToHard() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return Error::Sys("getrlimit(RLIMIT_NOFILE)");
  FdLimit out{rl.rlim_cur, rl.rlim_cur, rl.rlim_max};
  if (rl.rlim_cur >= rl.rlim_max) return out;
  rl.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return Error::Sys("setrlimit(RLIMIT_NOFILE, soft " + std::to_string(rl.rlim_max) + ")");
  }
  out.soft = rl.rlim_max;
  return out;
}

HostCapacity AssessHostCapacity(const TextSource& read, const CellFootprint& per_cell) {
  return Assessor(read, per_cell).Run();
}

std::string FormatHostCapacity(const HostCapacity& c) {
  std::string out = "host limits on the number of live cells:\n";
  for (const HostLimit& l : c.limits) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-44s %-60s -> %llu cells\n", l.name.c_str(),
                  l.detail.c_str(), static_cast<unsigned long long>(l.cells.value_or(0)));
    out += line;
  }
  if (c.cells) {
    out +=
        "cells this host can hold: " + std::to_string(*c.cells) + " (binding: " + c.binding + ")\n";
  } else {
    out += "cells this host can hold: unknown (no limit could be read)\n";
  }
  if (!c.inotify.empty()) out += "inotify: " + c.inotify + "\n";
  for (const std::string& u : c.unreadable) out += "  not read: " + u + "\n";
  return out;
}

}  // namespace mcpcell
