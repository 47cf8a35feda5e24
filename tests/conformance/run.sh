#!/bin/sh
# ctest entry of the conformance suite: needs `npm ci` in tests/conformance (Node 22 comes
# from the pinned `node` devDependency). Usage: run.sh <bin dir>
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$here/node_modules/.bin/node" ] || [ ! -d "$here/node_modules/@modelcontextprotocol/conformance" ]; then
  echo "tests/conformance/node_modules is missing: run \`npm ci\` in $here (Node 22 and the pinned suite), then run the tests again" >&2
  exit 1
fi
exec "$here/node_modules/.bin/node" "$here/run.mjs" "$@"
