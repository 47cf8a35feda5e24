// Which cgroup version to use and where cells go; creating cell cgroups and reaping stale
// ones. The per-version mechanics are in cgroup_v1.cc and cgroup_v2.cc.
#include "sandbox/linux/cgroup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>

#include "sandbox/linux/cgroup_fs.h"

namespace mcpcell::sandbox {
namespace {

// Cells live in <own cgroup>/mcpcell/<id>. When v2's no-internal-process rule stops us
// from enabling controllers in our own cgroup, the server moves itself into the leaf
// <own cgroup>/mcpcell-server (as nsjail does); detection then looks one level up.
constexpr char kCellsDir[] = "mcpcell";
constexpr char kServerLeaf[] = "mcpcell-server";
constexpr const char* kV2Controllers[] = {"memory", "pids", "cpu"};
constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

struct Mount {
  std::string root, mountpoint, fstype;
  std::vector<std::string> super_options;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<Mount> CgroupMounts(const std::string& mountinfo) {
  std::vector<Mount> mounts;
  for (const std::string& line : Split(mountinfo, '\n')) {
    const std::vector<std::string> f = Split(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 7 || dash == f.end() || f.end() - dash < 4) continue;
    Mount m{Unescape(f[3]), Unescape(f[4]), *(dash + 1), Split(*(dash + 3), ',')};
    if (m.fstype == "cgroup" || m.fstype == "cgroup2") mounts.push_back(std::move(m));
  }
  return mounts;
}

// /proc/self/cgroup: "0::/path" (v2) and "N:ctrl,ctrl:/path" (v1).
std::map<std::string, std::string> OwnCgroupPaths(const std::string& proc_self_cgroup) {
  std::map<std::string, std::string> paths;  // controller ("" for v2) -> path
  for (const std::string& line : Split(proc_self_cgroup, '\n')) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    for (const std::string& c : Split(controllers, ',')) paths[c] = line.substr(b + 1);
  }
  return paths;
}

// The directory of our own cgroup on `m`, or "" if it is not below the mount's root.
std::string OwnDir(const Mount& m, std::string own) {
  // sizeof counts the NUL, which stands for the '/' before the leaf's name. At the root of
  // a hierarchy ("/mcpcell-server", v1's cpu on a host like this one) the parent is "/".
  if (own.size() >= sizeof(kServerLeaf) &&
      own.compare(own.size() - sizeof(kServerLeaf), std::string::npos,
                  std::string("/") + kServerLeaf) == 0) {
    own.resize(own.size() - sizeof(kServerLeaf));
    if (own.empty()) own = "/";
  }
  std::string rel;
  if (m.root == "/") {
    rel = own;
  } else if (own.rfind(m.root, 0) == 0 &&
             (own.size() == m.root.size() || own[m.root.size()] == '/')) {
    rel = own.substr(m.root.size());
  } else {
    return "";
  }
  if (rel == "/") rel.clear();
  return m.mountpoint + rel;
}

bool Writable(const std::string& own_dir) {
  const std::string cells = own_dir + "/" + kCellsDir;
  if (access(cells.c_str(), F_OK) == 0) return access(cells.c_str(), W_OK) == 0;
  return access(own_dir.c_str(), W_OK) == 0;
}

bool DetectV2(const std::vector<Mount>& mounts, const std::map<std::string, std::string>& own,
              CgroupHost* host) {
  auto m = std::find_if(mounts.begin(), mounts.end(),
                        [](const Mount& x) { return x.fstype == "cgroup2"; });
  auto own_path = own.find("");
  if (m == mounts.end() || own_path == own.end()) return false;
  const std::string dir = OwnDir(*m, own_path->second);
  if (dir.empty()) return false;
  Result<std::string> text = cgroupfs::ReadFile(dir, "cgroup.controllers");
  const std::vector<std::string> avail =
      text.ok() ? cgroupfs::ParseControllerList(*text) : std::vector<std::string>{};
  for (const char* c : kV2Controllers) {
    if (std::find(avail.begin(), avail.end(), c) == avail.end()) {
      host->detail +=
          "cgroup v2 at " + m->mountpoint + " lacks the " + c + " controller in " + dir + "; ";
      return false;
    }
  }
  host->mode = CgroupMode::kV2;
  host->cell_parents = {{"unified", dir + "/" + kCellsDir}};
  host->can_create = Writable(dir);
  host->detail += "cgroup v2, cells under " + dir + "/" + kCellsDir;
  if (!host->can_create) host->detail += "; not writable (no delegation to this user)";
  return true;
}

bool DetectV1(const std::vector<Mount>& mounts, const std::map<std::string, std::string>& own,
              CgroupHost* host) {
  std::vector<std::pair<std::string, std::string>> parents;
  bool writable = true;
  for (const char* c : kV1Controllers) {
    auto m = std::find_if(mounts.begin(), mounts.end(), [&](const Mount& x) {
      return x.fstype == "cgroup" &&
             std::find(x.super_options.begin(), x.super_options.end(), c) != x.super_options.end();
    });
    auto path = own.find(c);
    const std::string dir = m == mounts.end() || path == own.end() ? "" : OwnDir(*m, path->second);
    if (dir.empty()) {
      host->detail += std::string("cgroup v1 controller ") + c + " not mounted; ";
      return false;
    }
    writable = writable && Writable(dir);
    parents.emplace_back(c, dir + "/" + kCellsDir);
  }
  host->mode = CgroupMode::kV1;
  host->cell_parents = std::move(parents);
  host->can_create = writable;
  host->detail += "cgroup v1 (memory, pids, cpu, cpuacct, freezer), cells under " +
                  host->cell_parents[0].second + " and the other controllers' equivalents";
  if (!writable) host->detail += "; not writable (no delegation to this user)";
  return true;
}

Status ValidateCellId(const std::string& id) {
  if (id.empty() || id.size() > 64 || id == "." || id == ".." || id == kServerLeaf ||
      id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string::npos) {
    return Error::Msg("cell id \"" + id.substr(0, 80) +
                      "\" is not a valid cgroup name (1-64 of [A-Za-z0-9._-], not . or ..)");
  }
  return Ok();
}

Status MkdirIfMissing(const std::string& dir, bool* created = nullptr) {
  const bool made = mkdir(dir.c_str(), 0755) == 0;
  if (!made && errno != EEXIST) return Error::Sys("mkdir(\"" + dir + "\")");
  if (created != nullptr) *created = made;
  return Ok();
}

// The cells' weight of the active placement (0: none), applied again when the cells'
// parent is created anew (another server sharing it removed it when it became empty).
std::atomic<uint32_t> active_cells_weight{0};

Status ApplyCellsWeight(CgroupMode mode, const std::string& cells_dir) {
  const uint32_t weight = active_cells_weight.load();
  if (weight == 0) return Ok();
  const auto [file, value] = cgroupfs::CpuWeightWrite(mode, weight);
  return cgroupfs::WriteFile(cells_dir, file, value);
}

// rmdir that leaves a cgroup someone still uses (tasks or children: EBUSY; ENOTEMPTY on a
// plain directory) in place; only other failures are errors.
Status RemoveIfUnused(const std::string& dir, bool* removed = nullptr) {
  const bool ok = rmdir(dir.c_str()) == 0 || errno == ENOENT;
  if (removed != nullptr) *removed = ok;
  if (ok || errno == EBUSY || errno == ENOTEMPTY) return Ok();
  return Error::Sys("rmdir(\"" + dir + "\")");
}

// v2: controllers must be on in our own cgroup's subtree_control and in mcpcell/'s.
Status PrepareV2Parent(const std::string& cells_dir) {
  const std::string own = cells_dir.substr(0, cells_dir.rfind('/'));
  std::vector<std::string> controllers(std::begin(kV2Controllers), std::end(kV2Controllers));
  Status s = cgroupfs::EnableControllers(own, controllers);
  if (!s.ok() && s.error().err == EBUSY) {
    // Our cgroup has processes (us): move ourselves into a leaf, then retry.
    const std::string leaf = own + "/" + kServerLeaf;
    if (Status m = MkdirIfMissing(leaf); !m.ok()) return m;
    if (Status m = cgroupfs::WriteFile(leaf, "cgroup.procs", "0"); !m.ok()) return m;
    s = cgroupfs::EnableControllers(own, controllers);
  }
  if (!s.ok()) return s;
  bool created = false;
  if (Status m = MkdirIfMissing(cells_dir, &created); !m.ok()) return m;
  if (Status m = cgroupfs::EnableControllers(cells_dir, controllers); !m.ok()) return m;
  return created ? ApplyCellsWeight(CgroupMode::kV2, cells_dir) : Ok();
}

}  // namespace

Status ValidateCgroupLimits(const CgroupLimits& limits) {
  // Below these a cell cannot start its init and a shell, which fails in confusing ways.
  constexpr uint64_t kMinMemory = 8ull << 20;
  constexpr uint64_t kMinPids = 4;
  constexpr uint32_t kMinMillicores = 10;  // the kernel's 1 ms minimum quota per 100 ms
  constexpr uint32_t kMaxMillicores = 1024 * 1000;
  if (limits.memory_max_bytes != 0 && limits.memory_max_bytes < kMinMemory) {
    return Error::Msg("limits.memory_max_bytes: " + std::to_string(limits.memory_max_bytes) +
                      " is below 8 MiB (0 = unlimited)");
  }
  if (limits.pids_max != 0 && limits.pids_max < kMinPids) {
    return Error::Msg("limits.pids_max: " + std::to_string(limits.pids_max) +
                      " is below 4 (cell init, a shell and a pipeline; 0 = unlimited)");
  }
  if (limits.cpu_millicores != 0 &&
      (limits.cpu_millicores < kMinMillicores || limits.cpu_millicores > kMaxMillicores)) {
    return Error::Msg("limits.cpu_millicores: " + std::to_string(limits.cpu_millicores) +
                      " is outside [10, 1024000] (0 = unlimited)");
  }
  return Ok();
}

const char* CgroupModeName(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::kV2:
      return "v2";
    case CgroupMode::kV1:
      return "v1";
    case CgroupMode::kNone:
      return "none";
  }
  return "?";
}

CgroupHost DetectCgroupHost() {
  Result<std::string> mountinfo = cgroupfs::ReadFile("/proc/self", "mountinfo");
  Result<std::string> cgroup = cgroupfs::ReadFile("/proc/self", "cgroup");
  if (!mountinfo.ok() || !cgroup.ok()) {
    CgroupHost host;
    host.detail = (mountinfo.ok() ? cgroup : mountinfo).error().message;
    return host;
  }
  return cgroupfs::DetectCgroupHostFrom(*mountinfo, *cgroup);
}

namespace cgroupfs {
CgroupHost DetectCgroupHostFrom(const std::string& mountinfo, const std::string& proc_self_cgroup) {
  CgroupHost host;
  const std::vector<Mount> mounts = CgroupMounts(mountinfo);
  const std::map<std::string, std::string> own = OwnCgroupPaths(proc_self_cgroup);
  if (DetectV2(mounts, own, &host) || DetectV1(mounts, own, &host)) return host;
  host.mode = CgroupMode::kNone;
  host.can_create = false;
  host.detail += "no usable cgroup hierarchy";
  return host;
}
}  // namespace cgroupfs

Result<std::unique_ptr<Cgroup>> CreateCellCgroup(const std::string& cell_id,
                                                 const CgroupLimits& limits) {
  if (Status s = ValidateCellId(cell_id); !s.ok()) return s.error();
  if (Status s = ValidateCgroupLimits(limits); !s.ok()) return s.error();
  // Detection (reads mountinfo and /proc/self/cgroup) is done once per process: the
  // hierarchy does not change under a running server. Preparing the shared parent is
  // idempotent but not atomic, so both run under one lock; the cell's own cgroup does not.
  static std::mutex mu;
  static CgroupHost* cached = nullptr;
  // The parents are shared with other servers under the same cgroup, and one that shuts
  // down removes them when they are empty (UnplaceServer): a parent that vanished between
  // preparing it and the cell's mkdir (ENOENT) is made again.
  for (int attempt = 1;; ++attempt) {
    CgroupHost host;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (cached == nullptr) cached = new CgroupHost(DetectCgroupHost());
      host = *cached;
      if (host.mode == CgroupMode::kNone || !host.can_create) {
        return Error::Msg("cannot create a cgroup for cell " + cell_id + ": " + host.detail);
      }
      if (host.mode == CgroupMode::kV2) {
        if (Status s = PrepareV2Parent(host.cell_parents[0].second); !s.ok()) {
          return s.error().Wrap("prepare " + host.cell_parents[0].second + " for cell " + cell_id);
        }
      } else {
        for (const auto& [controller, dir] : host.cell_parents) {
          bool created = false;
          Status s = MkdirIfMissing(dir, &created);
          if (s.ok() && created && controller == "cpu") s = ApplyCellsWeight(host.mode, dir);
          if (!s.ok()) return s.error().Wrap("cell " + cell_id);
        }
      }
    }
    Result<std::unique_ptr<Cgroup>> cg =
        host.mode == CgroupMode::kV2 ? CreateCgroupV2(host.cell_parents[0].second, cell_id, limits)
                                     : CreateCgroupV1(host.cell_parents, cell_id, limits);
    if (cg.ok() || cg.error().err != ENOENT || attempt == 3) return cg;
  }
}

Status ReapStaleCgroups(const std::function<bool(const std::string&)>& is_live) {
  const CgroupHost host = DetectCgroupHost();
  if (host.mode == CgroupMode::kNone) return Ok();
  // id -> its directories, per controller.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> stale;
  for (const auto& [controller, cells_dir] : host.cell_parents) {
    DIR* d = opendir(cells_dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return Error::Sys("opendir(\"" + cells_dir + "\")");
    }
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (e->d_type != DT_DIR || name == "." || name == ".." || is_live(name)) continue;
      stale[name].emplace_back(controller, cells_dir + "/" + name);
    }
    closedir(d);
  }
  Status first = Ok();
  for (auto& [id, dirs] : stale) {
    std::unique_ptr<Cgroup> cg = host.mode == CgroupMode::kV2
                                     ? cgroupfs::OpenExistingV2(dirs[0].second)
                                     : cgroupfs::OpenExistingV1(dirs);
    Status s = cg->Destroy();
    if (!s.ok() && first.ok()) first = s.error().Wrap("reap stale cgroup of cell " + id);
  }
  return first;
}

Status ValidateCpuWeights(const CpuWeights& weights) {
  for (auto [name, w] : {std::pair{"server", weights.server}, {"cells", weights.cells}}) {
    if (w < 1 || w > 10000) {
      return Error::Msg(std::string("cpu weight of the ") + name + ": " + std::to_string(w) +
                        " is outside [1, 10000] (cgroup v2 cpu.weight units, default 100)");
    }
  }
  return Ok();
}

std::string ServerPlacement::Describe() const {
  return std::string("server in ") + server_dir + ", cells under " + cells_dir + " (cgroup " +
         CgroupModeName(mode) + ")";
}

namespace cgroupfs {

Result<ServerPlacement> PlaceServerIn(CgroupMode mode, const std::string& own, pid_t pid,
                                      const CpuWeights& weights) {
  if (Status s = ValidateCpuWeights(weights); !s.ok()) return s.error();
  if (mode == CgroupMode::kNone) return Error::Msg("no cgroup hierarchy to place the server in");
  ServerPlacement p;
  p.mode = mode;
  p.own_dir = own;
  p.server_dir = own + "/" + kServerLeaf;
  p.cells_dir = own + "/" + kCellsDir;
  const auto [file, server_value] = CpuWeightWrite(mode, weights.server);
  const std::string cells_value = CpuWeightWrite(mode, weights.cells).second;
  const std::vector<std::string> controllers(std::begin(kV2Controllers), std::end(kV2Controllers));
  // v2: the server leaves `own` before its controllers go on (no internal processes) and
  // the weight file exists only once cpu is on; v1: the weight is set before moving in.
  Status s = MkdirIfMissing(p.server_dir);
  if (s.ok() && mode == CgroupMode::kV1) s = WriteFile(p.server_dir, file, server_value);
  if (s.ok()) s = WriteFile(p.server_dir, "cgroup.procs", std::to_string(pid));
  if (s.ok() && mode == CgroupMode::kV2) s = EnableControllers(own, controllers, &p.enabled);
  if (s.ok() && mode == CgroupMode::kV2) s = WriteFile(p.server_dir, file, server_value);
  if (s.ok()) s = MkdirIfMissing(p.cells_dir);
  if (s.ok() && mode == CgroupMode::kV2) s = EnableControllers(p.cells_dir, controllers);
  if (s.ok()) s = WriteFile(p.cells_dir, file, cells_value);
  if (!s.ok()) {
    Error e = s.error().Wrap("place the server above its cells in " + own);
    (void)UnplaceServerFrom(p, pid);  // best effort: the first error is the one to report
    return e;
  }
  return p;
}

Status UnplaceServerFrom(const ServerPlacement& p, pid_t pid) {
  // The cells' parent goes if no cell (of another server sharing it) is left; v2's
  // controllers can only be turned off again once it is gone, and must be before the
  // server may move back into `own`.
  bool cells_removed = false;
  if (Status s = RemoveIfUnused(p.cells_dir, &cells_removed); !s.ok()) return s;
  if (p.mode == CgroupMode::kV2) {
    if (!cells_removed && !p.enabled.empty()) {
      return Error::Msg(p.cells_dir + " is still in use (cells of another server?): the server " +
                        "stays in " + p.server_dir + " until it exits");
    }
    for (auto it = p.enabled.rbegin(); it != p.enabled.rend(); ++it) {
      if (Status s = WriteFile(p.own_dir, "cgroup.subtree_control", "-" + *it); !s.ok()) {
        return s.error().Wrap("the server stays in " + p.server_dir);
      }
    }
  }
  if (Status s = WriteFile(p.own_dir, "cgroup.procs", std::to_string(pid)); !s.ok()) return s;
  return RemoveIfUnused(p.server_dir);  // another server may still be in it
}

}  // namespace cgroupfs

namespace {
// The cpu entry of a detected host: v2's single directory, v1's cpu controller.
std::string CellsParentForCpu(const CgroupHost& host) {
  for (const auto& [controller, dir] : host.cell_parents) {
    if (controller == "unified" || controller == "cpu") return dir;
  }
  return "";
}
}  // namespace

Result<ServerPlacement> PlaceServerAboveCells(const CpuWeights& weights) {
  if (Status s = ValidateCpuWeights(weights); !s.ok()) return s.error();
  const CgroupHost host = DetectCgroupHost();
  if (host.mode == CgroupMode::kNone || !host.can_create) {
    return Error::Msg("cannot place the server above its cells: " + host.detail);
  }
  const std::string cells = CellsParentForCpu(host);
  const std::string own = cells.substr(0, cells.rfind('/'));
  Result<ServerPlacement> p = cgroupfs::PlaceServerIn(host.mode, own, getpid(), weights);
  if (p.ok()) active_cells_weight.store(weights.cells);
  return p;
}

Status UnplaceServer(const ServerPlacement& placement) {
  active_cells_weight.store(0);
  Status first = cgroupfs::UnplaceServerFrom(placement, getpid());
  // v1: the other controllers' cells parents (memory, pids, freezer, cpuacct), made at the
  // first cell, go too once empty.
  const CgroupHost host = DetectCgroupHost();
  if (host.mode == CgroupMode::kV1) {
    for (const auto& [controller, dir] : host.cell_parents) {
      Status s = RemoveIfUnused(dir);
      if (!s.ok() && first.ok()) first = s;
    }
  }
  return first;
}

}  // namespace mcpcell::sandbox
