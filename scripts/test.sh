#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
#   1. install what is missing (Debian packages; the e2e tests' npm packages from their
#      lock files), 2. unit and integration tests under ASan+UBSan, 3. each libFuzzer
#      target for a short bounded time (clang), 4. a -Werror build and every suite:
#   unit, integration (real cells, as root and again as uid 65534 for desktop mode), e2e
#   (official MCP TypeScript SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
for dir in tests/e2e tests/conformance tests/browser; do
  if [[ -f $dir/package-lock.json ]]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done

# The integration suites run a second time as uid 65534, which must be able to reach the
# test binaries. When this checkout sits where that user cannot go (under /root, say), the
# build trees go to a world-searchable temporary directory instead.
build_root=.
if [[ $(id -u) -eq 0 ]] && ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$PWD"; then
  build_root=$(mktemp -d /tmp/mcpcell-build.XXXXXX)
  chmod 755 "$build_root"
  echo "test.sh: uid 65534 cannot reach $PWD; building in $build_root" >&2
fi

# The unit suite and the integration suite (real cells; as root only: the uid 65534 pass
# runs in the full suite below) under the sanitizers. The static probes that run inside
# cells are not instrumented. -g1: line tables are all the sanitizers' reports use, and the
# full debug info costs about a fifth of the compile time.
echo "== unit and integration tests under ASan+UBSan" >&2
MCPCELL_BUILD_TARGET="unit_tests integration_tests" scripts/build.sh "$build_root/build-asan" \
  -DMCPCELL_SANITIZE=ON -DMCPCELL_WERROR=ON -DMCPCELL_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir "$build_root/build-asan" -L unit --output-on-failure -j2
ctest --test-dir "$build_root/build-asan" -L integration -E '_unprivileged$' --output-on-failure -j2
unset ASAN_OPTIONS UBSAN_OPTIONS

# The libFuzzer targets (tests/fuzz, docs/fuzzing.md): a clang build of only them, each run
# on its committed corpus for MCPCELL_FUZZ_SECONDS (new inputs go to a temporary dir).
# -O0: the instrumented build compiles in about half the time of -O1, which matters more
# for a 20 s run than the fuzzing speed does.
echo "== fuzz targets (clang, libFuzzer+ASan+UBSan)" >&2
CC=clang CXX=clang++ MCPCELL_BUILD_TARGET=fuzz_targets scripts/build.sh "$build_root/build-fuzz" \
  -DMCPCELL_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only
ctest --test-dir "$build_root/build-fuzz" -L fuzz --output-on-failure -j2

echo "== full suite" >&2
# Line tables only here too (as above): the suite needs no more, and it builds faster.
scripts/build.sh "$build_root/build" -DMCPCELL_WERROR=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
ctest --test-dir "$build_root/build" --output-on-failure
