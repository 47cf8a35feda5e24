#!/usr/bin/env bash
# `systemd-analyze verify` on the shipped units, in a temporary root laid out as the
# package installs them: the host's own units (the targets ours depend on), ours under
# /lib/systemd/system, an executable at /usr/bin/mcpcell. Fails on any warning, not only
# on errors: systemd ignores an unknown key or a bad value with a warning and runs on.
# Usage: verify_units.sh SOURCE_DIR MCPCELL_BINARY
set -euo pipefail
src=$1 binary=$2
command -v systemd-analyze >/dev/null || { echo "verify_units: systemd-analyze missing (Debian package systemd)" >&2; exit 1; }
root=$(mktemp -d /tmp/mcpcell-units.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/lib/systemd" "$root/etc/systemd/system"
ln -s usr/lib "$root/lib"
ln -s usr/bin "$root/bin"
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
# verify checks that ExecStart names an executable; a hard link costs no copy of it.
ln "$binary" "$root/usr/bin/mcpcell" 2>/dev/null || cp "$binary" "$root/usr/bin/mcpcell"
units=()
for unit in "$src"/packaging/*.service "$src"/packaging/*.socket; do
  [[ -e $unit ]] || continue
  cp "$unit" "$root/lib/systemd/system/"
  units+=("$(basename "$unit")")
done
((${#units[@]})) || { echo "verify_units: no units in $src/packaging" >&2; exit 1; }
out=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) && rc=0 || rc=$?
if [[ $rc -ne 0 || -n $out ]]; then
  echo "verify_units: systemd-analyze verify ${units[*]} (exit status $rc):" >&2
  echo "$out" >&2
  exit 1
fi
echo "verify_units: ${units[*]}: no warnings"
