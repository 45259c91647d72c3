import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with an edge thread per core.

describe('crashes and idle floods (child gateway)', () => {
  let origin: TestServer;
  let rx: Receiver;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/boom')) res.writeHead(500);
      res.end('{"ok":true}');
    });
    rx = await startReceiver();
    rx.answer = (_q, res) => {
      res.writeHead(503);
      res.end();
    };
    dir = mkdtempSync(join(tmpdir(), 'wakegate-crash-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      'webhooks:\n  allow_insecure_http: true\n  allow_private_networks: true\n  jitter: 0\n  retry_schedule_s: [5, 300, 1800, 3600, 7200, 18000, 34200]\n# The load comes from one address: it must not meet the per-address limit of unkeyed requests.\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\n',
    );
  });
  afterAll(async () => {
    await origin.close();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('after SIGKILL under load, stores exactly once every wake answered 50 ms before the kill, and resumes every pending delivery', async () => {
    const env = { DATA_DIR: join(dir, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
    const args = ['serve', '--config', join(dir, 'cfg.yaml')];
    const g1 = await spawnGateway(args, env);
    const reg = await fetch(`${g1.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['wake.error'] }),
    });
    expect(reg.status).toBe(201);
    // Every answer the client fully received, with when it was received.
    const answered: { id: string; at: number }[] = [];
    let stop = false;
    const t0 = Date.now();
    const workers = Array.from({ length: 20 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        try {
          const r = await fetch(`${g1.url}/load/${w}/${i}`);
          await r.arrayBuffer();
          if (r.status === 200) answered.push({ id: r.headers.get('x-wake-id') as string, at: performance.now() });
        } catch {
          return;
        }
      }
    });
    // A 5xx raises wake.error; the receiver fails attempt 1, and attempt 2 is due 5 s later (after the kill).
    expect((await fetch(`${g1.url}/boom`)).status).toBe(500);
    await rx.waitFor(1, 10_000);
    const firstDelivery = rx.got[0]?.headers['x-service-delivery-id'];
    await new Promise((r) => setTimeout(r, 2500));
    // An event raised just before the kill must survive it too.
    const late = await fetch(`${g1.url}/boom?late=1`);
    expect(late.status).toBe(500);
    const lateWake = late.headers.get('x-wake-id') as string;
    await new Promise((r) => setTimeout(r, 60));
    const killedAt = performance.now();
    stop = true;
    g1.proc.kill('SIGKILL');
    await Promise.all(workers);
    const secs = (Date.now() - t0) / 1000;
    expect((await g1.exited).signal).toBe('SIGKILL');

    const g2 = await spawnGateway(args, env);
    try {
      const stored: string[] = [];
      let cursor: string | null = null;
      const list = async () => {
        stored.length = 0;
        cursor = null;
        do {
          const page: { data: { id: string }[]; next_cursor: string | null } = await (
            await fetch(`${g2.url}/v2/wakes?path=/load/*&limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
              headers: auth,
            })
          ).json();
          for (const w of page.data) stored.push(w.id);
          cursor = page.next_cursor;
        } while (cursor);
      };
      const due = answered.filter((a) => a.at <= killedAt - 50).map((a) => a.id);
      // The log is inserted while the new gateway serves: wait for it.
      await until(
        async () => {
          await list();
          const have = new Set(stored);
          return due.every((id) => have.has(id));
        },
        20_000,
        'every wake answered before the kill to be stored',
      );
      const have = new Set(stored);
      const lost = due.filter((id) => !have.has(id));
      console.log(
        `crash: ${answered.length} answered in ${secs.toFixed(1)} s (${Math.round(answered.length / secs)}/s), ${due.length} at least 50 ms before the kill, ${lost.length} of them lost, ${stored.length - have.size} stored twice, ${stored.length} stored`,
      );
      // The kill came under load (20 requests in flight): a durability check, not a speed one,
      // so it holds on a loaded machine too (62/s there, thousands quiet).
      expect(answered.length).toBeGreaterThan(100);
      expect(lost).toEqual([]);
      expect(stored.length).toBe(have.size);
      // The 5xx answered just before the kill is a wake, and its wake.error event is delivered.
      expect((await fetch(`${g2.url}/v2/wakes/${lateWake}`, { headers: auth })).status).toBe(200);
      await until(
        () => rx.got.some((g) => g.body.includes(lateWake)),
        15_000,
        'the event raised just before the kill to be delivered',
      );
      // The pending delivery resumes after the restart as attempt 2, once.
      const first = () => rx.got.filter((g) => g.headers['x-service-delivery-id'] === firstDelivery);
      await until(() => first().length >= 2, 15_000, 'attempt 2 of the pending delivery');
      await new Promise((r) => setTimeout(r, 300));
      expect(first().map((g) => g.headers['x-service-attempt'])).toEqual(['1/8', '2/8']);
    } finally {
      g2.proc.kill('SIGTERM');
      await g2.exited;
    }
  }, 90_000);

  it('keeps serving while 10,000 idle connections are open', async () => {
    const g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'idle'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    const sockets: net.Socket[] = [];
    try {
      for (let i = 0; i < 10_000; i++) {
        const s = net.connect(g.port, '127.0.0.1');
        s.on('error', () => {});
        sockets.push(s);
        if (i % 500 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise((r) => setTimeout(r, 500));
      const t0 = Date.now();
      const r = await fetch(`${g.url}/still/serving`);
      expect(r.status).toBe(200);
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      for (const s of sockets) s.destroy();
      g.proc.kill('SIGTERM');
      await g.exited;
    }
  }, 60_000);
});
