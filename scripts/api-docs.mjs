#!/usr/bin/env node
// Writes docs/api.md from the gateway's own OpenAPI document (GET /v2/openapi.json),
// so the reference cannot drift from the code: a test renders it again and compares.
//   npm run docs
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const cell = (s) =>
  String(s ?? '')
    .replaceAll('|', '\\|')
    .replaceAll('\n', ' ');

function typeOf(schema) {
  if (!schema) return '';
  if (schema.enum) return schema.enum.map((v) => `\`${v}\``).join(', ');
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(' or ');
  if (schema.type === 'array') return `array of ${typeOf(schema.items) || 'value'}`;
  if (schema.type === 'object' && schema.properties) return `{${Object.keys(schema.properties).join(', ')}}`;
  if (schema.pattern && schema.type === 'string') return 'string';
  return Array.isArray(schema.type) ? schema.type.join(' or ') : (schema.type ?? 'value');
}

/** Markdown of an OpenAPI 3.1 document as the gateway builds it. */
export function render(doc) {
  const out = [
    '# The /v2 API reference',
    '',
    'Generated from `GET /v2/openapi.json` by `npm run docs`; do not edit by hand.',
    '',
    'Every call carries `Authorization: Bearer <key>` and needs the scope named below ("any valid key": a key of any',
    "scope). `GET /v2/openapi.json`, the OpenAPI 3.1 document this page is made from, needs no key (it draws from the client address's `default` bucket, as a keyless request does).",
    'Bodies are JSON. Errors have the body `{"error": {"type", "message", "param", "retry_after", "wake_id"}}`;',
    'unknown query parameters and body fields are 400 `invalid_request` naming `param`, and a',
    'known path called with another method is 405 with `Allow`. A live-class key may act in',
    'another environment with `environment` (a query parameter, or a field of a create body).',
    'Every answer says `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`: no browser or',
    'proxy cache keeps what a key read (the console signed out leaves nothing readable without one).',
    '',
  ];
  /** The scope an operation needs: a named one, any valid key (security without a scope), or none. */
  const scopeOf = (op) =>
    op['x-required-scope'] ? `\`${op['x-required-scope']}\`` : op.security?.length ? 'any valid key' : 'none (public)';
  const ops = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) ops.push({ path, method: method.toUpperCase(), op });
  }
  out.push('| method and path | scope | what it does |', '| --- | --- | --- |');
  for (const { path, method, op } of ops) out.push(`| \`${method} ${path}\` | ${scopeOf(op)} | ${cell(op.summary)} |`);
  out.push('');
  for (const { path, method, op } of ops) {
    out.push(`## ${method} ${path}`, '', cell(op.summary), '');
    if (op.description) out.push(op.description, '');
    out.push(`Scope: ${scopeOf(op)}.`, '');
    const params = (op.parameters ?? []).filter((p) => p.in !== 'path');
    if (params.length) {
      out.push('| query parameter | type | required |', '| --- | --- | --- |');
      for (const p of params) out.push(`| \`${p.name}\` | ${cell(typeOf(p.schema))} | ${p.required ? 'yes' : 'no'} |`);
      out.push('');
    }
    const body = op.requestBody?.content?.['application/json']?.schema;
    if (body?.properties) {
      out.push('| body field | type | required |', '| --- | --- | --- |');
      for (const [name, s] of Object.entries(body.properties)) {
        out.push(`| \`${name}\` | ${cell(typeOf(s))} | ${body.required?.includes(name) ? 'yes' : 'no'} |`);
      }
      out.push('');
    }
    const codes = Object.entries(op.responses).map(
      ([c, r]) => `${c}${r.description ? ` (${cell(r.description)})` : ''}`,
    );
    out.push(`Responses: ${codes.join('; ')}.`, '');
  }
  return `${out.join('\n').trimEnd()}\n`;
}

/** The document of a real gateway, started on loopback with a throwaway store. */
export async function fetchOpenApi() {
  const { Gateway } = await import('../dist/app.js');
  const { loadConfig } = await import('../dist/config/index.js');
  const { silentLogger } = await import('../dist/log.js');
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-docs-'));
  const cfg = loadConfig({
    values: { server: { port: 0, host: '127.0.0.1', ops_port: 0, ops_host: '127.0.0.1' }, log: { level: 'silent' } },
    env: { DATA_DIR: dir },
  });
  const gw = new Gateway(cfg, { log: silentLogger });
  const { port } = await gw.start();
  try {
    return await (await fetch(`http://127.0.0.1:${port}/v2/openapi.json`)).json();
  } finally {
    await gw.stop(1000);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The markdown as the project's formatter (Biome) lays it out, which lint checks. */
export function formatted(md) {
  const r = spawnSync(
    join(import.meta.dirname, '..', 'node_modules', '.bin', 'biome'),
    ['format', '--stdin-file-path=docs/api.md'],
    {
      input: md,
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`biome format failed: ${r.stderr}`);
  return r.stdout;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const md = formatted(render(await fetchOpenApi()));
  writeFileSync(join(import.meta.dirname, '..', 'docs', 'api.md'), md);
  console.log(`docs/api.md: ${md.split('\n').length} lines`);
}
