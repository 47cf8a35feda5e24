#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running server with the default policy:
# Streamable HTTP on 127.0.0.1:8765 (it prints the URL and how to connect Claude Code,
# VS Code and the MCP Inspector). Arguments replace the default transport, e.g.
# `scripts/serve.sh --stdio` for Claude Desktop, or `--http 127.0.0.1:9000 --policy dev`.
# Run again while a server listens on the address, it exits at once saying so ("cannot
# listen on 127.0.0.1:8765: address already in use (another server, perhaps another
# mcpcell, is listening there)").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build -DMCPCELL_BUILD_TESTS=OFF -DMCPCELL_BUILD_BENCH=OFF
if [[ $# -eq 0 ]]; then set -- --http 127.0.0.1:8765; fi
exec ./build/bin/mcpcell serve "$@"
