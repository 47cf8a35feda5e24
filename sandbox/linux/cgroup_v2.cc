// cgroup v2 (unified hierarchy): one directory per cell with memory.max, memory.swap.max,
// pids.max and cpu.max; cgroup.kill for an atomic kill of everything inside.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/cgroup_fs.h"

namespace mcpcell::sandbox {
namespace {

constexpr int kDrainTimeoutMs = 5000;

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string dir, int dir_fd, CgroupLimits limits)
      : dir_(std::move(dir)),
        dir_fd_(dir_fd),
        limits_(limits),
        oom_kills_(dir_, "memory.events", "oom_kill") {}
  ~CgroupV2() override {
    if (dir_fd_ >= 0) close(dir_fd_);
  }

  Status AddProcess(pid_t pid) override {
    return cgroupfs::WriteFile(dir_, "cgroup.procs", std::to_string(pid));
  }

  Result<CgroupUsage> Usage() const override { return cgroupfs::ReadV2Usage(dir_); }
  Result<uint64_t> OomKillCount() const override { return oom_kills_.Read(); }

  Status KillAll() override {
    if (access(dir_.c_str(), F_OK) != 0) return Ok();  // already removed
    // cgroup.kill (5.14+) kills every process, including ones forking right now.
    if (cgroupfs::FileExists(dir_, "cgroup.kill")) {
      return cgroupfs::WriteFile(dir_, "cgroup.kill", "1");
    }
    // Older kernels: freeze so nothing can fork, kill the listed pids, thaw so they die.
    const bool can_freeze = cgroupfs::FileExists(dir_, "cgroup.freeze");
    if (can_freeze) {
      if (Status s = cgroupfs::WriteFile(dir_, "cgroup.freeze", "1"); !s.ok()) return s;
    }
    Result<size_t> killed = cgroupfs::KillListed(dir_);
    if (can_freeze) {
      if (Status s = cgroupfs::WriteFile(dir_, "cgroup.freeze", "0"); !s.ok()) return s;
    }
    if (!killed.ok()) return killed.error();
    return Ok();
  }

  Status Freeze() override {
    if (!cgroupfs::FileExists(dir_, "cgroup.freeze")) {
      return Error::Msg(dir_ + "/cgroup.freeze: missing (the kernel has no v2 freezer, 5.2+)");
    }
    return cgroupfs::SetFrozenV2(dir_, true, cgroupfs::kFreezeWaitMs);
  }
  Status Thaw() override {
    if (!cgroupfs::FileExists(dir_, "cgroup.freeze")) return Ok();  // never frozen
    return cgroupfs::SetFrozenV2(dir_, false, cgroupfs::kFreezeWaitMs);
  }

  Status Destroy() override {
    if (destroyed_) return Ok();
    if (Status s = KillAll(); !s.ok()) return s.error().Wrap("destroy cgroup");
    if (Status s = cgroupfs::WaitEmpty(dir_, kDrainTimeoutMs); !s.ok()) {
      return s.error().Wrap("destroy cgroup");
    }
    if (dir_fd_ >= 0) close(dir_fd_);
    dir_fd_ = -1;
    if (Status s = cgroupfs::RemoveDir(dir_, kDrainTimeoutMs); !s.ok()) {
      return s.error().Wrap("destroy cgroup");
    }
    destroyed_ = true;
    return Ok();
  }

  std::vector<std::string> Paths() const override { return {dir_}; }
  int DirFd() const override { return dir_fd_; }
  Result<std::vector<int>> OpenJoinFds() const override { return std::vector<int>{}; }
  const CgroupLimits& limits() const override { return limits_; }

 private:
  std::string dir_;
  int dir_fd_;
  CgroupLimits limits_;
  cgroupfs::KeyedCounterFile oom_kills_;  // memory.events: read around every exec
  bool destroyed_ = false;
};

// The controllers `limits` needs, which must be on in the parent's subtree_control.
std::vector<std::string> NeededControllers(const CgroupLimits& limits) {
  std::vector<std::string> c;
  if (limits.memory_max_bytes != 0) c.push_back("memory");
  if (limits.pids_max != 0) c.push_back("pids");
  if (limits.cpu_millicores != 0) c.push_back("cpu");
  return c;
}

Status CheckParentControllers(const std::string& parent, const CgroupLimits& limits) {
  Result<std::string> text = cgroupfs::ReadFile(parent, "cgroup.subtree_control");
  if (!text.ok()) return text.error();
  const std::vector<std::string> on = cgroupfs::ParseControllerList(*text);
  for (const std::string& c : NeededControllers(limits)) {
    if (std::find(on.begin(), on.end(), c) == on.end()) {
      return Error::Msg("controller \"" + c + "\" is not enabled in " + parent +
                        "/cgroup.subtree_control (enabled: \"" + *text + "\")");
    }
  }
  return Ok();
}

Status ApplyV2Limits(const std::string& dir, const CgroupLimits& limits) {
  const bool swap_file = cgroupfs::FileExists(dir, "memory.swap.max");
  for (const auto& [file, value] : cgroupfs::V2LimitWrites(limits, swap_file)) {
    if (Status s = cgroupfs::WriteFile(dir, file, value); !s.ok()) return s;
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<Cgroup>> CreateCgroupV2(const std::string& parent, const std::string& name,
                                               const CgroupLimits& limits) {
  const std::string dir = parent + "/" + name;
  auto fail = [&](const Error& e) { return e.Wrap("create cgroup " + dir); };
  if (Status s = ValidateCgroupLimits(limits); !s.ok()) return fail(s.error());
  if (Status s = CheckParentControllers(parent, limits); !s.ok()) return fail(s.error());
  if (mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      return fail(
          Error::Msg("already exists (left by a crashed server? ReapStaleCgroups "
                     "removes such cgroups)"));
    }
    return fail(Error::Sys("mkdir(\"" + dir + "\")"));
  }
  Status applied = ApplyV2Limits(dir, limits);
  int fd = -1;
  if (applied.ok()) {
    // Kept open for clone3(CLONE_INTO_CGROUP): the child starts inside, no window.
    fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) applied = Error::Sys("open(\"" + dir + "\", O_DIRECTORY)");
  }
  if (!applied.ok()) {
    rmdir(dir.c_str());
    return fail(applied.error());
  }
  return std::unique_ptr<Cgroup>(new CgroupV2(dir, fd, limits));
}

namespace cgroupfs {
std::unique_ptr<Cgroup> OpenExistingV2(const std::string& dir) {
  return std::unique_ptr<Cgroup>(new CgroupV2(dir, -1, CgroupLimits{}));
}
}  // namespace cgroupfs

}  // namespace mcpcell::sandbox
