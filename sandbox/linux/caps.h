// Capabilities of processes a cell runs: all of them gone before execve.
//
// A child forked by cell init starts as root of the cell's user namespace with a full
// capability set (in that namespace only). The exec path (sandbox/init/exec.cc) calls
//   1. DropBoundingAndAmbientCaps() while still privileged (dropping from the bounding set
//      needs CAP_SETPCAP), which also locks the securebits so that uid 0 never regains
//      capabilities (SECBIT_NOROOT) and capabilities are not kept across setuid;
//   2. setresgid/setgroups/setresuid to the sandbox user;
//   3. ClearAllCaps(): permitted, effective and inheritable emptied and read back.
// After that, execve cannot give the program any capability: the bounding set is empty,
// the ambient set is empty and no_new_privs blocks file capabilities and setuid bits.
//
// Threading: act on the calling thread only; meant for a single-threaded forked child.
// They use libcap, which may allocate: fine in a fork of single-threaded cell init.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace mcpcell::sandbox {

// Empties the bounding and ambient sets and locks the securebits: NOROOT and
// NO_CAP_AMBIENT_RAISE on, KEEP_CAPS and NO_SETUID_FIXUP off (so the uid change clears
// permitted and effective). Needs CAP_SETPCAP; does not touch permitted/effective, which the
// uid change still needs (CAP_SETUID, CAP_SETGID).
Status DropBoundingAndAmbientCaps();

// Empties the permitted, effective and inheritable sets and verifies the result, together
// with an empty bounding and ambient set. Call after the uid change.
Status ClearAllCaps();

// Cell init's split of the same work (sandbox/init): init calls DropBoundingAndAmbientCaps()
// and VerifyBoundingAndAmbientEmpty() once at setup, and every child it forks inherits the
// empty bounding set and the locked securebits; the child then only needs
// ClearPermittedCaps() after its uid change: the bounding set can never be refilled, and
// the ambient set is a subset of permitted, so emptying permitted empties it too.
Status VerifyBoundingAndAmbientEmpty();
// Empties permitted, effective and inheritable and reads them back (one capget).
Status ClearPermittedCaps();

// The capability sets of a process as /proc/<pid>/status shows them (pid 0 = self).
struct CapSets {
  uint64_t inheritable = 0, permitted = 0, effective = 0, bounding = 0, ambient = 0;
};
Result<CapSets> ReadCapSets(int pid = 0);

}  // namespace mcpcell::sandbox
