#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running server with the default policy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build -DMCPCELL_BUILD_TESTS=OFF -DMCPCELL_BUILD_BENCH=OFF
exec ./build/bin/mcpcell serve "$@"
