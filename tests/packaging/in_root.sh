#!/usr/bin/env bash
# Runs COMMAND... as root inside the root filesystem ROOT, the way a host that installed
# the package runs it: ROOT becomes "/" by pivot_root in a private mount namespace, with
# its own /proc, the host's /sys (cgroups for the cells) and /dev, and tmpfs /run and
# /tmp. pivot_root, not chroot: the kernel refuses a chrooted process a new user
# namespace, and every cell is one. Nothing is mounted in the host's mount namespace.
# Usage: in_root.sh ROOT COMMAND...   (stdin and stdout pass through)
set -euo pipefail
if [[ ${1:-} != --inside ]]; then
  exec unshare --mount --propagation private -- "$0" --inside "$@"
fi
shift
root=$1
shift
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
# From here on the root's own programs (umount is in its package `mount`).
umount -l /.oldroot
rmdir /.oldroot
cd /
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
