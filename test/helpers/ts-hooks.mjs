// Module hooks that run the TypeScript sources as they are, never a build that may
// be stale: an import spelled `.js` from a `.ts` file (NodeNext's spelling) is its
// `.ts` sibling when there is one, and a `.ts` file is stripped of its types by
// esbuild, the transform vitest applies to the sources the tests import themselves.
// Synchronous, so the same hooks serve module.registerHooks (Node 22.15 and later,
// in the thread) and module.register (Node 20, in the loader thread).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Transformed sources are kept by content hash: most tests start several gateways,
// and a start that transforms every source costs about a second more than one that
// reads them from here.
const CACHE = join(tmpdir(), 'wakegate-ts-cache');
mkdirSync(CACHE, { recursive: true });
const require = createRequire(import.meta.url);
// Another esbuild may strip differently: its version is part of the key.
const ESBUILD = require('esbuild/package.json').version;

export function resolve(specifier, context, next) {
  const fromSources = context.parentURL === undefined || context.parentURL.endsWith('.ts');
  if (fromSources && specifier.endsWith('.js') && (specifier.startsWith('.') || specifier.startsWith('file:'))) {
    const url = new URL(specifier.replace(/\.js$/, '.ts'), context.parentURL);
    if (existsSync(fileURLToPath(url))) return { url: url.href, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export function load(url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context);
  const path = fileURLToPath(url);
  const text = readFileSync(path, 'utf8');
  const cached = join(CACHE, `${createHash('sha1').update(ESBUILD).update(path).update(text).digest('hex')}.js`);
  if (existsSync(cached)) return { format: 'module', source: readFileSync(cached, 'utf8'), shortCircuit: true };
  const { code } = require('esbuild').transformSync(text, {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcefile: path,
    tsconfigRaw: { compilerOptions: { useDefineForClassFields: true } },
  });
  // Written whole, then renamed: a process reading it meanwhile never sees half a file.
  const part = `${cached}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  writeFileSync(part, code);
  renameSync(part, cached);
  return { format: 'module', source: code, shortCircuit: true };
}
