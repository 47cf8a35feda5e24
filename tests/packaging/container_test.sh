#!/usr/bin/env bash
# The container image of packaging/Containerfile, built and run with Debian's podman: the
# base is a Debian 12 minbase made by mmdebstrap and imported (no registry needed), the
# image installs the .deb CPack builds from BUILD_DIR, and it runs with the options the
# Containerfile states (narrow capabilities, no --privileged, read-only root, the state
# dir on a volume): `mcpcell doctor` must say cells are possible, and one stdio MCP call
# (initialize + run_command) must run in a cell, python3 included. podman's storage and
# run dirs are in the test's temporary dir, and the whole test runs in a private mount
# namespace, so neither the host's podman nor its mount table is touched.
# The base's tarball is kept in BUILD_DIR/packaging-cache ($MCPCELL_PACKAGING_CACHE if set),
# named by a hash of its recipe
# (suite, variant, mirror) and reused for up to a week: the image's own apt-get update
# brings what is newer. Only Debian's mirror is downloaded from.
# In the default packaging run (tests/packaging/CMakeLists.txt); a host where podman
# cannot run fails with podman's reason.
# Usage: container_test.sh BUILD_DIR   (as root, with network to deb.debian.org)
# shellcheck disable=SC2016,SC2054 # literal $1 and ${Field} for mmdebstrap, dpkg-query and the cell; commas in --cap-add
set -euo pipefail
if [[ ${1:-} != --inside ]]; then
  exec unshare --mount --propagation private -- bash "$0" --inside "$@"
fi
shift
build=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
src=$(realpath "$here/../..")
for tool in podman mmdebstrap cpack unshare python3; do
  command -v "$tool" >/dev/null || { echo "container_test: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "container_test: needs root (rootful podman)" >&2; exit 1; }
fail() { echo "container_test: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/mcpcell-image.XXXXXX)
chmod 755 "$tmp"
podman=(podman --root "$tmp/storage" --runroot "$tmp/run" --tmpdir "$tmp/libpod"
        --events-backend none --cgroup-manager cgroupfs)
cleanup() {
  "${podman[@]}" system reset -f >/dev/null 2>&1 || true
  # podman's storage mounts live in this private namespace only; undo them before the rm.
  awk -v dir="$tmp/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r |
    xargs -r umount -l
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
"${podman[@]}" info >"$tmp/info.log" 2>&1 ||
  { cat "$tmp/info.log" >&2; fail "podman cannot run on this host (podman info failed: above)"; }

echo "== cpack in $build" >&2
mkdir -p "$tmp/context"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; exit 1; }
cp "$tmp"/pkg/mcpcell_*_amd64.deb "$tmp/context/"

mirror=http://deb.debian.org/debian
recipe="bookworm minbase $mirror"
cache=${MCPCELL_PACKAGING_CACHE:-$build/packaging-cache}
base_tar=$cache/debian-base-$(printf %s "$recipe" | sha256sum | cut -c1-16).tar
mkdir -p "$cache"
if [[ -s $base_tar && -z $(find "$base_tar" -mtime +7) ]]; then
  echo "== base image: $base_tar (cached: $recipe) | podman import" >&2
else
  echo "== base image: mmdebstrap $recipe | podman import" >&2
  find "$cache" -name 'debian-base-*.tar' -delete  # other recipes, or older than a week
  mmdebstrap --mode=root --variant=minbase --quiet bookworm "$tmp/base.tar" "$mirror" \
    2>"$tmp/mmdebstrap.log" || { tail -20 "$tmp/mmdebstrap.log" >&2; exit 1; }
  mv "$tmp/base.tar" "$base_tar.$$" && mv "$base_tar.$$" "$base_tar"  # whole or not at all
fi
"${podman[@]}" import "$base_tar" localhost/mcpcell-test-base:bookworm >"$tmp/import.log" 2>&1 ||
  { cat "$tmp/import.log" >&2; fail "podman import failed"; }

echo "== podman build -f packaging/Containerfile" >&2
# chroot isolation for the RUN steps: they need no namespaces of their own, and crun
# refuses some hosts' cgroup layouts (below).
"${podman[@]}" build --isolation=chroot --network=host \
  --build-arg BASE=localhost/mcpcell-test-base:bookworm -f "$src/packaging/Containerfile" \
  -t localhost/mcpcell:test "$tmp/context" >"$tmp/build.log" 2>&1 ||
  { tail -30 "$tmp/build.log" >&2; fail "podman build failed"; }

# The options the Containerfile states. Rlimits under the caller's own: crun cannot
# raise them.
mkdir -m 0711 "$tmp/state"
run_opts=(--rm --network=none --read-only --tmpfs /tmp -v "$tmp/state:/var/lib/mcpcell"
  --cap-drop=all --cap-add=SYS_ADMIN,SETUID,SETGID,SETFCAP,MKNOD,DAC_OVERRIDE,CHOWN,FOWNER,KILL
  --security-opt seccomp=unconfined --security-opt unmask=ALL
  --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
# crun refuses a hybrid cgroup layout whose v2 hierarchy has controllers; this mount
# namespace's podman does not see that hierarchy (the cells then use cgroup v1).
if [[ $(stat -fc %T /sys/fs/cgroup) == tmpfs ]] && mountpoint -q /sys/fs/cgroup/unified &&
  [[ -n $(cat /sys/fs/cgroup/unified/cgroup.controllers) ]]; then
  umount /sys/fs/cgroup/unified
fi

echo "== mcpcell doctor in the container" >&2
"${podman[@]}" run "${run_opts[@]}" localhost/mcpcell:test doctor \
  >"$tmp/doctor.txt" 2>&1 || { cat "$tmp/doctor.txt" >&2; fail "doctor: cells are not possible"; }
cat "$tmp/doctor.txt" >&2
grep -q "^cells: possible" "$tmp/doctor.txt" || fail "doctor did not say cells are possible"

echo "== one stdio MCP call into the container" >&2
python3 "$here/stdio_call.py" "42 from the image" 'echo "$(python3 -c "print(6*7)") from the image"' -- \
  "${podman[@]}" run -i "${run_opts[@]}" localhost/mcpcell:test 2>"$tmp/serve.log" ||
  { cat "$tmp/serve.log" >&2; fail "the stdio call failed"; }
echo "container_test: the image builds, and serves a cell with narrow capabilities, not --privileged"
