#!/usr/bin/env bash
# Cells work under the systemd unit's restrictions, as far as they can be made without
# systemd as pid 1 (unit_sandbox.sh): one stdio MCP call (a file written and read back in
# /workspace) through `mcpcell serve` runs once as is and once under the unit's bounding
# set, no_new_privs and read-only system, and the restricted server may warn of nothing
# the unrestricted one did not (a capability the unit drops shows up as "limits not
# enforced", "device nodes shared", or a failed call).
# Usage: unit_sandbox_test.sh SOURCE_DIR MCPCELL_BINARY   (as root)
set -euo pipefail
src=$1 binary=$2
here=$(dirname "$(realpath "$0")")
[[ $(id -u) -eq 0 ]] || { echo "unit_sandbox_test: needs root (a root server, as the unit runs it)" >&2; exit 1; }
# Not under /tmp: the unit's PrivateTmp puts a tmpfs there.
dir=$(mktemp -d /var/tmp/mcpcell-unit.XXXXXX)
trap 'rm -rf --one-file-system "$dir"' EXIT
chmod 711 "$dir"

call() {  # call NAME [WRAPPER...]: one stdio call; the server's warnings to $dir/NAME.warnings
  local name=$1
  shift
  python3 "$here/stdio_call.py" "written in $name" "echo 'written in $name' > /workspace/f; cat /workspace/f" -- \
    "$@" "$binary" serve --state-dir="$dir/$name" 2>"$dir/$name.log" ||
    { cat "$dir/$name.log" >&2; echo "unit_sandbox_test: the call failed ($name)" >&2; exit 1; }
  # The warnings without their time stamps and state dirs, so the two runs compare.
  grep -i 'warning' "$dir/$name.log" | sed -E 's/^[0-9T:.-]+Z //; s#'"$dir"'/[a-z]+#STATE#g' |
    sort -u >"$dir/$name.warnings" || true
}
call plain
call unit bash "$here/unit_sandbox.sh" "$src/packaging/mcpcell.service" "$dir"
extra=$(comm -13 "$dir/plain.warnings" "$dir/unit.warnings")
if [[ -n $extra ]]; then
  echo "unit_sandbox_test: under the unit's restrictions the server warns of more:" >&2
  echo "$extra" >&2
  exit 1
fi
echo "unit_sandbox_test: cells work under the unit's restrictions, with no new warning"
