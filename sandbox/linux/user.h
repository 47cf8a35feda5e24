// User namespace id maps of a cell, and the per-cell host id ranges used when running as root.
//
// The server (parent) writes a child's maps: a child cannot map ids it does not own, and
// writing from outside lets a root server map a whole range. Two modes:
//   range  (server is root): uid/gid 0..65535 inside -> a per-cell host range
//          kIdRangeBase + slot * 65536, so two cells are different users on the host and a
//          process escaping one cell owns nothing of another or of the host;
//   single (unprivileged, desktop): the sandbox uid/gid inside -> the server's own ids;
//          setgroups must be denied first (the kernel requires it for an unprivileged writer).
// Slots are claimed with symlinks <state_dir>/idranges/<slot> -> <owner cell id> (atomic,
// and on a disk-backed state dir no data block to allocate, nor to discard at release),
// released at destroy and by orphan reaping.
//
// Capabilities across the launch (cell_launch.cc): the cloned child shares the server's
// memory and execs cell init before the maps exist, so KeepCapabilitiesAcrossExec (raw
// syscalls only, no allocation) puts every capability into the ambient set, which execve
// keeps for a uid that is not root in the namespace. Cell init then waits for the server's
// go byte (kGoRange or kGoSingle, once the maps are written) and, with a range, becomes
// root of its namespace (BecomeNamespaceRoot).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace mcpcell::sandbox {

inline constexpr uint32_t kIdRangeBase = 0x40000000;  // 1073741824, far above login users
inline constexpr uint32_t kIdRangeSize = 65536;
inline constexpr int kMaxIdRangeSlots = 4096;

struct IdMapLine {
  uint32_t inside = 0;
  uint32_t outside = 0;
  uint32_t count = 0;
};

// Writes /proc/<pid>/{setgroups,uid_map,gid_map}. `deny_setgroups` writes "deny" first
// (required when the writer lacks CAP_SETGID over the parent namespace).
Status WriteIdMaps(pid_t pid, const IdMapLine& uid, const IdMapLine& gid, bool deny_setgroups);

// Longest owner a claim holds: the longest cell id (cell_spec.h). The ids the server
// makes have 17 characters, which ext4 keeps in the symlink's inode (under 60 bytes).
inline constexpr size_t kMaxIdRangeOwner = 64;

// Claims the lowest free range slot in `dir` (created if missing) for `owner` (a cell id:
// 1-kMaxIdRangeOwner characters, no '/').
Result<int> ClaimIdRangeSlot(const std::string& dir, const std::string& owner);
// Removes the slot's claim; a missing claim is not an error.
Status ReleaseIdRangeSlot(const std::string& dir, int slot);
// The slot claimed by `owner`, or -1.
int FindIdRangeSlot(const std::string& dir, const std::string& owner);
// The owner named by the claim `name` in the directory `dir_fd` ("" when unreadable or
// malformed); also reads the claim files (owner as content) of earlier versions.
std::string ReadIdRangeClaim(int dir_fd, const char* name);

// The byte the server sends cell init on its sync socket once the id maps are written:
// which of the two modes they are in.
inline constexpr char kGoRange = 'g';
inline constexpr char kGoSingle = 's';

// In the cloned child, before execve of cell init (the maps are not written yet, so the
// child's uid is unmapped, not root, in its namespace): raises every capability of the
// permitted set into the inheritable and ambient sets, which execve keeps for a non-root
// uid. Raw syscalls only (it runs in the server's memory, clone_vm.h).
// Returns 0 or -errno.
int KeepCapabilitiesAcrossExec();

// In cell init, after kGoRange: setgroups({}), setresgid and setresuid to 0 inside, so init
// is root of its namespace, as a range's cell init always was (its ambient set is emptied
// with the bounding set before anything of the cell runs, caps.h).
Status BecomeNamespaceRoot();

}  // namespace mcpcell::sandbox
