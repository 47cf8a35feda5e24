// The backend seam: what the rest of the server uses of a cell, whatever makes it.
//
// A CellBackend makes cells from a CellSpec; a CellInstance is one live cell: its requests
// (exec, signal, file operations, stats), what it does not enforce, and its destruction.
// CellSession, CellSessionManager and WarmPool hold cells only as CellInstance, and tools
// reach them only through a CellLease (cell_session.h), so a second backend changes
// neither. Today there is one: the Linux namespace backend (NamespaceBackend, making
// sandbox/cell.h's Cell, whose requests go over the control protocol through
// CellChannel). A microVM backend would implement the same interface by booting a guest
// whose agent is the same cell init, serving the same control protocol over a virtio
// channel (docs/architecture.md, "Backends").
//
// Threading: a backend's Create may run on any thread, concurrently. A CellInstance's
// requests are thread-safe and fail with an error (never hang) once the cell died or was
// destroyed; Destroy is called by one thread at a time, and is idempotent.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell_spec.h"
#include "sandbox/control/protocol.h"
#include "sandbox/linux/cgroup.h"

namespace mcpcell::sandbox {

// What an exec asks for and what it gives back, and a window of a file: the vocabulary
// of every backend.
enum class OutputStream { kStdout, kStderr };

struct ExecOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;          // "KEY=VALUE", overlaid on the cell's defaults
  std::string cwd;                       // empty: the workspace
  std::string stdin_data;                // written to the program's stdin, then closed
  std::chrono::milliseconds timeout{0};  // wall clock; 0 = none
  size_t keep_bytes = 1 << 20;           // per stream, kept in ExecResult
  // Called on the calling thread with each chunk as it arrives (may be empty function).
  std::function<void(OutputStream, std::string_view)> on_output;
  // Passthrough: when >= 0, given to the program as-is (no capture, no stdin_data).
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  std::stop_token stop;  // a stop request kills the process group (cancellation)
  // Called once the program runs: its exec id (for SignalExec) and pid inside the cell.
  std::function<void(uint64_t exec_id, pid_t pid)> on_started;
  // Detached (a background program, issue 32): when not empty, cell init supervises the
  // program and copies its stdout and stderr into this file of the cell, at most
  // detached_output_cap bytes (control/protocol.h, DetachedExecRequest); Exec returns as
  // soon as it runs, with ExecResult::detached its handle. Only argv, env and cwd apply.
  std::string detached_output;
  uint64_t detached_output_cap = 0;
};

class DetachedExec;  // sandbox/detached_exec.h

struct StreamCapture {
  std::string data;    // the first keep_bytes bytes
  uint64_t total = 0;  // bytes the program wrote
  bool truncated() const { return total > data.size(); }
};

struct ExecResult {
  bool signaled = false;  // killed by `signo`; otherwise exited with `exit_code`
  int exit_code = 0;
  int signo = 0;
  bool timed_out = false;   // the wall-clock timeout fired and killed the group
  bool cancelled = false;   // the stop token fired
  bool oom_killed = false;  // the cell's cgroup recorded an OOM kill during the exec
  // From ExecStarted (or, when none was asked for, the request) to ExecExited.
  std::chrono::microseconds wall_time{0};
  std::chrono::microseconds user_cpu{0}, system_cpu{0};  // of the process and its waited children
  uint64_t peak_memory_bytes = 0;                        // max RSS
  StreamCapture out, err;
  // Set by a detached exec (ExecOptions::detached_output); then nothing above is.
  std::shared_ptr<DetachedExec> detached;
};

// A window of a file (ReadFileRange): `file_size` gets the file's size and `eof` whether
// the window reached its end.
struct FileWindow {
  std::string data;
  uint64_t file_size = 0;
  bool eof = false;
};

// ---- A live cell's writable state (issue 28: snapshots, hibernation) ----
// Host paths of what a cell wrote, for capturing it (a snapshot). The uppers hold the
// cell's changes in overlayfs form: a deleted lower file is a char 0/0 whiteout, a
// directory made anew over a lower one has the xattr user.overlay.opaque=y. Files are owned
// by host ids: with a range mapping, in-cell id k is host id uid_base/gid_base + k; with a
// single mapping every file the cell made is the server's uid/gid, the sandbox user's.
// The paths go through fds this value holds (/proc/self/fd/<n>/...): valid in this process
// while the value lives, even if the cell ends meanwhile (its uppers then stay in memory
// until the value is gone). Freeze the cell first for a consistent copy, and do not descend
// into mount points (a spec mount under /workspace shows in a live `workspace`).
struct CellWritableLayers {
  std::string root_upper;                                          // changes to "/"
  std::vector<std::pair<std::string, std::string>> system_uppers;  // {"/usr", its upper}
  std::string workspace;            // the workspace overlay's upper, or the workspace itself
  bool workspace_is_upper = false;  // true: `workspace` is an upper over workspace layers
  bool single_mapping = false;
  uint32_t uid_base = 0, gid_base = 0;
  std::vector<UniqueFd> held;  // what the paths go through
};

// What a cell's destruction did (CellInstance::last_destroy_report; the audit's
// cell.destroy `cleanup`). Each step that failed is in `left`, and its part of the
// figures above stays empty/false: the report never claims what was not done.
struct DestroyReport {
  struct Left {
    std::string what;  // the step: "kill", "thaw", "reap", "cgroup", "cell dir", "id range"
    std::string why;   // its error
  };
  // Processes of the cell's cgroup just before the SIGKILL (init included; also for a
  // frozen cell). nullopt: the cell had no cgroup, or it could not be read.
  std::optional<uint64_t> processes_killed;
  // Init was reaped: its exit completes only after every process of its pid namespace is
  // gone, and with them the namespaces below.
  bool init_reaped = false;
  std::vector<std::string> namespaces_gone;  // "pid", "mount", "net", "ipc", "uts"
  std::vector<std::string> cgroup_removed;   // its directories (v1: one per controller)
  // The cell dir, and first the workspace inside it when that was ephemeral (a workspace
  // the spec named on the host stays and is not listed).
  std::vector<std::string> dirs_removed;
  bool id_range_released = false;  // false too when the cell held none (non-root server)
  std::vector<Left> left;
  Status result;  // Destroy's: Ok, or the first failed step's error
};

// One live cell. The request contracts are CellChannel's (sandbox/cell_channel.h).
class CellInstance {
 public:
  virtual ~CellInstance() = default;

  virtual const std::string& id() const = 0;
  virtual const CellSpec& spec() const = 0;
  // What this cell does not enforce and why; empty for a fully confined cell.
  virtual const std::vector<std::string>& warnings() const = 0;
  // True while the cell takes requests (its init runs and answers).
  virtual bool usable() const = 0;
  // Resource use so far; an error "limits not enforced: ..." when it is not accounted.
  virtual Result<CgroupUsage> Usage() const = 0;
  // The listening socket for the egress proxy (CellSpec::egress_proxy_port), once;
  // ownership passes to the caller. -1 when the spec asked for none or it was taken.
  virtual int TakeEgressListener() = 0;
  // Ends every process of the cell and removes all it made, also while it is frozen.
  // Idempotent.
  virtual Status Destroy() = 0;
  // What the first Destroy did (DestroyReport above); nullopt before it, or from a
  // backend that does not report (the caller then knows only Destroy's Status).
  virtual std::optional<DestroyReport> last_destroy_report() const { return std::nullopt; }

  // ---- Writable state (CellWritableLayers above) ----
  // An error when the cell is gone or its backend cannot show its files to the host.
  virtual Result<CellWritableLayers> WritableLayers() const {
    return Error::Msg("this cell backend does not expose its writable layers");
  }
  // Pause: stops every process of the cell where it is; they keep their memory and use no
  // CPU until Thaw. No request may be made while the cell is frozen (its init is stopped
  // too): the caller (CellSession) thaws before the next lease. An error leaves the cell
  // running and says why it cannot be paused. The default: this backend cannot pause.
  virtual Status Freeze() {
    return Error::Msg("cell " + id() + ": this backend cannot pause cells");
  }
  // Resumes a frozen cell; Ok when it was not frozen. An error means the cell cannot be
  // trusted to run again: the caller replaces it.
  virtual Status Thaw() { return Ok(); }

  // ---- Parked cells (CellBackend::CreateParked) ----
  // Finishes a parked cell with `layers` as its snapshot layers (CellSpec::layers): the
  // cell is then as if made by Create from its spec plus the layers. An error leaves the
  // cell unusable: destroy it.
  virtual Status Unpark(const std::vector<CellLayer>& layers) {
    (void)layers;
    return Error::Msg("cell " + id() + " is not parked");
  }
  // True from CreateParked until Unpark.
  virtual bool parked() const { return false; }

  // An error means the program could not run; a program that ran and failed is a result.
  virtual Result<ExecResult> Exec(const ExecOptions& options) = 0;
  virtual Status SignalExec(uint64_t exec_id, int signo) = 0;
  virtual Result<control::StatsReply> Stats() = 0;

  virtual Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) = 0;
  virtual Result<FileWindow> ReadFileRange(const std::string& path, uint64_t offset,
                                           uint64_t max_bytes) = 0;
  virtual Status WriteFile(const std::string& path, std::string_view data, uint32_t mode) = 0;
  virtual Status WriteFileAt(const std::string& path, uint64_t offset, std::string_view data,
                             bool truncate, uint32_t mode) = 0;
  virtual Status AppendFile(const std::string& path, std::string_view data, uint32_t mode) = 0;
  virtual Status WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) = 0;
  virtual Result<std::vector<control::DirEntry>> ListDir(const std::string& path,
                                                         size_t max_entries) = 0;
  virtual Result<control::FileStat> Stat(const std::string& path, bool follow_symlinks) = 0;
  virtual Status Mkdir(const std::string& path, uint32_t mode, bool parents) = 0;
  virtual Status Remove(const std::string& path, bool recursive) = 0;
  virtual Status Rename(const std::string& from, const std::string& to, bool no_replace) = 0;
};

// Makes cells. Returns only a ready cell or an error naming the failed step (everything
// already made undone).
class CellBackend {
 public:
  virtual ~CellBackend() = default;
  virtual Result<std::unique_ptr<CellInstance>> Create(const CellSpec& spec) const = 0;
  // A parked cell: made as far as it can be without its filesystem (the costly namespace,
  // cgroup and process work), finished by CellInstance::Unpark with the snapshot layers a
  // session needs, so that a warm pool serves sessions over snapshots (restore, fork,
  // hibernation) too. `spec` has no layers.
  virtual Result<std::unique_ptr<CellInstance>> CreateParked(const CellSpec& spec) const {
    (void)spec;
    return Error::Msg("this cell backend cannot park cells");
  }
  // Whether CreateParked cells can take layers here (a warm pool makes none otherwise).
  virtual bool ParksCells() const { return false; }
};

}  // namespace mcpcell::sandbox
