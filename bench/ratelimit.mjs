#!/usr/bin/env node
// Limiter cost per request with 100,000 active keys (issue 4's budget: under 1 µs).
// Runs against the built code (dist/); `npm run bench:ratelimit`.
import { loadConfig } from '../dist/config/index.js';
import { RateLimiter } from '../dist/ratelimit/limiter.js';

const KEYS = 100_000;
const ROUNDS = 5;
const PER_ROUND = 2_000_000;
const keys = Array.from({ length: KEYS }, (_, i) => ({
  id: `key_${String(i).padStart(20, '0')}`,
  environment: 'production',
  label: '',
  consumer: `c${i}`,
  scopes: [],
  rate_limit: i % 10 === 0 ? { limit: 600, burst: 100, window: 'minute' } : null,
  replaces: null,
  secret_hash: '',
  created_at: 0,
  revoke_at: null,
  revoked_at: null,
  updated_at: 0,
}));
const l = new RateLimiter(loadConfig({ values: { ratelimit: { max_buckets: 200_000, sketch_cells: 65_536 } } }));
let now = Date.UTC(2026, 0, 1);
for (const k of keys) l.check(k, '', null, now); // warm: every key has a bucket
const results = [];
let sink = 0;
for (let r = 0; r < ROUNDS; r++) {
  // A pseudo-random walk over the keys, so the map is not hit in insertion order.
  let x = 12345 + r;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < PER_ROUND; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    if ((i & 1023) === 0) now += 1;
    const d = l.check(keys[x % KEYS], '', (i & 15) === 0 ? 'reports' : null, now);
    sink += d.allowed ? 1 : 0;
  }
  const ns = Number(process.hrtime.bigint() - t0) / PER_ROUND;
  results.push(ns);
}
results.sort((a, b) => a - b);
const median = results[Math.floor(results.length / 2)];
console.log('| benchmark | keys | rounds x checks | median ns/check | min | max | budget |');
console.log('|---|---|---|---|---|---|---|');
console.log(
  `| limiter.check (with headers) | ${KEYS} | ${ROUNDS} x ${PER_ROUND} | ${median.toFixed(0)} | ${results[0].toFixed(0)} | ${results[results.length - 1].toFixed(0)} | < 1000 ns: ${median < 1000 ? 'met' : 'NOT met'} |`,
);
console.log(`(buckets held: ${l.size}; allowed ${sink})`);
