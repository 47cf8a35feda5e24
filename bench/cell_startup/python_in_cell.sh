#!/bin/bash
# python_in_cell.sh: does python itself run slower in a cell than on the host?
#
# Times a loop of `python3 -c 'print(1)'` inside one cell (`mcpcell run -- bash -c LOOP`,
# so the pythons run with the cell's mounts, cgroups, seccomp filter and environment) and
# the same loop on the host with the same environment, interleaved round by round, and
# optionally in a cell of another build (--baseline). Prints the medians over the rounds of
# the wall and CPU (user + system, bash's `time`) per python. The cell's creation is not
# in the figures: only the loop is timed, after two untimed warm-up runs.
#
# Usage: python_in_cell.sh [--mcpcell PATH] [--baseline PATH] [--rounds N] [--loop N]
set -euo pipefail

mcpcell=$(command -v mcpcell || true)
baseline=""
rounds=10
loop=40
while [ $# -gt 0 ]; do
  case "$1" in
    --mcpcell) mcpcell="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --loop) loop="$2"; shift 2 ;;
    *) echo "usage: $0 [--mcpcell PATH] [--baseline PATH] [--rounds N] [--loop N]" >&2; exit 2 ;;
  esac
done
if [ -z "$mcpcell" ] || [ ! -x "$mcpcell" ]; then
  echo "$0: no mcpcell binary (give --mcpcell PATH)" >&2
  exit 2
fi
case "$rounds$loop" in *[!0-9]*) echo "$0: --rounds and --loop take numbers" >&2; exit 2 ;; esac

state=$(mktemp -d /tmp/mcpcell-pybench-XXXXXX)
chmod 755 "$state"  # cell init of a root server runs as an unprivileged uid

# The loop prints "wall user sys" in seconds for $loop pythons.
script="python3 -c 'print(1)' >/dev/null; python3 -c 'print(1)' >/dev/null
TIMEFORMAT='%3R %3U %3S'
time (for i in \$(seq $loop); do python3 -c 'print(1)' >/dev/null; done)"
# The cell's environment (sandbox/cell_spec.cc defaults), for the host's loop too.
host_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
          HOME=/tmp LANG=C.UTF-8 TMPDIR=/tmp TERM=xterm)

results=$(mktemp)
trap 'rm -rf "$state" "$results"' EXIT
for ((r = 0; r < rounds; r++)); do
  echo "cell $("$mcpcell" run --state-dir "$state/this" -- /bin/bash -c "$script" 2>&1 | tail -1)" >>"$results"
  echo "host $(cd /tmp && "${host_env[@]}" /bin/bash -c "$script" 2>&1 | tail -1)" >>"$results"
  if [ -n "$baseline" ]; then
    echo "baseline $("$baseline" run --state-dir "$state/baseline" -- /bin/bash -c "$script" 2>&1 | tail -1)" >>"$results"
  fi
done

awk -v loop="$loop" '
  NF != 4 { print "python_in_cell.sh: a loop failed: " $0 > "/dev/stderr"; bad = 1; next }
  { n[$1]++; wall[$1, n[$1]] = $2 * 1000 / loop; cpu[$1, n[$1]] = ($3 + $4) * 1000 / loop }
  function median(a, k, m,    i, j, t, v) {
    for (i = 1; i <= m; i++) v[i] = a[k, i]
    for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  END {
    if (!n["host"]) exit 1
    hw = median(wall, "host", n["host"]); hc = median(cpu, "host", n["host"])
    printf "%-9s %14s %14s %7s  (medians of %d rounds of %d pythons)\n", "", "wall ms/python", "cpu ms/python", "wall/host", n["host"], loop
    split("cell host baseline", order, " ")
    for (i = 1; i <= 3; i++) {
      k = order[i]
      if (!n[k]) continue
      w = median(wall, k, n[k]); c = median(cpu, k, n[k])
      printf "%-9s %14.2f %14.2f %7.2fx  (cpu %.2fx)\n", k, w, c, w / hw, c / hc
    }
    exit bad
  }' "$results"
