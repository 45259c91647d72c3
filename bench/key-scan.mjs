#!/usr/bin/env node
// bench:key-scan — what searching a request body for gateway keys costs per request,
// on this thread: the scan before issue #34 item 10 (a look for `svc`, then one regex
// over the body as Latin-1) against today's (every spelling, codings, wide charsets),
// for the bodies a proxy usually carries, and a streamed body through the gate.
import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { KeyGate, refusedBody } from '../dist/capture/key-scan.js';

const OLD_KEY = /svc(?:_|%5[fF]|\\u005[fF])(?:live|test)(?:_|%5[fF]|\\u005[fF])[0-9A-Za-z]{20,128}/;
const SVC = Buffer.from('svc');
const before = (b) => b.indexOf(SVC) !== -1 && OLD_KEY.test(b.toString('latin1'));

const json = (n) => {
  const parts = [];
  let len = 9;
  for (let i = 0; len < n; i++) {
    const p = JSON.stringify({ id: `ord_${i}`, amount: i * 7, note: i % 3 ? 'café crème' : 'plain', ok: true });
    parts.push(p);
    len += p.length + 1;
  }
  return Buffer.from(`{"data":[${parts.join(',')}]}`);
};
const escaped = (n) =>
  Buffer.from(
    JSON.stringify({ t: 'caf\u00e9 \n "q" '.repeat(Math.ceil(n / 16)) })
      .replace(/é/g, '\\u00e9')
      .slice(0, n),
  );
const form = (n) => Buffer.from(`a=${encodeURIComponent('x y/z?&%'.repeat(Math.ceil(n / 20)))}`.slice(0, n));
const random = (n) => randomBytes(n);
const repeated = (u, n) => Buffer.from(u.repeat(Math.ceil(n / u.length)).slice(0, n), 'latin1');

const cases = [
  ['JSON 1 KB', json(1024), 'application/json'],
  ['JSON 32 KB', json(32 * 1024), 'application/json'],
  ['JSON 1 MiB', json(1 << 20), 'application/json'],
  ['JSON with \\u00e9 and \\n, 32 KB', escaped(32 * 1024), 'application/json'],
  ['form 32 KB (many %)', form(32 * 1024), 'application/x-www-form-urlencoded'],
  ['binary 1 MiB (NULs)', random(1 << 20), 'application/octet-stream'],
  ['text naming svc, 32 KB', Buffer.from('billing-svc ok '.repeat(2200)), 'text/plain'],
  // Hostile bodies: nothing but places where a spelling could start (a small fixed cost per byte).
  ['%73 repeated, 1 MiB', repeated('%73', 1 << 20), 'application/json'],
  ['%2573 repeated, 1 MiB', repeated('%2573', 1 << 20), 'application/json'],
  ['\\u005c repeated, 1 MiB', repeated('\\u005c', 1 << 20), 'application/json'],
  ['\\u0073 repeated, 1 MiB', repeated('\\u0073', 1 << 20), 'application/json'],
  ['%\\0 repeated, 1 MiB', repeated('%\0', 1 << 20), 'application/json'],
  ['a mixture repeated, 1 MiB', repeated('%73\\u005c%\0%25\\x73s\0v\0', 1 << 20), 'application/json'],
  ['plain bytes, 4 MiB', Buffer.alloc(4 << 20, 'a'), 'application/octet-stream'],
];

/** Median microseconds of fn over rounds, after a warm-up. */
function time(fn, rounds) {
  for (let i = 0; i < Math.min(50, rounds); i++) fn();
  const t = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    t.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}

console.log('| body | before (µs) | after (µs) |');
console.log('|---|---:|---:|');
for (const [name, body, ct] of cases) {
  const rounds = body.length > 100_000 ? 20 : 600;
  const a = time(() => before(body), rounds);
  const b = time(() => refusedBody(body, ct), rounds);
  console.log(`| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} |`);
}
const gz = gzipSync(json(1 << 20));
console.log(`| (gunzip alone) | | ${time(() => gunzipSync(gz), 40).toFixed(1)} |`);
console.log(
  `| gzip JSON, 1 MiB decoded (${gz.length} B sent) | not read | ${time(() => refusedBody(gz, 'application/json', 'gzip'), 40).toFixed(1)} |`,
);

// A streamed body: 8 MiB of JSON in 64 KiB chunks through the gate.
const big = json(1 << 20);
const chunks = [];
for (let r = 0; r < 8; r++) for (let i = 0; i < big.length; i += 65536) chunks.push(big.subarray(i, i + 65536));
const runs = [];
for (let k = 0; k < 7; k++) {
  const gate = new KeyGate('application/json');
  const t0 = process.hrtime.bigint();
  for (const c of chunks) await gate.push(c);
  await gate.end();
  runs.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
runs.sort((a, b) => a - b);
console.log(
  `\nstreamed 8 MiB JSON in 64 KiB chunks through the gate: ${runs[3].toFixed(1)} ms (${((runs[3] / 8) * 1000).toFixed(0)} µs per MiB)`,
);
