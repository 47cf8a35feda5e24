// Cell: one live sandbox on the server side: its directory, cgroup, pid 1 and channel.
//
// Cell::Create runs the host half of cell creation as a list of steps (docs/architecture.md
// tells them in order and why): make <state_dir>/cells/<id>, create the cgroup (B), claim
// a uid/gid range when running as root, clone a child into new user, mount, pid, net, ipc
// and uts namespaces, put it in the cgroup, write its uid/gid maps from the parent, let it
// exec cell init (which creates its cgroup namespace, builds the filesystem, pivots root)
// and wait for Ready. It returns only a ready cell or an error naming the failed step;
// on error everything already made is undone.
//
// Destroy kills pid 1 (the pid namespace dies with it, and with it every mount and the
// network namespace), reaps it, removes the cgroup, deletes the cell dir and releases the
// id range. The destructor destroys too, but only Destroy() reports errors.
//
// Threading: Create may run on any thread and concurrently for different cells (it never
// forks the multi-threaded server for anything but a child that only execs). A Cell is
// used by one owner; channel() is thread-safe (C's CellChannel), and calls racing Destroy
// fail cleanly. Destroy itself must be called by one thread at a time.
//
// Files: cell.cc (Create and the host-side preparation), cell_launch.cc (clone, cell init
// up to Ready), cell_destroy.cc (Destroy, ReapOrphans), cell_requests.cc (the requests).
// ExecAsync's steps and `done` run on the CellReactor the cell was made with.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/backend.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/linux/cgroup.h"

namespace mcpcell::sandbox {

class CellChannel;
class CellReactor;

// Per-step setup latency, in order: the server's steps ("cell_dir", "cgroup", "clone",
// "id_maps", ...) then cell init's (from Ready: "spec", "mounts", "pivot_root", ...) and
// "ready" (clone to Ready as seen by the server). Microseconds.
// A parked cell's Unpark appends its own steps ("claim_layers", init's "rootfs" ...
// "caps", "claim_ready").
struct SetupTimings {
  std::vector<std::pair<std::string, uint64_t>> steps_us;
  uint64_t total_us = 0;   // Create's wall time
  uint64_t unpark_us = 0;  // Unpark's wall time (0: not parked)
};

struct CellCreateOptions {
  // The cell init executable; empty: "mcpcell-init" next to /proc/self/exe.
  std::string init_path;
  // How long to wait for Ready before killing the cell and failing.
  std::chrono::milliseconds ready_timeout{10000};
  // Run without a cgroup even when one could be created (tests of unprivileged mode).
  bool skip_cgroup = false;
  // Where cell init's stderr goes; -1: the server's stderr.
  int init_stderr_fd = -1;
  // Where the cells' asynchronous execs (Cell::ExecAsync) wait; owned by the caller and
  // outliving every cell made with these options. Null: ExecAsync fails, Exec works.
  CellReactor* reactor = nullptr;
};

// How the cell's ids map to the host: a per-cell range when the server is root, else the
// server's own uid/gid as the sandbox user (a single mapping).
struct CellIdMap {
  bool single = false;
  uint32_t host_uid_base = 0;  // host id of uid 0 inside (range mode)
  uint32_t host_gid_base = 0;
  uint32_t count = 0;  // ids mapped (range mode: 65536)
  int slot = -1;       // claimed range slot under <state_dir>/idranges
};

// The namespace backend's cell (sandbox/backend.h's CellInstance): requests go to cell
// init through the cell's CellChannel.
class Cell final : public CellInstance {
 public:
  static Result<std::unique_ptr<Cell>> Create(const CellSpec& spec,
                                              const CellCreateOptions& options = {});
  // A parked cell (a warm pool's, for cells over snapshot layers): every step of Create
  // but the filesystem's is done (namespaces, id maps, cgroup, cell init exec'd and in its
  // network namespace), and init waits for Unpark to bring the layers. `spec` has none.
  // Takes no request until Unpark succeeds (usable() is false); Destroy works as ever.
  static Result<std::unique_ptr<Cell>> CreateParked(const CellSpec& spec,
                                                    const CellCreateOptions& options = {});
  ~Cell() override;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  // Idempotent. After it, no process, mount, cgroup, network namespace or directory of the
  // cell remains (the workspace survives when the spec named a host directory).
  Status Destroy() override;
  // What the first Destroy did, step by step (counted before the kill, in order).
  std::optional<DestroyReport> last_destroy_report() const override { return destroy_report_; }

  // Pause and resume through the cell's cgroup freezer (Cgroup::Freeze/Thaw). A cell
  // without a cgroup cannot be paused: Freeze fails and says so. Destroy works on a
  // frozen cell (it thaws after the kill, so the v1 freezer cannot hold the reap).
  Status Freeze() override;
  Status Thaw() override;
  bool frozen() const { return frozen_.load(); }

  // Finishes a parked cell over `layers` (sandbox/backend.h): the idmapped layer mounts,
  // then cell init builds the root and sends Ready as in Create. The cell's spec() gets
  // the layers. An error leaves the cell unusable (destroy it). cell_park.cc.
  Status Unpark(const std::vector<CellLayer>& layers) override;
  bool parked() const override { return parked_; }

  // Requests into the cell (exec, signal, files). After Destroy (or if init died) every
  // call fails with an error; the object stays valid until the Cell is deleted.
  CellChannel& channel();
  // From the cgroup; an error "limits not enforced: ..." when the cell has none.
  Result<CgroupUsage> Usage() const override;
  const SetupTimings& timings() const { return timings_; }
  // Per-step latency of Destroy ("kill", "close_channel", "reap", "cgroup", "cell_dir"),
  // empty until Destroy ran.
  const SetupTimings& destroy_timings() const { return destroy_timings_; }
  const std::string& id() const override { return spec_.id; }
  const CellSpec& spec() const override { return spec_; }
  // What this cell does not enforce and why ("limits not enforced: <reason>",
  // "seccomp disabled by the spec"); empty for a fully confined cell.
  const std::vector<std::string>& warnings() const override { return warnings_; }
  // Host pid of cell init (pid 1 inside); -1 after Destroy.
  pid_t init_pid() const { return init_pid_; }
  const std::string& dir() const { return dir_; }
  const CellIdMap& id_map() const { return id_map_; }
  // The cell's cgroup, nullptr when it runs without one (see warnings()).
  const Cgroup* cgroup() const { return cgroup_.get(); }
  // True while cell init runs (waitpid WNOHANG; does not reap a live process).
  bool alive() const;
  // alive() and its channel works.
  bool usable() const override;
  // The listening TCP socket on 127.0.0.1:spec().egress_proxy_port inside the cell's network
  // namespace (checked: a listening IPv4 stream socket), for the egress proxy to accept on.
  // Ownership passes to the caller; -1 when the spec asked for none or it was taken.
  int TakeEgressListener() override;
  // The uppers under cell init's scratch tmpfs, reached through copies (pidfd_getfd) of
  // the O_PATH fds cell init keeps for this (setup.h). Only the server can take them:
  // cell init is not dumpable, and the server owns the cell's user namespace.
  Result<CellWritableLayers> WritableLayers() const override;

  // CellInstance's requests, through channel() (sandbox/cell_requests.cc).
  Result<ExecResult> Exec(const ExecOptions& options) override;
  // Exec without a waiting thread: the exec waits on the reactor of CellCreateOptions and
  // `done` runs once on one of its threads, with Exec's result or an error that names this
  // cell (destroyed meanwhile, init gone, parked). Cancel through the handle or
  // options.stop. A cell made without a reactor calls `done` at once, on this thread, with
  // an error saying so. See CellChannel::ExecAsync.
  CellChannel::ExecHandle ExecAsync(ExecOptions options, CellChannel::ExecCallback done);
  Status SignalExec(uint64_t exec_id, int signo) override;
  Result<control::StatsReply> Stats() override;
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;
  Result<FileWindow> ReadFileRange(const std::string& path, uint64_t offset,
                                   uint64_t max_bytes) override;
  Status WriteFile(const std::string& path, std::string_view data, uint32_t mode) override;
  Status WriteFileAt(const std::string& path, uint64_t offset, std::string_view data, bool truncate,
                     uint32_t mode) override;
  Status AppendFile(const std::string& path, std::string_view data, uint32_t mode) override;
  Status WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) override;
  Result<std::vector<control::DirEntry>> ListDir(const std::string& path,
                                                 size_t max_entries) override;
  Result<control::FileStat> Stat(const std::string& path, bool follow_symlinks) override;
  Status Mkdir(const std::string& path, uint32_t mode, bool parents) override;
  Status Remove(const std::string& path, bool recursive) override;
  Status Rename(const std::string& from, const std::string& to, bool no_replace) override;

 private:
  Cell() = default;
  // `request` on the channel, or an error when there is none (cell_requests.cc).
  template <typename F>
  auto OnChannel(F&& request) -> decltype(request(std::declval<CellChannel&>()));
  struct Impl;
  friend struct Impl;
  // Destroy's steps 3 and 5 (cell_destroy.cc): each notes what it did, or its failure, in
  // `report`.
  void ReapInit(DestroyReport& report);
  void RemoveCellDirAndIdRange(DestroyReport& report);

  CellSpec spec_;
  std::string dir_;
  CellIdMap id_map_;
  std::unique_ptr<Cgroup> cgroup_;
  std::string cgroup_missing_reason_;
  std::unique_ptr<CellChannel> channel_;
  int pidfd_ = -1;
  pid_t init_pid_ = -1;
  int egress_listener_ = -1;
  SetupTimings timings_;
  SetupTimings destroy_timings_;
  std::optional<DestroyReport> destroy_report_;
  std::vector<std::string> warnings_;
  bool destroyed_ = false;
  std::atomic<bool> frozen_{false};  // Freeze succeeded and no Thaw since
  // Parked (CreateParked, until Unpark): init waits for the claim on claim_fd_ (the sync
  // socket) and its control socket is parked_control_ (no channel yet).
  bool parked_ = false;
  UniqueFd claim_fd_;
  UniqueFd parked_control_;
  std::chrono::milliseconds ready_timeout_{0};
  CellReactor* reactor_ = nullptr;  // CellCreateOptions::reactor
};

// The Linux namespace backend: makes Cells with `options` (sandbox/cell_requests.cc).
class NamespaceBackend final : public CellBackend {
 public:
  explicit NamespaceBackend(CellCreateOptions options) : options_(std::move(options)) {}
  Result<std::unique_ptr<CellInstance>> Create(const CellSpec& spec) const override;
  Result<std::unique_ptr<CellInstance>> CreateParked(const CellSpec& spec) const override;
  // Parked cells serve layers, which need per-cell id ranges (a root server).
  bool ParksCells() const override;

 private:
  const CellCreateOptions options_;
};

// Finds cells a crashed predecessor left in <state_dir>/cells: kills their cell init if it
// still runs (checked by pid and start time, so a reused pid is never killed), removes
// their cgroups, directories and id-range claims. Cells whose owner server (the owner
// record, state_dir.h) still runs are left alone, so several servers can share a state
// dir (each stdio client starts its own). Call at start, before creating cells. Returns
// the ids reaped.
Result<std::vector<std::string>> ReapOrphans(const std::string& state_dir);

// Re-owns, for uid/gid, the entries of a persistent workspace that an earlier cell of a
// root server made (owners inside mcpcell's id-range space only; symlinks not followed).
Status AdoptPersistentWorkspace(const std::string& dir, uid_t uid, gid_t gid);

// Path of mcpcell-init next to the running executable (SiblingExecutable), or an error
// when it is missing or not executable.
Result<std::string> FindCellInit();

}  // namespace mcpcell::sandbox
