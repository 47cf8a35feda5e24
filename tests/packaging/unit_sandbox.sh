#!/usr/bin/env bash
# Runs COMMAND... under the restrictions of packaging/mcpcell.service that can be made
# without systemd as pid 1, read from the unit itself: its CapabilityBoundingSet, and
# NoNewPrivileges, ProtectSystem=strict, ProtectHome and PrivateTmp when the unit sets
# them (every mount but /proc, /sys, /dev and STATE_DIR read-only; tmpfs over /home, /root
# and /tmp). In a private mount namespace: nothing of the host changes.
# Usage: unit_sandbox.sh UNIT STATE_DIR COMMAND...   (as root; STATE_DIR outside /tmp)
set -euo pipefail
if [[ ${1:-} != --inside ]]; then
  exec unshare --mount --propagation private -- bash "$0" --inside "$@"
fi
shift
unit=$1 state=$2
shift 2
setting() { sed -n "s/^$1=//p" "$unit" | tail -1; }

caps=$(setting CapabilityBoundingSet)
[[ -n $caps ]] || { echo "unit_sandbox: $unit sets no CapabilityBoundingSet" >&2; exit 1; }
bounding=-all
for cap in $caps; do
  bounding+=",+$(tr '[:upper:]' '[:lower:]' <<<"${cap#CAP_}")"
done

if [[ $(setting ProtectSystem) == strict ]]; then
  mount --bind "$state" "$state"
  awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r m; do
    case $m in /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | "$state") continue ;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || true  # some special mounts refuse; see below
  done
  mount -o remount,bind,rw "$state"
  touch /etc/.unit-sandbox-probe 2>/dev/null &&
    { echo "unit_sandbox: / is still writable after the read-only remounts" >&2; exit 1; }
fi
if [[ $(setting ProtectHome) == yes ]]; then
  for d in /home /root /run/user; do [[ -d $d ]] && mount -t tmpfs -o mode=0755 tmpfs "$d"; done
fi
[[ $(setting PrivateTmp) == yes ]] && mount -t tmpfs -o mode=1777 tmpfs /tmp
nnp=()
[[ $(setting NoNewPrivileges) == yes ]] && nnp=(--no-new-privs)
exec setpriv "${nnp[@]}" --bounding-set "$bounding" --inh-caps=-all -- "$@"
