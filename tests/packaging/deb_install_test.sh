#!/usr/bin/env bash
# The Debian package as a host gets it: build it from BUILD_DIR with CPack, make a fresh
# Debian 12 root with mmdebstrap (variant apt: only the Essential set, apt and `mount`),
# `apt-get install ./mcpcell_*.deb` in it, so apt resolves the package's Depends from
# Debian's mirror, and from inside that root: every library of the programs is there,
# the conffiles, the unit and the state dir's mode are as shipped, `mcpcell doctor` says
# cells can be made, and one stdio MCP call (initialize + run_command) runs in a cell,
# with the unit's own state dir and the policy shipped in /etc. Everything lives in one
# temporary directory; mounts happen only in private mount namespaces (in_root.sh).
# Usage: deb_install_test.sh BUILD_DIR   (as root, with network to deb.debian.org)
# shellcheck disable=SC2016,SC2054 # literal $1 and ${Field} for mmdebstrap, dpkg-query and the cell; commas in --cap-add
set -euo pipefail
build=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
for tool in mmdebstrap cpack unshare pivot_root python3; do
  command -v "$tool" >/dev/null || { echo "deb_install_test: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "deb_install_test: needs root (mounts, pivot_root, a root server's cells)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/mcpcell-deb.XXXXXX)
trap 'rm -rf --one-file-system "$tmp"' EXIT
chmod 755 "$tmp"

echo "== cpack (the package target) in $build" >&2
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; exit 1; }
deb=$(ls "$tmp"/pkg/mcpcell_*_amd64.deb)
echo "built $(basename "$deb")" >&2

echo "== mmdebstrap bookworm + apt-get install ./$(basename "$deb")" >&2
cp "$deb" "$tmp/mcpcell.deb"
unshare --mount --propagation private -- \
  mmdebstrap --mode=root --variant=apt --include=mount --quiet \
  --customize-hook='copy-in '"$tmp"'/mcpcell.deb /tmp' \
  --customize-hook='chroot "$1" apt-get install -y --no-install-recommends -q /tmp/mcpcell.deb' \
  --customize-hook='rm -f "$1"/tmp/mcpcell.deb' \
  bookworm "$tmp/root" http://deb.debian.org/debian >"$tmp/mmdebstrap.log" 2>&1 ||
  { tail -40 "$tmp/mmdebstrap.log" >&2; exit 1; }
root=$tmp/root
in_root() { bash "$here/in_root.sh" "$root" "$@"; }

fail() { echo "deb_install_test: $*" >&2; exit 1; }
echo "== what the package installed" >&2
in_root dpkg-query -W -f='${Status} ${Version}\n' mcpcell | grep -q "install ok installed" ||
  fail "dpkg does not list mcpcell as installed"
for bin in /usr/bin/mcpcell /usr/bin/mcpcell-init; do
  missing=$(in_root ldd "$bin" 2>&1 | grep "not found" || true)
  [[ -z $missing ]] || fail "$bin lacks libraries (the package's Depends miss them): $missing"
done
conffiles=$(in_root dpkg-query -W -f='${Conffiles}\n' mcpcell)
for f in /etc/default/mcpcell /etc/mcpcell/policies/default.toml; do
  grep -q "$f" <<<"$conffiles" || fail "$f is not a conffile (got: $conffiles)"
done
[[ -f $root/lib/systemd/system/mcpcell.service ]] || fail "no /lib/systemd/system/mcpcell.service"
[[ -f $root/usr/share/doc/mcpcell/operations.md ]] || fail "no /usr/share/doc/mcpcell/operations.md"
grep -q '^ExecStart=/usr/bin/mcpcell serve --state-dir=/var/lib/mcpcell ' \
  "$root/lib/systemd/system/mcpcell.service" || fail "the unit's ExecStart is not the tested one"

echo "== mcpcell doctor (inside the root)" >&2
in_root /usr/bin/mcpcell doctor --state-dir /var/lib/mcpcell >"$tmp/doctor.txt" 2>&1 ||
  { cat "$tmp/doctor.txt" >&2; fail "mcpcell doctor says cells cannot be made"; }
cat "$tmp/doctor.txt" >&2

echo "== one stdio MCP call (inside the root), as the unit runs the server" >&2
# The state dir as systemd makes it for StateDirectory=mcpcell, StateDirectoryMode=0711.
mkdir -m 0711 "$root/var/lib/mcpcell"
python3 "$here/stdio_call.py" "hello from the package" \
  'echo "hello from the package"; id -un; cat /etc/os-release | grep ^VERSION_CODENAME' -- \
  bash "$here/in_root.sh" "$root" /usr/bin/mcpcell serve --state-dir=/var/lib/mcpcell \
  --policy=/etc/mcpcell/policies/default.toml 2>"$tmp/serve.log" ||
  { cat "$tmp/serve.log" >&2; fail "the stdio call failed"; }
echo "deb_install_test: $(basename "$deb") installs into a fresh Debian 12 root and serves"
