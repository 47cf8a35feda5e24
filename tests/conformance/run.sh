#!/bin/sh
# ctest entry of the conformance suites: needs `npm ci` in tests/conformance (Node 22 comes
# from the pinned `node` devDependency). Usage: run.sh [--next] <bin dir>
#   (default) run.mjs: the released suite (0.1.16), every active scenario;
#   --next    run_next.mjs: the pre-release suite, `--requirements 2026-07-28`.
here=$(cd "$(dirname "$0")" && pwd)
script=run.mjs
suite=@modelcontextprotocol/conformance
if [ "$1" = "--next" ]; then
  script=run_next.mjs
  suite=conformance-next
  shift
fi
if [ ! -x "$here/node_modules/.bin/node" ] || [ ! -d "$here/node_modules/$suite" ]; then
  echo "tests/conformance/node_modules is missing: run \`npm ci\` in $here (Node 22 and the pinned suites), then run the tests again" >&2
  exit 1
fi
exec "$here/node_modules/.bin/node" "$here/$script" "$@"
