// CellSpec defaults and validation (the codec is inline in cell_spec.h).
#include "sandbox/cell_spec.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "sandbox/linux/hostname.h"

namespace mcpcell::sandbox {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Absolute, no "." or ".." components, no "//", no trailing '/', no NUL.
Status CheckCleanAbsolute(const std::string& field, const std::string& path) {
  if (path.empty() || path[0] != '/')
    return Error::Msg(field + ": \"" + path + "\" must be absolute");
  if (path.find('\0') != std::string::npos) return Error::Msg(field + ": contains a NUL byte");
  if (path.size() > 1 && path.back() == '/') {
    return Error::Msg(field + ": \"" + path + "\" must not end with '/'");
  }
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (path.size() > 1 && (part.empty() || part == "." || part == "..")) {
      return Error::Msg(field + ": \"" + path + "\" has an empty, '.' or '..' component");
    }
    start = end + 1;
  }
  return Ok();
}

// Paths that end up in overlayfs mount options cannot hold its separators.
Status CheckOverlaySafe(const std::string& field, const std::string& path) {
  if (path.find_first_of(",:\\") != std::string::npos) {
    return Error::Msg(field + ": \"" + path + "\" must not contain ',', ':' or '\\'");
  }
  return Ok();
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

// The host's root and kernel/system trees never enter a cell (as a mount or a layer),
// even through a symlink.
Status CheckNotHostSystemPath(const std::string& field, const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return Error::Sys(field + ": realpath(\"" + path + "\")");
  }
  for (const std::string& p : {path, std::string(resolved)}) {
    bool bad = p == "/";
    for (const char* dir : {"/proc", "/sys", "/dev", "/boot", "/etc", "/root"}) {
      bad = bad || IsUnder(p, dir);
    }
    if (bad) {
      return Error::Msg(field + ": \"" + path + "\" (" + p +
                        ") is a host system path and never mounted into a cell");
    }
  }
  return Ok();
}

Status CheckMount(const std::string& field, const CellMount& m) {
  if (Status s = CheckCleanAbsolute(field + ".host_path", m.host_path); !s) return s;
  if (Status s = CheckCleanAbsolute(field + ".cell_path", m.cell_path); !s) return s;
  // Under /workspace is fine (cell init makes the mount point in the workspace), not over it.
  for (const char* reserved : {"/proc", "/dev", "/sys"}) {
    if (IsUnder(m.cell_path, reserved) || m.cell_path == "/" || m.cell_path == "/workspace") {
      return Error::Msg(field + ".cell_path: \"" + m.cell_path + "\" is reserved by the cell");
    }
  }
  struct stat st;
  if (::stat(m.host_path.c_str(), &st) != 0) {
    return Error::Sys(field + ".host_path: stat(\"" + m.host_path + "\")");
  }
  // Defence in depth behind the policy loader's full rules (policies/mount_check.h): the
  // host's root and kernel/system trees never enter a cell, even through a symlink, and
  // neither does a socket (a container runtime's API is one).
  if (S_ISSOCK(st.st_mode)) {
    return Error::Msg(field + ".host_path: \"" + m.host_path + "\" is a socket");
  }
  return CheckNotHostSystemPath(field + ".host_path", m.host_path);
}

Status CheckIds(const CellSpec& spec) {
  // Range mode maps 0..65535 inside; the sandbox user must be one of them and not root.
  if (spec.sandbox_uid == 0 || spec.sandbox_uid >= 65534) {
    return Error::Msg("sandbox_uid: must be in 1..65533, got " + std::to_string(spec.sandbox_uid));
  }
  if (spec.sandbox_gid == 0 || spec.sandbox_gid >= 65534) {
    return Error::Msg("sandbox_gid: must be in 1..65533, got " + std::to_string(spec.sandbox_gid));
  }
  const std::string& u = spec.sandbox_user;
  bool ok = !u.empty() && u.size() <= 32 && ((u[0] >= 'a' && u[0] <= 'z') || u[0] == '_');
  for (char c : u)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  if (!ok || u == "root" || u == "nobody") {
    return Error::Msg("sandbox_user: \"" + u + "\" is not a valid user name");
  }
  return Ok();
}

Status CheckSizes(const TmpfsSizes& t) {
  constexpr uint64_t kMin = 1 << 20;
  const std::pair<const char*, uint64_t> sizes[] = {{"tmpfs.root_upper_bytes", t.root_upper_bytes},
                                                    {"tmpfs.tmp_bytes", t.tmp_bytes},
                                                    {"tmpfs.run_bytes", t.run_bytes},
                                                    {"tmpfs.shm_bytes", t.shm_bytes}};
  for (const auto& [name, value] : sizes) {
    if (value < kMin) return Error::Msg(std::string(name) + ": must be at least 1 MiB");
    if (value > (1ull << 44)) return Error::Msg(std::string(name) + ": larger than 16 TiB");
  }
  return Ok();
}

// Each layer's target is "/", a system dir or "/workspace"; its host_dir an existing
// directory whose path fits overlayfs options (cell init names the attached mount, not this
// path, but a clean path keeps errors and audit records readable).
Status CheckLayers(const CellSpec& spec) {
  if (spec.layers.size() > kMaxCellLayers) {
    return Error::Msg("layers: " + std::to_string(spec.layers.size()) + " layers, more than " +
                      std::to_string(kMaxCellLayers));
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const CellLayer& l = spec.layers[i];
    const std::string field = "layers[" + std::to_string(i) + "]";
    bool known = l.target == "/" || l.target == "/workspace";
    for (const std::string& d : spec.rootfs.system_dirs) known = known || l.target == d;
    if (!known) {
      return Error::Msg(field + ".target: \"" + l.target +
                        "\" is not \"/\", \"/workspace\" or one of rootfs.system_dirs");
    }
    if (l.target == "/workspace" && !spec.workspace_host_dir.empty()) {
      return Error::Msg(field + ".target: a workspace layer cannot be used with a persistent " +
                        "workspace (workspace_host_dir \"" + spec.workspace_host_dir + "\")");
    }
    if (Status s = CheckCleanAbsolute(field + ".host_dir", l.host_dir); !s) return s;
    if (Status s = CheckOverlaySafe(field + ".host_dir", l.host_dir); !s) return s;
    struct stat st;
    if (::stat(l.host_dir.c_str(), &st) != 0) {
      return Error::Sys(field + ".host_dir: stat(\"" + l.host_dir + "\")");
    }
    if (!S_ISDIR(st.st_mode)) {
      return Error::Msg(field + ".host_dir: \"" + l.host_dir + "\" is not a directory");
    }
    if (Status s = CheckNotHostSystemPath(field + ".host_dir", l.host_dir); !s) return s;
  }
  return Ok();
}

}  // namespace

CellSpec DefaultCellSpec(std::string id, std::string state_dir) {
  CellSpec spec;
  spec.id = std::move(id);
  spec.state_dir = std::move(state_dir);
  spec.env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=/workspace",
      "USER=" + spec.sandbox_user,
      "LOGNAME=" + spec.sandbox_user,
      "SHELL=/bin/sh",
      "LANG=C.UTF-8",
      "TMPDIR=/tmp",
  };
  return spec;
}

std::string GenerateCellId(char prefix) {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // getrandom never fails for 8 bytes once the pool is ready; fall back to the clock.
    uint64_t t = static_cast<uint64_t>(::time(nullptr)) ^ static_cast<uint64_t>(::getpid());
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(t >>= 8);
  }
  char id[18] = {prefix};
  for (int i = 0; i < 8; ++i) std::snprintf(id + 1 + 2 * i, 3, "%02x", bytes[i]);
  return id;
}

Status ValidateCellSpec(const CellSpec& spec) {
  if (spec.id.empty() || spec.id.size() > 64 || spec.id == "." || spec.id == "..") {
    return Error::Msg("id: \"" + spec.id + "\" must be 1 to 64 characters of [A-Za-z0-9._-]");
  }
  for (char c : spec.id) {
    if (!IsIdChar(c))
      return Error::Msg("id: \"" + spec.id + "\" has characters outside [A-Za-z0-9._-]");
  }
  if (Status s = CheckCleanAbsolute("state_dir", spec.state_dir); !s) return s;
  if (Status s = CheckOverlaySafe("state_dir", spec.state_dir); !s) return s;
  if (!spec.rootfs.skeleton_dir.empty()) {
    if (Status s = CheckCleanAbsolute("rootfs.skeleton_dir", spec.rootfs.skeleton_dir); !s)
      return s;
    if (Status s = CheckOverlaySafe("rootfs.skeleton_dir", spec.rootfs.skeleton_dir); !s) return s;
  }
  for (size_t i = 0; i < spec.rootfs.system_dirs.size(); ++i) {
    std::string field = "rootfs.system_dirs[" + std::to_string(i) + "]";
    const std::string& d = spec.rootfs.system_dirs[i];
    if (Status s = CheckCleanAbsolute(field, d); !s) return s;
    if (Status s = CheckOverlaySafe(field, d); !s) return s;
    if (d == "/" || IsUnder(d, "/proc") || IsUnder(d, "/dev") || IsUnder(d, "/sys")) {
      return Error::Msg(field + ": \"" + d + "\" cannot be a template directory");
    }
  }
  if (Status s = CheckLayers(spec); !s) return s;
  if (!spec.workspace_host_dir.empty()) {
    if (Status s = CheckCleanAbsolute("workspace_host_dir", spec.workspace_host_dir); !s) return s;
  }
  if (!spec.device_dir.empty()) {
    if (Status s = CheckCleanAbsolute("device_dir", spec.device_dir); !s) return s;
  }
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    if (Status s = CheckMount("mounts[" + std::to_string(i) + "]", spec.mounts[i]); !s) return s;
  }
  if (!spec.hostname.empty()) {
    if (Status s = ValidateHostname(spec.hostname); !s) return s.error().Wrap("hostname");
  }
  if (Status s = CheckIds(spec); !s) return s;
  if (Status s = CheckSizes(spec.tmpfs); !s) return s;
  if (Status s = ValidateRlimitSpec(spec.rlimits); !s) return s;
  for (size_t i = 0; i < spec.env.size(); ++i) {
    const std::string& e = spec.env[i];
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || e.find('\0') != std::string::npos) {
      return Error::Msg("env[" + std::to_string(i) + "]: \"" + e + "\" is not KEY=VALUE");
    }
  }
  return Ok();
}

}  // namespace mcpcell::sandbox
