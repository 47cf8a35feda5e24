// The dangerous-mount rules: which host paths a policy may never bind into a cell.
//
// Refused, with the reason: "/", /proc, /sys, /dev, /boot, /root, /etc (and anything under
// them), /home and any whole home directory (a subdirectory of one is fine), container
// runtime sockets (docker, containerd, podman, cri-o) and any directory holding one, the
// server's own state directory (inside or around it). The source is checked as written
// and again after resolving symlinks, so a link into one of those is refused too.
// Used by the policy loader and, as defence in depth, by sandbox's ValidateCellSpec.
#pragma once

#include <string>

#include "base/status.h"

namespace mcpcell::policies {

// Ok when `source` (absolute, existing) may be mounted into a cell; `state_dir` may be
// empty when unknown.
Status CheckMountSource(const std::string& source, const std::string& state_dir);

// Ok when `target` is a usable cell path: absolute, no "." or ".." components, not "/",
// /workspace itself, /proc, /sys, /dev or under them.
Status CheckMountTarget(const std::string& target);

}  // namespace mcpcell::policies
