// A cell's end (see cell.h): whether its init still runs (alive), Destroy's steps in
// order, and ReapOrphans for the cells a crashed server left behind.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_internal.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {

using cell_internal::Clock;
using cell_internal::MicrosSince;
using cell_internal::ServerSteps;

Cell::~Cell() { (void)Destroy(); }

bool Cell::alive() const {
  if (pidfd_ < 0) return false;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info,
               WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid == 0;
}

namespace {
// Processes (not threads) in the cgroup: the lines of cgroup.procs. Every v1 controller
// directory lists the same processes, so the first path is enough.
std::optional<uint64_t> CountCgroupProcs(const Cgroup& cgroup) {
  const std::vector<std::string> paths = cgroup.Paths();
  if (paths.empty()) return std::nullopt;
  const std::string file = paths.front() + "/cgroup.procs";
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  uint64_t lines = 0;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    lines += static_cast<uint64_t>(std::count(buf, buf + std::max<ssize_t>(n, 0), '\n'));
  }
  ::close(fd);
  if (n < 0) return std::nullopt;
  return lines;
}

// Notes a step's failure in `report` (`left`, and the first as its result). True: it
// succeeded.
bool Keep(DestroyReport& report, Status s, const char* what) {
  if (s) return true;
  report.left.push_back({what, s.error().message});
  if (report.result) report.result = s.error().Wrap(what);
  return false;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

void Cell::ReapInit(DestroyReport& report) {
  if (pidfd_ < 0) return;
  siginfo_t info;
  int r;
  do {
    r = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED);
  } while (r < 0 && errno == EINTR);
  // ECHILD: reaped already (by an earlier waitid); its namespaces are gone all the same.
  if (r == 0 || errno == ECHILD || Keep(report, Error::Sys("waitid(cell init)"), "reap")) {
    report.init_reaped = true;
    report.namespaces_gone = {"pid", "mount", "net", "ipc", "uts"};
  }
  ::close(pidfd_);
  pidfd_ = -1;
}

void Cell::RemoveCellDirAndIdRange(DestroyReport& report) {
  if (!dir_.empty()) {
    const std::string workspace = dir_ + "/workspace";
    const bool own_workspace = spec_.workspace_host_dir.empty() && IsDir(workspace);
    if (Keep(report, RemoveCellDir(dir_), "cell dir")) {
      if (own_workspace) report.dirs_removed.push_back(workspace);
      report.dirs_removed.push_back(dir_);
    }
  }
  if (id_map_.slot >= 0) {
    report.id_range_released =
        Keep(report, ReleaseIdRangeSlot(spec_.state_dir + "/idranges", id_map_.slot), "id range");
    id_map_.slot = -1;
  }
}

Status Cell::Destroy() {
  if (destroyed_) return Ok();
  destroyed_ = true;
  const Clock::time_point start = Clock::now();
  ServerSteps steps(destroy_timings_);
  DestroyReport report;
  auto keep = [&report](Status s, const char* what) { return Keep(report, std::move(s), what); };
  // 1. SIGKILL pid 1: the kernel then kills every process of the pid namespace, and the
  //    mount and network namespaces go with the last of them. Counted first: after the
  //    kill the cgroup empties as the kernel gets to each process.
  if (cgroup_) report.processes_killed = CountCgroupProcs(*cgroup_);
  if (pidfd_ >= 0) {
    if (syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0) != 0 && errno != ESRCH) {
      keep(Error::Sys("pidfd_send_signal(cell init, SIGKILL)"), "kill");
      report.processes_killed.reset();  // counted, but not killed
    }
  }
  // A paused cell: on the v1 freezer a frozen task does not die until thawed, so the reap
  //    below would wait forever; thawing after the kill lets nothing run but the dying.
  if (frozen_ && cgroup_) {
    keep(cgroup_->Thaw(), "thaw");
    frozen_ = false;
  }
  steps.Mark("kill");
  if (egress_listener_ >= 0) {
    ::close(egress_listener_);
    egress_listener_ = -1;
  }
  // 2. Close the channel: pending calls on other threads fail with a clear error. The object
  //    itself lives until ~Cell, so a call racing Destroy never touches freed memory.
  if (channel_) channel_->Close();
  claim_fd_.Reset();  // a parked cell's
  parked_control_.Reset();
  steps.Mark("close_channel");
  // 3. Reap init. Its exit completes only after every process of its namespace is gone.
  ReapInit(report);
  init_pid_ = -1;
  steps.Mark("reap");
  // 4. The cgroup, now empty.
  if (cgroup_) {
    std::vector<std::string> paths = cgroup_->Paths();
    if (keep(cgroup_->Destroy(), "cgroup")) report.cgroup_removed = std::move(paths);
  }
  steps.Mark("cgroup");
  // 5. The cell dir (workspace unless the spec named one, records, device nodes), and the
  //    id range claim.
  RemoveCellDirAndIdRange(report);
  steps.Mark("cell_dir");
  destroy_timings_.total_us = MicrosSince(start);
  Status result =
      report.result ? Ok() : Status(report.result.error().Wrap("destroy cell " + spec_.id));
  report.result = result;
  destroy_report_ = std::move(report);
  return result;
}

namespace {
// Kills a still-running cell init (and so its whole pid namespace), but only if the pid
// still names the same process: start times differ when the pid was reused.
void KillOrphanInit(const std::string& cell_dir) {
  Result<InitRecord> rec = ReadInitRecord(cell_dir);
  if (!rec || ProcStartTime(rec->pid) != rec->start_time) return;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, rec->pid, 0));
  if (pidfd < 0) return;
  if (ProcStartTime(rec->pid) == rec->start_time) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    struct pollfd p = {pidfd, POLLIN, 0};
    ::poll(&p, 1, 5000);  // readable once it has exited
  }
  ::close(pidfd);
}

// Releases the id range claims of cells that no longer exist (the orphans just reaped, or
// a crash between claim and cell dir or between removing the dir and the claim). A claim
// names its cell; claims of cells still in cells/ belong to another live server sharing
// this state dir and must stay, or a new cell here would get the same host uids as its
// live cell. An empty claim younger than a minute is a claim being written right now
// (claim files of earlier versions; a symlink claim is never empty).
Status ReleaseStaleIdRanges(const std::string& ranges, const std::string& cells) {
  if (DIR* r = ::opendir(ranges.c_str())) {
    while (struct dirent* e = ::readdir(r)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string claim = ReadIdRangeClaim(::dirfd(r), name.c_str());
      std::string owner = claim.substr(0, claim.find_first_of(" \t\n"));
      struct stat st;
      bool fresh = ::fstatat(::dirfd(r), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                   ::time(nullptr) - st.st_mtime < 60;
      if (owner.empty() ? fresh
                        : owner.find('/') == std::string::npos && owner != "." && owner != ".." &&
                              ::access((cells + "/" + owner).c_str(), F_OK) == 0) {
        continue;
      }
      if (::unlinkat(::dirfd(r), name.c_str(), 0) != 0 && errno != ENOENT) {
        Status err = Error::Sys("unlink(\"" + ranges + "/" + name + "\")");
        ::closedir(r);
        return err;
      }
    }
    ::closedir(r);
  }
  return Ok();
}
}  // namespace

Result<std::vector<std::string>> ReapOrphans(const std::string& state_dir) {
  std::vector<std::string> ids;
  const std::string cells = state_dir + "/cells";
  DIR* d = ::opendir(cells.c_str());
  if (!d) {
    if (errno == ENOENT) return ids;
    return Error::Sys("opendir(\"" + cells + "\")");
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string id = e->d_name;
    if (id == "." || id == "..") continue;
    // Cells of another server that is still running share this state dir; not orphans.
    if (OwnedByAnotherLiveServer(cells + "/" + id)) continue;
    ids.push_back(id);
  }
  ::closedir(d);
  for (const std::string& id : ids) KillOrphanInit(cells + "/" + id);
  std::vector<std::string> orphans = ids;
  Status cg = ReapStaleCgroups([&orphans](const std::string& id) {
    return std::find(orphans.begin(), orphans.end(), id) == orphans.end();
  });
  if (!cg) return cg.error().Wrap("reap orphan cgroups");
  for (const std::string& id : ids) {
    if (Status s = RemoveCellDir(cells + "/" + id); !s) return s.error().Wrap("reap cell " + id);
  }
  if (Status s = ReleaseStaleIdRanges(state_dir + "/idranges", cells); !s) return s.error();
  return ids;
}

}  // namespace mcpcell::sandbox
