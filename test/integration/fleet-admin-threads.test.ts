import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

// Runs on the Node LTS (scripts/test-on-lts.sh): four edge threads share the port.
const admin = `svc_live_${newSecret()}`;
let redis: TestRedis;
let storage: HttpStorage;
let dir: string;
let g: ChildGateway;
let origin: TestServer;

beforeAll(async () => {
  [redis, storage] = await Promise.all([startRedis(), startHttpStorage()]);
  origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  dir = mkdtempSync(join(tmpdir(), 'review-conc-fleet-'));
  writeFileSync(
    join(dir, 'cfg.yaml'),
    [
      'server: { threads: 4 }',
      'log: { level: info }',
      `storage: { clickhouse_url: "${storage.url}", encryption_key: "${randomBytes(32).toString('base64')}", key_poll_interval_ms: 500 }`,
      `coordination: { redis_url: "${redis.url}", timeout_ms: 500 }`,
      'routes:',
      `  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: ${origin.url} } }`,
      '',
    ].join('\n'),
  );
  g = await spawnGateway(
    ['serve', '--config', join(dir, 'cfg.yaml')],
    { DATA_DIR: join(dir, 'data'), WAKEGATE_ADMIN_KEY: admin },
    60_000,
  );
}, 120_000);

afterAll(async () => {
  g?.proc.kill('SIGTERM');
  await g?.exited;
  await Promise.all([redis?.stop(), storage?.stop(), origin?.close()]);
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

// A keys:write key is limited by each instance alone, at its whole policy: with edge
// threads, by one table the threads share (each thread held its own once, and one
// instance admitted such a key once per thread). An honest Redis: no attacker needed.
it.skipIf(!hasReusePort())(
  'admits a keys:write key of limit 5 a day at most 5 times through one instance (on a route)',
  async () => {
    const made = await fetch(`${g.url}/v2/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        label: 'second admin',
        environment: 'production',
        scopes: ['keys:read', 'keys:write', 'api:read'],
        rate_limit: { limit: 5, burst: 5, window: 'day' },
      }),
    });
    expect(made.status, await made.clone().text()).toBe(201);
    const secret = ((await made.json()) as { secret: string }).secret;
    await new Promise((r) => setTimeout(r, 1500)); // every thread knows the key
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${g.url}/api/x`, { headers: { authorization: `Bearer ${secret}`, connection: 'close' } });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    console.log({
      ok: statuses.filter((s) => s === 200).length,
      refused: statuses.filter((s) => s === 429).length,
      other: statuses.filter((s) => s !== 200 && s !== 429),
    });
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
  },
  60_000,
);

it.skipIf(!hasReusePort())(
  'control: a plain key of limit 5 a day, the same way (the fleet path)',
  async () => {
    const made = await fetch(`${g.url}/v2/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        label: 'plain key',
        environment: 'production',
        scopes: ['api:read'],
        rate_limit: { limit: 5, burst: 5, window: 'day' },
      }),
    });
    expect(made.status, await made.clone().text()).toBe(201);
    const secret = ((await made.json()) as { secret: string }).secret;
    await new Promise((r) => setTimeout(r, 1500)); // every thread knows the key
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${g.url}/api/x`, { headers: { authorization: `Bearer ${secret}`, connection: 'close' } });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    console.log({
      ok: statuses.filter((s) => s === 200).length,
      refused: statuses.filter((s) => s === 429).length,
      other: statuses.filter((s) => s !== 200 && s !== 429),
    });
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
  },
  60_000,
);
