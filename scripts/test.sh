#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
#   1. install what is missing, 2. unit tests under ASan+UBSan, 3. a -Werror build and
#   every suite (unit, integration, e2e with the official MCP TypeScript SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ -f tests/e2e/package-lock.json ]]; then
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "== unit tests under ASan+UBSan" >&2
scripts/build.sh build-asan -DMCPCELL_SANITIZE=ON -DMCPCELL_WERROR=ON -DMCPCELL_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=Debug
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit --output-on-failure -j2

echo "== full suite" >&2
scripts/build.sh build -DMCPCELL_WERROR=ON
ctest --test-dir build --output-on-failure
