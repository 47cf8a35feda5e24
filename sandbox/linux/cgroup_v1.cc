// cgroup v1: one directory per controller per cell. memory (with memsw so swap cannot
// extend the limit), pids, cpu (CFS quota), cpuacct (usage) and freezer (atomic kill).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/cgroup_fs.h"

namespace mcpcell::sandbox {
namespace {

constexpr int kDrainTimeoutMs = 5000;
constexpr int kFreezeTimeoutMs = 1000;
constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

using Dirs = std::vector<std::pair<std::string, std::string>>;  // controller -> dir

std::string DirOf(const Dirs& dirs, const std::string& controller) {
  for (const auto& [c, d] : dirs) {
    if (c == controller) return d;
  }
  return "";
}

// Distinct directories (cpu and cpuacct are often co-mounted as "cpu,cpuacct").
std::vector<std::string> UniqueDirs(const Dirs& dirs) {
  std::vector<std::string> out;
  for (const auto& [c, d] : dirs) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(Dirs dirs, CgroupLimits limits)
      : dirs_(std::move(dirs)),
        limits_(limits),
        oom_kills_(DirOf(dirs_, "memory"), "memory.oom_control", "oom_kill") {}

  Status AddProcess(pid_t pid) override {
    for (const std::string& d : UniqueDirs(dirs_)) {
      if (Status s = cgroupfs::WriteFile(d, "cgroup.procs", std::to_string(pid)); !s.ok()) {
        return s;
      }
    }
    return Ok();
  }

  Result<CgroupUsage> Usage() const override {
    return cgroupfs::ReadV1Usage(DirOf(dirs_, "memory"), DirOf(dirs_, "pids"),
                                 DirOf(dirs_, "cpuacct"));
  }
  Result<uint64_t> OomKillCount() const override {
    // memory.oom_control has "oom_kill N" since 4.13.
    return oom_kills_.Read();
  }

  // Freeze, kill what is listed, thaw: frozen tasks cannot fork or exit, so the list is
  // complete and no pid can be reused under us. If freezing does not finish in time (a
  // task in uninterruptible sleep), the kill loop still runs; Destroy waits for the rest.
  Status KillAll() override {
    const std::string freezer = DirOf(dirs_, "freezer");
    const bool has_freezer = !freezer.empty() && access(freezer.c_str(), F_OK) == 0;
    // Already empty everywhere (the usual case in Destroy, after the cell's pid 1 was
    // reaped): nothing can enter it again, so skip the freeze round trip.
    if (AllEmpty()) return Ok();
    if (has_freezer) {
      if (Status s = cgroupfs::WriteFile(freezer, "freezer.state", "FROZEN"); !s.ok()) return s;
      WaitFrozen(freezer);
    }
    Status result = Ok();
    for (const std::string& d : UniqueDirs(dirs_)) {
      if (access(d.c_str(), F_OK) != 0) continue;
      Result<size_t> killed = cgroupfs::KillListed(d);
      if (!killed.ok()) {
        result = killed.error();
        break;
      }
    }
    if (has_freezer) {
      Status thaw = cgroupfs::WriteFile(freezer, "freezer.state", "THAWED");
      if (result.ok() && !thaw.ok()) result = thaw;
    }
    return result;
  }

  Status Freeze() override {
    const std::string freezer = DirOf(dirs_, "freezer");
    if (freezer.empty()) return Error::Msg("no freezer controller: the cgroup cannot be paused");
    return cgroupfs::SetFrozenV1(freezer, true, cgroupfs::kFreezeWaitMs);
  }
  Status Thaw() override {
    const std::string freezer = DirOf(dirs_, "freezer");
    if (freezer.empty()) return Ok();
    return cgroupfs::SetFrozenV1(freezer, false, cgroupfs::kFreezeWaitMs);
  }

  Status Destroy() override {
    if (destroyed_) return Ok();
    // The usual case: the cell's pid 1 was reaped, so every dir is empty and goes at once
    // (rmdir refuses a cgroup with tasks, EBUSY): no listing first. The freezer goes last,
    // so a busy cgroup still has it for the kill below.
    std::vector<std::string> dirs = UniqueDirs(dirs_);
    const std::string freezer = DirOf(dirs_, "freezer");
    std::stable_partition(dirs.begin(), dirs.end(),
                          [&](const std::string& d) { return d != freezer; });
    bool busy = false;
    for (const std::string& d : dirs) {
      if (rmdir(d.c_str()) == 0 || errno == ENOENT) continue;
      if (errno != EBUSY) return Error::Sys("rmdir(\"" + d + "\")").Wrap("destroy cgroup");
      busy = true;
      break;
    }
    if (!busy) {
      destroyed_ = true;
      return Ok();
    }
    // Processes left (a cell whose init could not be reaped, a cgroup of the tests): kill
    // them, wait until each dir is empty, then remove it.
    if (Status s = KillAll(); !s.ok()) return s.error().Wrap("destroy cgroup");
    for (const std::string& d : dirs) {  // the freezer still last
      if (Status s = cgroupfs::WaitEmpty(d, kDrainTimeoutMs); !s.ok()) {
        return s.error().Wrap("destroy cgroup");
      }
      if (Status s = cgroupfs::RemoveDir(d, kDrainTimeoutMs); !s.ok()) {
        return s.error().Wrap("destroy cgroup");
      }
    }
    destroyed_ = true;
    return Ok();
  }

  std::vector<std::string> Paths() const override { return UniqueDirs(dirs_); }
  int DirFd() const override { return -1; }

  Result<std::vector<int>> OpenJoinFds() const override {
    std::vector<int> fds;
    for (const std::string& d : UniqueDirs(dirs_)) {
      const std::string path = d + "/tasks";
      int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        Error e = Error::Sys("open(\"" + path + "\", O_WRONLY)");
        for (int f : fds) close(f);
        return e;
      }
      fds.push_back(fd);
    }
    return fds;
  }
  const CgroupLimits& limits() const override { return limits_; }

 private:
  bool AllEmpty() const {
    for (const std::string& d : UniqueDirs(dirs_)) {
      Result<std::string> procs = cgroupfs::ReadFile(d, "cgroup.procs");
      if (procs.ok() && !procs->empty()) return false;
      if (!procs.ok() && procs.error().err != ENOENT) return false;
    }
    return true;
  }

  static void WaitFrozen(const std::string& freezer) {
    for (int waited = 0; waited < kFreezeTimeoutMs; waited += 2) {
      Result<std::string> state = cgroupfs::ReadFile(freezer, "freezer.state");
      if (!state.ok() || state->rfind("FROZEN", 0) == 0) return;
      timespec ts{0, 2000000};
      nanosleep(&ts, nullptr);
    }
  }

  Dirs dirs_;
  CgroupLimits limits_;
  cgroupfs::KeyedCounterFile oom_kills_;  // memory.oom_control: read around every exec
  bool destroyed_ = false;
};

Status CheckParents(const Dirs& parents) {
  for (const char* c : kV1Controllers) {
    const std::string d = DirOf(parents, c);
    if (d.empty())
      return Error::Msg(std::string("no parent given for v1 controller \"") + c + "\"");
    if (access(d.c_str(), W_OK) != 0) return Error::Sys("access(\"" + d + "\", W_OK)");
  }
  return Ok();
}

Status ApplyV1Limits(const Dirs& dirs, const CgroupLimits& limits) {
  const bool memsw = cgroupfs::FileExists(DirOf(dirs, "memory"), "memory.memsw.limit_in_bytes");
  for (const cgroupfs::V1Write& w : cgroupfs::V1LimitWrites(limits, memsw)) {
    if (Status s = cgroupfs::WriteFile(DirOf(dirs, w.controller), w.file, w.value); !s.ok()) {
      return s;
    }
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<Cgroup>> CreateCgroupV1(const Dirs& parents, const std::string& name,
                                               const CgroupLimits& limits) {
  auto fail = [&](const Error& e) { return e.Wrap("create v1 cgroup " + name); };
  if (Status s = ValidateCgroupLimits(limits); !s.ok()) return fail(s.error());
  if (Status s = CheckParents(parents); !s.ok()) return fail(s.error());
  Dirs dirs;
  std::vector<std::string> created;
  auto rollback = [&] {
    for (auto it = created.rbegin(); it != created.rend(); ++it) rmdir(it->c_str());
  };
  for (const char* c : kV1Controllers) {
    const std::string dir = DirOf(parents, c) + "/" + name;
    dirs.emplace_back(c, dir);
    if (std::find(created.begin(), created.end(), dir) != created.end()) continue;
    if (mkdir(dir.c_str(), 0755) != 0) {
      Error e = errno == EEXIST ? Error::Msg(dir +
                                             " already exists (left by a crashed server? "
                                             "ReapStaleCgroups removes such cgroups)")
                                : Error::Sys("mkdir(\"" + dir + "\")");
      rollback();
      return fail(e);
    }
    created.push_back(dir);
  }
  if (Status s = ApplyV1Limits(dirs, limits); !s.ok()) {
    rollback();
    return fail(s.error());
  }
  return std::unique_ptr<Cgroup>(new CgroupV1(std::move(dirs), limits));
}

int JoinCgroupFromChild(const int* fds, size_t count) {
  int result = 0;
  for (size_t i = 0; i < count; ++i) {
    if (result == 0 && write(fds[i], "0", 1) != 1) result = errno != 0 ? errno : EIO;
    close(fds[i]);
  }
  return result;
}

namespace cgroupfs {
std::unique_ptr<Cgroup> OpenExistingV1(Dirs dirs) {
  return std::unique_ptr<Cgroup>(new CgroupV1(std::move(dirs), CgroupLimits{}));
}
}  // namespace cgroupfs

}  // namespace mcpcell::sandbox
