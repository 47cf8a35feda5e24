#!/usr/bin/env bash
# Runs one libFuzzer target on its committed corpus for a bounded time (ctest's fuzz.*).
#   run_fuzzer.sh <fuzzer> <corpus dir> <seconds> [extra libFuzzer flags...]
# The committed corpus is only read: libFuzzer writes new inputs to its first corpus
# directory, which is a temporary one. A crash, leak, timeout or OOM fails the run; the
# input that caused it is kept in that temporary directory, which the log names.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpcell-fuzz.XXXXXX")
mkdir "$work/new"
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/new" "$corpus" >"$work/log" 2>&1 || status=$?
if ((status != 0)); then
  # The report without libFuzzer's progress lines (one per new input).
  grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD) |^[[:space:]]+NEW_FUNC' "$work/log" || true
  echo "run_fuzzer: $(basename "$fuzzer") failed (exit $status); the input is kept in $work:"
  ls -l "$work"
  echo "reproduce: $fuzzer $work/<crash-...>; keep it as a regression in $corpus/"
  exit 1
fi
grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::)' "$work/log" || true
rm -rf "$work"
