#!/usr/bin/env node
// Fails when the TypeScript modules under a folder (default: src) import one another
// in a circle, and prints each circle as a chain of files. Both value imports and
// `import type` count: a type-only circle costs nothing at run time, but it still
// ties two modules together (neither can be read, moved or tested without the
// other), which is what the one-way layering is for. Dynamic `import()` is left
// out: it is how a module loads another lazily, at run time, on purpose.
// Usage: node scripts/check-cycles.mjs [folder]
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? 'src');

function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Comments out, strings kept: a `from '…'` quoted in a comment is not an import. */
const stripComments = (src) => src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** Static imports and re-exports: `import … from 'x'`, `import 'x'`, `export … from 'x'`. */
const IMPORT = /(?:^|[;}\n])\s*(?:import|export)\s+(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]/g;

function resolveImport(from, spec) {
  if (!spec.startsWith('.')) return null;
  const base = resolve(dirname(from), spec);
  const stem = base.replace(/\.(js|mjs|cjs|ts)$/, '');
  for (const c of [`${stem}.ts`, join(base, 'index.ts'), join(stem, 'index.ts')]) if (existsSync(c)) return c;
  return null;
}

const files = walk(root);
const edges = new Map(files.map((f) => [f, new Set()]));
for (const f of files) {
  const src = stripComments(readFileSync(f, 'utf8'));
  for (const m of src.matchAll(IMPORT)) {
    const to = resolveImport(f, m[1]);
    if (to && edges.has(to)) edges.get(f).add(to);
  }
}

// Tarjan's strongly connected components: every circle lies inside one.
let index = 0;
const idx = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const components = [];
function strong(v) {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  onStack.add(v);
  for (const w of edges.get(v)) {
    if (!idx.has(w)) {
      strong(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const c = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      c.push(w);
    } while (w !== v);
    if (c.length > 1 || edges.get(v).has(v)) components.push(new Set(c));
  }
}
for (const f of files) if (!idx.has(f)) strong(f);

/** The shortest path from `a` to `b` inside one component (breadth first). */
function path(a, b, within) {
  const prev = new Map([[a, null]]);
  const queue = [a];
  while (queue.length > 0) {
    const v = queue.shift();
    if (v === b) break;
    for (const w of edges.get(v)) {
      if (within.has(w) && !prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  const out = [];
  for (let v = b; v !== null; v = prev.get(v)) out.unshift(v);
  return out;
}

// Each edge of a component closes its shortest circle; the same circle is printed once.
const cycles = new Map();
for (const c of components) {
  for (const u of c) {
    for (const v of edges.get(u)) {
      if (!c.has(v)) continue;
      const loop = u === v ? [u] : path(v, u, c);
      const start = loop.indexOf([...loop].sort()[0]);
      const canon = [...loop.slice(start), ...loop.slice(0, start)];
      const key = canon.join('\n');
      if (!cycles.has(key)) cycles.set(key, canon);
    }
  }
}

if (cycles.size === 0) {
  console.log(`no import cycles among ${files.length} modules under ${root}`);
  process.exit(0);
}
// Named from the folder's parent: src/store/client.ts.
const name = (f) => relative(dirname(root), f);
console.error(`${cycles.size} import cycle(s):`);
for (const loop of cycles.values()) console.error(`  ${[...loop, loop[0]].map(name).join(' -> ')}`);
process.exit(1);
