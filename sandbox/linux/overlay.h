// The cell's root filesystem: a read-only template under per-cell overlay uppers.
//
// The template ("skeleton") is built once per state dir by the server (PrepareHostTemplate)
// and shared read-only by every cell: the /bin, /lib, /lib64, /sbin symlinks into /usr,
// empty mount points, and a curated /etc copied from an allowlist of the host's (loader
// cache, CA certificates, alternatives, timezone, ...) with no host secrets (no shadow,
// ssh keys, ssl/private, machine-id, sudoers). Files that depend on the cell (passwd,
// group, hosts, hostname) are written by cell init into the cell's upper (WriteCellEtc).
//
// Cell init mounts, inside its own mount namespace (MountCellRoot): a size-limited tmpfs
// holding every upper and work dir (so the cell's writes live in RAM charged to its memory
// cgroup and vanish with its mount namespace), an overlay at the new root with the skeleton
// as lower, and one overlay per system dir (/usr) with the host's directory as lower. The
// host's directories are never written: overlayfs only writes the upper.
//
// Snapshot layers (CellSpec::layers) arrive as idmapped read-only mounts from the server
// (idmap_mount.h); MountCellRoot attaches them under scratch/lowers/<index> and stacks each
// target's above its template lower. A workspace layer makes /workspace an overlay too
// (MountWorkspaceOverlay), with its upper on a tmpfs of its own at scratch/ws.
//
// PrepareHostTemplate runs on the server (any thread; concurrent callers race safely via
// an atomic rename). The rest runs in cell init. No exceptions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "sandbox/cell_spec.h"

namespace mcpcell::sandbox {

// Returns <state_dir>/templates/host-v<N>-<fingerprint>, building it first when missing.
Result<std::string> PrepareHostTemplate(const std::string& state_dir);

// 16 hex digits that change when an entry the template copies from `host_root` ("" for
// the host) is replaced, edited or (a directory) gains, loses or renames an entry: type,
// inode, size and modification time of each, one level deep (~40 lstat calls). An edit
// in place of a file inside a copied directory that leaves the directory's mtime alone is
// not seen.
std::string HostTemplateFingerprint(const std::string& host_root);

// overlay mount at `target` (nosuid,nodev) with `lowers` read-only (topmost first) and the
// given upper/work.
Status MountOverlay(const std::vector<std::string>& lowers, const std::string& upper,
                    const std::string& work, const std::string& target);

// tmpfs at `scratch` for the uppers (scratch/layers/root/upper, scratch/layers/sys<i>/upper
// for rootfs.system_dirs[i]), the layer mounts (one per spec.layers entry, in order;
// consumed) attached, the cell's /etc files and mount points written into the root's
// upper, overlay root at `root` (a directory inside `scratch`, created here), one overlay
// per system dir.
Status MountCellRoot(const CellSpec& spec, const std::string& hostname, const std::string& scratch,
                     const std::string& root, std::vector<UniqueFd>& layer_mounts);

// Where MountCellRoot attaches spec.layers[index].
std::string CellLayerMountPoint(const std::string& scratch, size_t index);
// The lowers of `target`: its attached layers, topmost first, then `base` (unless empty).
std::vector<std::string> CellLowerDirs(const CellSpec& spec, const std::string& scratch,
                                       const std::string& target, const std::string& base);

// True when spec.layers has a "/workspace" layer.
bool HasWorkspaceLayer(const CellSpec& spec);
// The workspace over its layers at `target`: a tmpfs at scratch/ws (workspace_bytes, or
// root_upper_bytes when 0) holding upper (owned by the sandbox user) and work.
Status MountWorkspaceOverlay(const CellSpec& spec, const std::string& scratch,
                             const std::string& target);

// /etc/passwd, group, hosts and hostname of this cell, under `root` (an upper dir).
Status WriteCellEtc(const CellSpec& spec, const std::string& hostname, const std::string& root);

}  // namespace mcpcell::sandbox
