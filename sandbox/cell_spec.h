// CellSpec: everything the cell mechanism needs to build one cell, and nothing else.
//
// The policy compiler (policies/) turns a policy into a CellSpec; sandbox/ reads nothing
// but this struct. The server (Cell::Create) validates it and hands it to cell init on an
// inherited fd in a small length-prefixed binary encoding (EncodeCellSpec/DecodeCellSpec);
// cell init is a freshly exec'd program and has no other way to learn what to build.
//
// The codec is header-only on purpose: cell init (built without exceptions, linked against
// the kernel library only) and the server (mcpcell_sandbox) both need it, and neither
// library links the other. It uses no exceptions and never trusts its input: every length
// is checked against what is left and against a cap, unknown tags are rejected.
//
// Threading: plain data; no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/rlimits.h"
#include "sandbox/status.h"

namespace mcpcell::sandbox {

// A host directory made visible inside the cell (bind mount, always nosuid,nodev).
struct CellMount {
  std::string host_path;  // absolute, must exist
  std::string cell_path;  // absolute inside the cell; not "/", /proc, /dev, /sys
  bool writable = false;
};

// The read-only lower layers of the cell's root. `skeleton_dir` is the lower of "/": a
// directory prepared once per state dir by PrepareHostTemplate (sandbox/linux/overlay.h)
// holding the curated /etc, the /bin, /lib, /lib64, /sbin symlinks and empty mount points.
// Each of `system_dirs` (default: the host's /usr) is overlaid at the same path with its
// own per-cell upper, so programs see the host's binaries and libraries, read-only for the
// template and with the cell's writes kept in the cell.
struct TemplateSpec {
  std::string skeleton_dir;
  std::vector<std::string> system_dirs = {"/usr"};
};

// Sizes of the cell's RAM-backed filesystems. They are charged to the cell's memory
// cgroup as well.
struct TmpfsSizes {
  uint64_t root_upper_bytes = 1ull << 30;  // the per-cell upper layers of the overlays
  uint64_t tmp_bytes = 256ull << 20;       // /tmp
  uint64_t run_bytes = 16ull << 20;        // /run
  uint64_t shm_bytes = 64ull << 20;        // /dev/shm
};

struct CellSpec {
  // [A-Za-z0-9._-]{1,64}, unique among live cells of one state dir. Names the cell dir,
  // the cgroup and, by default, the hostname.
  std::string id;
  // The server's state dir: cells live in <state_dir>/cells/<id>. Absolute.
  std::string state_dir;
  TemplateSpec rootfs;
  // Host directory bound at /workspace (writable, the default cwd). Empty: a fresh
  // directory <cell dir>/workspace, deleted with the cell.
  std::string workspace_host_dir;
  std::vector<CellMount> mounts;
  CgroupLimits limits;
  RlimitSpec rlimits;
  TmpfsSizes tmpfs;
  std::string hostname;  // empty: "cell-<id>" (truncated to 64)
  // The user every exec and file operation runs as inside the cell. Never 0.
  uint32_t sandbox_uid = 1000;
  uint32_t sandbox_gid = 1000;
  std::string sandbox_user = "sandbox";  // name in the synthesized /etc/passwd
  std::vector<std::string> env;          // "KEY=VALUE" defaults of every exec
  // Off only for debugging; a cell without seccomp says so in Cell::warnings().
  bool seccomp = true;
};

// The defaults every cell starts from (PATH, HOME, LANG, ...): a spec with `id` and
// `state_dir` set and the default template of `state_dir`.
CellSpec DefaultCellSpec(std::string id, std::string state_dir);

// Checks every field; the message names it ("mounts[2].cell_path: must be absolute").
Status ValidateCellSpec(const CellSpec& spec);

// Wire form for cell init. Decode rejects truncation, trailing bytes, lengths above the
// caps below and unknown versions.
inline constexpr uint32_t kCellSpecWireVersion = 1;
inline constexpr size_t kMaxCellSpecBytes = 1 << 20;
inline std::string EncodeCellSpec(const CellSpec& spec);
inline Result<CellSpec> DecodeCellSpec(std::string_view bytes);

// ---- Inline codec (see the header comment for why it lives here) ----
// CODEC_PLACEHOLDER

}  // namespace mcpcell::sandbox
