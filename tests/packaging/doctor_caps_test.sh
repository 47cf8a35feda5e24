#!/usr/bin/env bash
# `mcpcell doctor` as a container that dropped CAP_SETFCAP runs it (podman's and docker's
# default sets lack it): capsh removes SETFCAP from the bounding set before exec, so the
# doctor process holds every capability of root but that one. Its overlay probe maps uid 0
# into a user namespace, which Linux >= 5.12 refuses without CAP_SETFCAP: doctor must say
# the probe failed at writing the uid map, name the capability and how to add it (podman,
# Kubernetes), and exit 1. With SETFCAP (the same command without the drop) that probe is
# ok. The device-node probe writes only in the test's temporary state dir.
# Usage: doctor_caps_test.sh MCPCELL_BINARY   (as root)
# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
set -euo pipefail
binary=$1
command -v capsh >/dev/null || { echo "doctor_caps_test: capsh missing (package libcap2-bin)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "doctor_caps_test: needs root (root maps uid 0)" >&2; exit 1; }
fail() { echo "doctor_caps_test: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mcpcell-doctorcaps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

rc=0
capsh --drop=cap_setfcap -- -c 'exec "$0" doctor --state-dir "$1"' "$binary" "$tmp" \
  >"$tmp/without.txt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "doctor without CAP_SETFCAP exited $rc, not 1: $(cat "$tmp/without.txt")"
for part in "[missing] overlayfs in a user namespace: write uid_map: EPERM" "lacks CAP_SETFCAP" \
  "Linux >= 5.12" "--cap-add SETFCAP" 'securityContext.capabilities.add: ["SETFCAP"]'; do
  grep -qF -- "$part" "$tmp/without.txt" || fail "doctor without CAP_SETFCAP does not say '$part': $(cat "$tmp/without.txt")"
done

"$binary" doctor --state-dir "$tmp" >"$tmp/with.txt" 2>&1 || true
grep -qF "[ok] overlayfs in a user namespace" "$tmp/with.txt" ||
  fail "with CAP_SETFCAP the overlay probe is not ok: $(cat "$tmp/with.txt")"
grep -qF "SETFCAP" "$tmp/with.txt" && fail "with CAP_SETFCAP doctor still blames it: $(cat "$tmp/with.txt")"
echo "doctor_caps_test: without CAP_SETFCAP doctor names it and the fix; with it the probe is ok" >&2
