#!/usr/bin/env bash
# Configures and builds mcpcell into build/ (or $1). Extra args go to cmake configure.
# MCPCELL_BUILD_TARGET="name..." builds only those targets (e.g. unit_tests).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}; shift || true
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$dir" "${gen[@]}" "$@" >/dev/null
else
  cmake -S . -B "$dir" "$@" >/dev/null
fi
target=()
# shellcheck disable=SC2206 # a space-separated list of target names
[[ -n ${MCPCELL_BUILD_TARGET:-} ]] && target=(--target $MCPCELL_BUILD_TARGET)
cmake --build "$dir" -j"$(nproc)" "${target[@]}"
