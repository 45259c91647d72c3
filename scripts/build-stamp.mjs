#!/usr/bin/env node
// The build's stamp: a hash of everything `npm run build` reads (the sources, the
// console, the compiler's settings, the build scripts, the locked dependencies),
// written into dist/ as the build's last step. `npm test` builds only when dist/ is
// not the build of the files as they are (CI's `npm ci` has just built them: the
// second build cost about 20 s of CPU for nothing); the tests themselves run the
// sources, dist/ serves the console's files and the package's entry points.
//   node scripts/build-stamp.mjs clear   the build starts: dist/ is no one's build
//   node scripts/build-stamp.mjs write   the build is done: dist/ is these files' build
//   node scripts/build-stamp.mjs fresh   builds (npm run build) unless dist/ is these files' build
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const STAMP = join(root, 'dist', '.build-stamp');
const INPUTS = [
  'src',
  'console',
  'tsconfig.json',
  'tsconfig.build.json',
  'scripts/build-console.mjs',
  'scripts/build-stamp.mjs',
  'package.json',
  'package-lock.json',
];

/** The files under `path` (itself when it is a file), node_modules left out. */
function files(path) {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [full];
  return readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !join(e.parentPath, e.name).includes('/node_modules/'))
    .map((e) => join(e.parentPath, e.name));
}

/** The hash of every input's path and content, in a fixed order. */
function inputsHash() {
  const h = createHash('sha256');
  for (const f of INPUTS.flatMap(files).sort()) {
    h.update(`${relative(root, f)}\n`);
    h.update(readFileSync(f));
    h.update('\n');
  }
  return h.digest('hex');
}

const fresh = () => existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === inputsHash();

const what = process.argv[2];
if (what === 'clear') {
  rmSync(STAMP, { force: true });
} else if (what === 'write') {
  writeFileSync(STAMP, `${inputsHash()}\n`);
} else if (what === 'fresh') {
  if (fresh()) {
    console.error('dist/ is the build of these sources: not built again');
  } else {
    const r = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
    if (r.status !== 0) process.exit(r.status ?? 1);
  }
} else {
  console.error('usage: node scripts/build-stamp.mjs clear|write|fresh');
  process.exit(2);
}
