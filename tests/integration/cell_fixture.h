// Shared helpers for integration tests that run the probe (mcpcell-probe) in real cells:
// a temporary state dir, a spec that mounts the probe read-only at /opt/mcpcell-probe, and
// RunProbe. Every test that uses them creates its own cells under its own temp dir and
// destroys them; nothing outside that dir, the cells' namespaces and cgroups is touched.
//
// Header-only; used by cell_fs_test.cc and, if they like, the confinement and exec tests.
#pragma once

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_session.h"
#include "sandbox/state_dir.h"

#ifndef MCPCELL_PROBE_PATH
#error "MCPCELL_PROBE_PATH must name the mcpcell-probe executable"
#endif
#ifndef MCPCELL_INIT_PATH
#error "MCPCELL_INIT_PATH must name the mcpcell-init executable"
#endif

namespace mcpcell::sandbox::celltest {

inline constexpr const char* kProbeDirInCell = "/opt/mcpcell-probe";

inline std::string ProbeHostDir() {
  std::string p = MCPCELL_PROBE_PATH;
  return p.substr(0, p.rfind('/'));
}
inline std::string ProbeInCell() {
  std::string p = MCPCELL_PROBE_PATH;
  return std::string(kProbeDirInCell) + p.substr(p.rfind('/'));
}

// mkdtemp under /tmp, removed (with whatever cells left) at the end of the test.
class TempStateDir {
 public:
  TempStateDir() {
    char tmpl[] = "/tmp/mcpcell-it-XXXXXX";
    char* d = ::mkdtemp(tmpl);
    if (d) path_ = d;
  }
  ~TempStateDir() {
    if (path_.empty()) return;
    (void)ReapOrphans(path_);
    (void)RemoveCellDir(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline CellSpec ProbeSpec(const TempStateDir& state) {
  CellSpec spec = DefaultCellSpec(GenerateCellId(), state.path());
  spec.mounts.push_back(CellMount{ProbeHostDir(), kProbeDirInCell, false});
  spec.limits.memory_max_bytes = 512ull << 20;
  spec.limits.pids_max = 256;
  return spec;
}

// A spec factory (the shape CellSessionManager and WarmPool take) making ProbeSpec cells
// with the id it is given.
inline std::function<Result<CellSpec>(const std::string&)> ProbeFactory(const TempStateDir& state) {
  return [&state](const std::string& id) -> Result<CellSpec> {
    CellSpec spec = ProbeSpec(state);
    spec.id = id;
    return spec;
  };
}

inline CellCreateOptions TestCreateOptions() {
  CellCreateOptions o;
  o.init_path = MCPCELL_INIT_PATH;
  return o;
}

// The namespace backend with TestCreateOptions, for warm pools.
inline std::shared_ptr<const CellBackend> TestBackend() {
  return std::make_shared<NamespaceBackend>(TestCreateOptions());
}

struct ProbeRun {
  bool ok = false;    // the exec happened (false: error says why)
  std::string error;  // Exec's error when !ok
  int exit_code = -1;
  int signo = 0;
  std::string out, err;
};

inline ProbeRun ToProbeRun(const Result<ExecResult>& res) {
  ProbeRun r;
  if (!res) {
    r.error = res.error().message;
    return r;
  }
  r.ok = true;
  r.exit_code = res->signaled ? -1 : res->exit_code;
  r.signo = res->signaled ? res->signo : 0;
  r.out = res->out.data;
  r.err = res->err.data;
  return r;
}

inline ExecOptions ProbeExec(std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  ExecOptions o;
  o.argv = std::move(argv);
  o.timeout = timeout;
  return o;
}

inline ProbeRun RunInCell(CellInstance& cell, std::vector<std::string> argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return ToProbeRun(cell.Exec(ProbeExec(std::move(argv), timeout)));
}

// The same through a session's lease, as tools run programs.
inline ProbeRun RunInCell(const CellLease& lease, std::vector<std::string> argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return ToProbeRun(lease.Exec(ProbeExec(std::move(argv), timeout)));
}

inline ProbeRun RunProbe(Cell& cell, std::vector<std::string> args) {
  args.insert(args.begin(), ProbeInCell());
  return RunInCell(cell, std::move(args));
}

// "key value" lines of a probe's output, in order.
inline std::vector<std::pair<std::string, std::string>> Facts(const std::string& out) {
  std::vector<std::pair<std::string, std::string>> facts;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) {
      facts.emplace_back(line, "");
    } else {
      facts.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
  }
  return facts;
}

// Polls `pred` every 10 ms for up to 30 s (cells take ~10-50 ms to make; CI is slow).
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// The ids of the cells that have a directory under <state_dir>/cells.
inline std::set<std::string> CellDirNames(const std::string& state_dir) {
  std::set<std::string> ids;
  DIR* d = ::opendir((state_dir + "/cells").c_str());
  if (!d) return ids;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") ids.insert(n);
  }
  ::closedir(d);
  return ids;
}

}  // namespace mcpcell::sandbox::celltest
