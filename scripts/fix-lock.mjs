#!/usr/bin/env node
// The npm registry mirror this project is built against serves only this
// platform's binaries of packages such as @biomejs/cli-*, @chdb/lib-* and
// @rollup/rollup-*, so `npm install` cannot record the other platforms' optional
// packages in package-lock.json, and `npm ci` then refuses the lock as "out of
// sync". This adds each missing optional platform package to the lock with the
// os/cpu/libc its name states, so `npm ci` skips it here and installs it where it
// fits. Run after `npm install` changes the lock: `node scripts/fix-lock.mjs`.
import { readFileSync, writeFileSync } from 'node:fs';

const OS = ['android', 'darwin', 'linux', 'win32', 'freebsd', 'openbsd', 'openharmony', 'sunos', 'aix', 'netbsd'];
const CPU = ['arm64', 'x64', 'arm', 'ia32', 'loong64', 'ppc64', 'riscv64', 's390x', 'mips64el'];

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.find((p) => CPU.includes(p));
  if (!os || !cpu) return null;
  const out = { os: [os], cpu: [cpu] };
  if (parts.some((p) => p.startsWith('musl'))) out.libc = ['musl'];
  else if (os === 'linux' && parts.some((p) => p.startsWith('gnu'))) out.libc = ['glibc'];
  return out;
}

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
let added = 0;
for (const [loc, pkg] of Object.entries(lock.packages)) {
  for (const [dep, spec] of Object.entries(pkg.optionalDependencies ?? {})) {
    const at = `node_modules/${dep}`;
    if (lock.packages[at]) continue;
    const plat = platformOf(dep);
    if (!plat) continue;
    lock.packages[at] = {
      version: spec.replace(/^[\^~=]/, ''),
      ...plat,
      ...(pkg.dev || loc === '' ? {} : {}),
      optional: true,
    };
    if (pkg.dev) lock.packages[at].dev = true;
    added++;
  }
}
const sorted = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)),
);
lock.packages = sorted;
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`fix-lock: added ${added} optional platform packages`);
