#!/usr/bin/env node
// Builds the console (console/src, Preact) into dist/console-app: one script, one
// stylesheet and index.html, all served by the gateway itself (no CDN, no network).
// Runs as part of `npm run build` (and so of `npm install`).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = join(import.meta.dirname, '..');
const out = join(root, 'dist', 'console-app');
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(root, 'console', 'src', 'main.tsx'), style: join(root, 'console', 'src', 'style.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: out,
  logLevel: 'warning',
  legalComments: 'none',
});
writeFileSync(
  join(out, 'index.html'),
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wakegate console</title>
<link rel="stylesheet" href="style.css">
<script type="module" src="app.js"></script>
</head>
<body><div id="app"></div><noscript>The wakegate console needs JavaScript.</noscript></body>
</html>
`,
);
const size = (f) => {
  const b = readFileSync(join(out, f));
  return `${f} ${(b.length / 1024).toFixed(1)} KB (${(gzipSync(b).length / 1024).toFixed(1)} KB gzipped)`;
};
if (process.env.CONSOLE_BUILD_QUIET !== '1') console.log(`console: ${size('app.js')}, ${size('style.css')}`);
