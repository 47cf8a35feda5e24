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
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sandbox/linux/cgroup.h"
#include "sandbox/linux/rlimits.h"

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
  // > 0 with no workspace_host_dir: /workspace is a tmpfs of this size inside the cell, so
  // the workspace has a real disk limit (ENOSPC past it). RAM-backed and charged to the
  // cell's memory cgroup; not visible from the host. 0: a host dir under the cell dir.
  uint64_t workspace_bytes = 0;
};

// One read-only lower layer over the template: a snapshot's directory (restore, fork and
// hibernation all make a new cell over a snapshot's layers). `host_dir` holds files with
// canonical ownership (host uid/gid on disk = the id inside the cell: 1000 for the sandbox
// user, 0 for root), whiteouts as char 0/0 devices and opaque directories with the xattr
// user.overlay.opaque=y. The server mounts it idmapped to the cell's user namespace and
// read-only (sandbox/linux/idmap_mount.h), so the cell sees those owners and nothing ever
// writes the directory; cell init stacks it under the target's per-cell upper.
struct CellLayer {
  // "/", one of rootfs.system_dirs ("/usr"), or "/workspace".
  std::string target;
  std::string host_dir;  // absolute, an existing directory
};
inline constexpr size_t kMaxCellLayers = 16;

struct CellSpec {
  // [A-Za-z0-9._-]{1,64}, unique among live cells of one state dir. Names the cell dir,
  // the cgroup and, by default, the hostname.
  std::string id;
  // The server's state dir: cells live in <state_dir>/cells/<id>. Absolute.
  std::string state_dir;
  TemplateSpec rootfs;
  // Snapshot layers, topmost first among those of one target; each target's layers lie
  // above its template lower (the skeleton for "/", the host dir for a system dir) and
  // below the cell's fresh upper. With a "/workspace" layer, /workspace is an overlay whose
  // upper lives on a tmpfs of its own (workspace_bytes, or root_upper_bytes when 0);
  // workspace_host_dir must then be empty. Needs a root server (idmapped mounts).
  std::vector<CellLayer> layers;
  // Host directory bound at /workspace (writable, the default cwd). Empty: a fresh
  // directory <cell dir>/workspace, deleted with the cell. A named directory is used as-is
  // and survives the cell; with a root server the sandbox user is host uid
  // kIdRangeBase + slot * 65536 + sandbox_uid, so the caller must make it writable for
  // that uid if the cell should write (Cell::id_map() tells the base).
  std::string workspace_host_dir;
  // Host directory holding the cell's own /dev/null, zero, full, random, urandom and tty
  // (sandbox/linux/devices.h). Set by Cell::Create, which overrides any caller's value:
  // empty when the server cannot make device nodes, and cell init then binds the host's.
  std::string device_dir;
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
  // > 0: cell init listens on 127.0.0.1:<port> inside the cell's network namespace and
  // hands the listening socket to the server (Cell::TakeEgressListener), which serves the
  // cell's HTTP/HTTPS proxy on it (egress/). 0: no listener.
  uint16_t egress_proxy_port = 0;
};

// The defaults every cell starts from (PATH, HOME, LANG, ...): a spec with `id` and
// `state_dir` set and the default template of `state_dir`.
CellSpec DefaultCellSpec(std::string id, std::string state_dir);

// A fresh random id (`prefix` + 16 hex digits; the warm pool's cells use 'w'). Ids name cgroups,
// which are per host, so they must be unique across state dirs too; random ids are.
std::string GenerateCellId(char prefix = 'c');

// Checks every field; the message names it ("mounts[2].cell_path: must be absolute").
Status ValidateCellSpec(const CellSpec& spec);

// Wire form for cell init. Decode rejects truncation, trailing bytes, lengths above the
// caps below and unknown versions.
inline constexpr uint32_t kCellSpecWireVersion = 4;
inline constexpr size_t kMaxCellSpecBytes = 1 << 20;
inline std::string EncodeCellSpec(const CellSpec& spec);
inline Result<CellSpec> DecodeCellSpec(std::string_view bytes);

// ---- Inline codec (see the header comment for why it lives here) ----
namespace cell_spec_wire {

inline constexpr uint32_t kMagic = 0x4C454343;  // "CCEL"
inline constexpr uint32_t kMaxString = 64 * 1024;
inline constexpr uint32_t kMaxList = 4096;

class Writer {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void Bool(bool v) { U32(v ? 1 : 0); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  void StrList(const std::vector<std::string>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) Str(s);
  }
  std::string out;

 private:
  void Raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
};

// Reads fields in order; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint64_t U64(const char* field) { return Fixed<uint64_t>(field); }
  uint32_t U32(const char* field) { return Fixed<uint32_t>(field); }
  bool Bool(const char* field) {
    uint32_t v = U32(field);
    if (v > 1) Fail(field, "not a boolean");
    return v == 1;
  }
  std::string Str(const char* field) {
    uint32_t n = U32(field);
    if (!error.empty()) return {};
    if (n > kMaxString) return Fail(field, "string longer than the cap"), std::string();
    if (n > in_.size()) return Fail(field, "truncated"), std::string();
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    if (s.find('\0') != std::string::npos) Fail(field, "contains a NUL byte");
    return s;
  }
  std::vector<std::string> StrList(const char* field) {
    uint32_t n = Count(field);
    std::vector<std::string> v;
    for (uint32_t i = 0; i < n && error.empty(); ++i) v.push_back(Str(field));
    return v;
  }
  uint32_t Count(const char* field) {
    uint32_t n = U32(field);
    if (n > kMaxList) Fail(field, "more entries than the cap");
    return error.empty() ? n : 0;
  }
  bool AtEnd() const { return in_.empty(); }
  void Fail(const char* field, const char* what) {
    if (error.empty()) error = std::string("cell spec: ") + field + ": " + what;
  }
  std::string error;

 private:
  template <typename T>
  T Fixed(const char* field) {
    T v{};
    if (!error.empty()) return v;
    if (in_.size() < sizeof v) return Fail(field, "truncated"), v;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  std::string_view in_;
};

}  // namespace cell_spec_wire

inline std::string EncodeCellSpec(const CellSpec& spec) {
  cell_spec_wire::Writer w;
  w.U32(cell_spec_wire::kMagic);
  w.U32(kCellSpecWireVersion);
  w.Str(spec.id);
  w.Str(spec.state_dir);
  w.Str(spec.rootfs.skeleton_dir);
  w.StrList(spec.rootfs.system_dirs);
  w.U32(static_cast<uint32_t>(spec.layers.size()));
  for (const CellLayer& l : spec.layers) {
    w.Str(l.target);
    w.Str(l.host_dir);
  }
  w.Str(spec.workspace_host_dir);
  w.Str(spec.device_dir);
  w.U32(static_cast<uint32_t>(spec.mounts.size()));
  for (const CellMount& m : spec.mounts) {
    w.Str(m.host_path);
    w.Str(m.cell_path);
    w.Bool(m.writable);
  }
  w.U64(spec.limits.memory_max_bytes);
  w.U64(spec.limits.pids_max);
  w.U32(spec.limits.cpu_millicores);
  w.U64(spec.rlimits.nofile);
  w.U64(spec.rlimits.fsize_bytes);
  w.U64(spec.rlimits.core);
  w.U64(spec.rlimits.nproc);
  w.U64(spec.rlimits.as_bytes);
  w.U64(spec.tmpfs.root_upper_bytes);
  w.U64(spec.tmpfs.tmp_bytes);
  w.U64(spec.tmpfs.run_bytes);
  w.U64(spec.tmpfs.shm_bytes);
  w.U64(spec.tmpfs.workspace_bytes);
  w.Str(spec.hostname);
  w.U32(spec.sandbox_uid);
  w.U32(spec.sandbox_gid);
  w.Str(spec.sandbox_user);
  w.StrList(spec.env);
  w.Bool(spec.seccomp);
  w.U32(spec.egress_proxy_port);
  return std::move(w.out);
}

inline Result<CellSpec> DecodeCellSpec(std::string_view bytes) {
  if (bytes.size() > kMaxCellSpecBytes) return Error::Msg("cell spec: larger than 1 MiB");
  cell_spec_wire::Reader r(bytes);
  if (r.U32("magic") != cell_spec_wire::kMagic) r.Fail("magic", "not a cell spec");
  if (r.U32("version") != kCellSpecWireVersion) r.Fail("version", "unsupported version");
  CellSpec s;
  s.id = r.Str("id");
  s.state_dir = r.Str("state_dir");
  s.rootfs.skeleton_dir = r.Str("rootfs.skeleton_dir");
  s.rootfs.system_dirs = r.StrList("rootfs.system_dirs");
  const uint32_t layers = r.Count("layers");
  if (layers > kMaxCellLayers) r.Fail("layers", "more entries than the cap");
  for (uint32_t i = 0; i < layers && r.error.empty(); ++i) {
    CellLayer l;
    l.target = r.Str("layers.target");
    l.host_dir = r.Str("layers.host_dir");
    s.layers.push_back(std::move(l));
  }
  s.workspace_host_dir = r.Str("workspace_host_dir");
  s.device_dir = r.Str("device_dir");
  uint32_t mounts = r.Count("mounts");
  for (uint32_t i = 0; i < mounts && r.error.empty(); ++i) {
    CellMount m;
    m.host_path = r.Str("mounts.host_path");
    m.cell_path = r.Str("mounts.cell_path");
    m.writable = r.Bool("mounts.writable");
    s.mounts.push_back(std::move(m));
  }
  s.limits.memory_max_bytes = r.U64("limits.memory_max_bytes");
  s.limits.pids_max = r.U64("limits.pids_max");
  s.limits.cpu_millicores = r.U32("limits.cpu_millicores");
  s.rlimits.nofile = r.U64("rlimits.nofile");
  s.rlimits.fsize_bytes = r.U64("rlimits.fsize_bytes");
  s.rlimits.core = r.U64("rlimits.core");
  s.rlimits.nproc = r.U64("rlimits.nproc");
  s.rlimits.as_bytes = r.U64("rlimits.as_bytes");
  s.tmpfs.root_upper_bytes = r.U64("tmpfs.root_upper_bytes");
  s.tmpfs.tmp_bytes = r.U64("tmpfs.tmp_bytes");
  s.tmpfs.run_bytes = r.U64("tmpfs.run_bytes");
  s.tmpfs.shm_bytes = r.U64("tmpfs.shm_bytes");
  s.tmpfs.workspace_bytes = r.U64("tmpfs.workspace_bytes");
  s.hostname = r.Str("hostname");
  s.sandbox_uid = r.U32("sandbox_uid");
  s.sandbox_gid = r.U32("sandbox_gid");
  s.sandbox_user = r.Str("sandbox_user");
  s.env = r.StrList("env");
  s.seccomp = r.Bool("seccomp");
  const uint32_t egress_port = r.U32("egress_proxy_port");
  if (egress_port > 65535) r.Fail("egress_proxy_port", "not a port number");
  s.egress_proxy_port = static_cast<uint16_t>(egress_port);
  if (r.error.empty() && !r.AtEnd()) r.Fail("end", "trailing bytes");
  if (!r.error.empty()) return Error::Msg(r.error);
  return s;
}

}  // namespace mcpcell::sandbox
