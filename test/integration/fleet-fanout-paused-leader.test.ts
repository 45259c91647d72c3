// Regression tests from a review of the fleet on Redis (2026-11-28).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

/*
 * Review (fleet on Redis, a host that pauses processes): DESIGN "each event becomes its
 * deliveries once for the whole fleet: the fan-out leader's writes carry a fencing token (a
 * number that grows with each leadership), and storage keeps only the writes of the newest
 * leader." FanoutLeader (src/fleet/dispatch.ts LEAD) is a plain SET PX lease with no token;
 * FanOut checks the lead one round trip before writing (src/webhooks/fanout.ts), and the
 * delivery rows carry nothing storage could fence on. A leader paused between that check and
 * its write (SIGSTOP, a long GC, its insert delayed on the way) writes after the next leader
 * has fanned the same event out: two deliveries of one event to one endpoint.
 *
 * Here: gateway A (the fan-out leader) reaches storage through a proxy that holds A's first
 * insert into webhook_deliveries; A is then paused (SIGSTOP) past its 10 s lead; B takes over
 * and fans the event out; the held insert then reaches storage.
 */
const admin = `svc_live_${newSecret()}`;
const sealing = randomBytes(32).toString('base64');
const auth = { authorization: `Bearer ${admin}`, 'content-type': 'application/json' };

let redis: TestRedis;
let storage: HttpStorage;
let rx: Receiver;
let dir: string;
let proxy: Server;
let proxyUrl = '';
const gws: ChildGateway[] = [];

interface Held {
  req: IncomingMessage;
  res: ServerResponse;
  body: Buffer;
}
let arm = false;
let held: Held | null = null;
let onHeld: () => void = () => {};

const forward = (h: Held) => {
  const target = new URL(storage.url);
  const up = request(
    { host: target.hostname, port: target.port, method: h.req.method, path: h.req.url, headers: h.req.headers },
    (r) => {
      if (!h.res.destroyed) {
        h.res.writeHead(r.statusCode ?? 500, r.headers);
        r.pipe(h.res);
      } else r.resume();
    },
  );
  up.on('error', () => h.res.destroy());
  up.end(h.body);
};

function config(): string {
  const file = join(dir, 'gw.yaml');
  writeFileSync(
    file,
    [
      'server: { threads: 1 }',
      'log: { level: info }',
      `coordination: { redis_url: "${redis.url}", timeout_ms: 500 }`,
      'storage: { key_poll_interval_ms: 60000 }',
      'capture: { flush_interval_ms: 50 }',
      'webhooks: { allow_insecure_http: true, allow_private_networks: true, timeout_ms: 1000, jitter: 0 }',
      'environments:',
      '  production: { class: live }',
      'routes:',
      '  - { name: api, prefix: /api, scopes: { read: api:read, write: api:write }, origins: { production: "http://127.0.0.1:9" } }',
      '',
    ].join('\n'),
  );
  return file;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wakegate-review-fence-'));
  [redis, storage, rx] = await Promise.all([startRedis(), startHttpStorage(), startReceiver()]);
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const h = { req, res, body: Buffer.concat(chunks) };
      const q = new URL(req.url ?? '/', 'http://x').searchParams.get('query') ?? '';
      const text = `${q}\n${h.body.toString('utf8', 0, 4096)}`;
      if (arm && held === null && /INSERT INTO\s+\S*webhook_deliveries\b/i.test(text)) {
        held = h;
        onHeld();
        return;
      }
      forward(h);
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const a = proxy.address();
  proxyUrl = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  const file = config();
  for (const [i, url] of [proxyUrl, storage.url].entries()) {
    gws.push(
      await spawnGateway(['serve', '--config', file], {
        DATA_DIR: join(dir, `g${i}`),
        CLICKHOUSE_URL: url,
        WAKEGATE_ADMIN_KEY: admin,
        WAKEGATE_ENCRYPTION_KEY: sealing,
      }),
    );
  }
}, 120_000);

afterAll(async () => {
  for (const g of gws) {
    if (g.proc.exitCode === null && g.proc.signalCode === null) {
      g.proc.kill('SIGCONT');
      g.proc.kill('SIGKILL');
    }
  }
  await Promise.all(gws.map((g) => g.exited));
  proxy?.close();
  await Promise.all([redis?.stop(), storage?.stop(), rx?.close()]);
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

const owner = (g: ChildGateway) => /"msg":"coordination: joined the fleet","owner":"([0-9a-f]+)"/.exec(g.stderr())?.[1];

describe('review: the fan-out leader paused between its lead check and its write', () => {
  it('an event still becomes one delivery per endpoint: storage keeps only the newest leader’s write', async () => {
    const [a, b] = gws as [ChildGateway, ChildGateway];
    // A started first and leads the fan-out.
    expect(await redis.cli('GET', 'wakegate:fanout')).toBe(owner(a));
    const ep = await fetch(`${a.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ url: rx.url, events: ['key.revoked'] }),
    });
    expect(ep.status, await ep.clone().text()).toBe(201);
    const created = await fetch(`${b.url}/v2/api-keys`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ label: 'fence', environment: 'production', scopes: ['api:read'] }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const key = (await created.json()) as { id: string };

    const paused = new Promise<void>((r) => {
      onHeld = () => {
        // The host pauses A right there (SIGSTOP), its insert not yet stored.
        a.proc.kill('SIGSTOP');
        r();
      };
    });
    arm = true;
    const del = await fetch(`${b.url}/v2/api-keys/${key.id}`, { method: 'DELETE', headers: auth });
    expect(del.status).toBe(200);
    await Promise.race([paused, new Promise((_, j) => setTimeout(() => j(new Error('A never wrote')), 15_000))]);

    // B takes the lead once A's expires (10 s) and fans the event out itself.
    const ours = () => rx.got.filter((x) => x.body.includes(key.id));
    for (const until = Date.now() + 25_000; ours().length === 0 && Date.now() < until; )
      await new Promise((r) => setTimeout(r, 50));
    expect(ours().length, 'B fanned the event out').toBeGreaterThan(0);
    expect(await redis.cli('GET', 'wakegate:fanout')).toBe(owner(b));

    // A's write, from a leadership that ended, now reaches storage; A resumes.
    forward(held as unknown as Held);
    await new Promise((r) => setTimeout(r, 500));
    a.proc.kill('SIGCONT');
    await new Promise((r) => setTimeout(r, 3000));

    const event = String(ours()[0]?.headers['webhook-id']);
    const list = await fetch(`${b.url}/v2/webhooks/deliveries?environment=production`, { headers: auth });
    const rows = ((await list.json()) as { data: { id: string; event_id: string }[] }).data.filter(
      (d) => d.event_id === event,
    );
    const attemptsSent = new Set(ours().map((x) => `${x.headers['webhook-id']}`)).size;
    expect({ deliveries: rows.length, webhookIds: attemptsSent, posts: ours().length }).toEqual({
      deliveries: 1,
      webhookIds: 1,
      posts: 1,
    });
  }, 120_000);
});
