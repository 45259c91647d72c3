#!/usr/bin/env bash
# npm test: the whole suite on this machine's Node, then the tests of edge threads on
# the Node LTS (scripts/test-on-lts.sh); either failing fails the run. With arguments
# (`npm test -- test/unit/config.test.ts`), vitest runs those on this Node only.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then exec node node_modules/vitest/vitest.mjs run "$@"; fi
node node_modules/vitest/vitest.mjs run
bash scripts/test-on-lts.sh
