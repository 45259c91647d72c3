#!/usr/bin/env node
// npm run bench: every benchmark, one after the other (never side by side: the
// machine is small). Each prints its own table.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './lib.mjs';

const only = process.argv.slice(2);
const all = ['proxy', 'detail', 'capture', 'webhooks', 'list', 'memory', 'ratelimit', 'outage', 'soak'];
let failed = 0;
for (const name of only.length ? only : all) {
  console.log(`\n## bench:${name}\n`);
  const r = spawnSync(process.execPath, [join(ROOT, 'bench', `${name}.mjs`)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.log(`bench:${name} failed with exit code ${r.status}`);
  }
}
process.exit(failed ? 1 : 0);
