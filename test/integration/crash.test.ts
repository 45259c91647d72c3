import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

describe('crashes and idle floods (child gateway)', () => {
  let origin: TestServer;
  let rx: Receiver;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  const auth = { authorization: `Bearer ${admin}` };

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url === '/boom') res.writeHead(500);
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
      'webhooks:\n  allow_insecure_http: true\n  allow_private_networks: true\n  jitter: 0\n  retry_schedule_s: [2, 300, 1800, 3600, 7200, 18000, 34200]\nlog:\n  level: info\n',
    );
  });
  afterAll(async () => {
    await origin.close();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('after SIGKILL under load, loses at most the unflushed buffer and resumes every pending delivery', async () => {
    const env = { DATA_DIR: join(dir, 'data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin };
    const args = ['serve', '--config', join(dir, 'cfg.yaml')];
    const g1 = await spawnGateway(args, env);
    const reg = await fetch(`${g1.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url, events: ['wake.error'] }),
    });
    expect(reg.status).toBe(201);
    let served = 0;
    let stop = false;
    const t0 = Date.now();
    const workers = Array.from({ length: 20 }, async () => {
      while (!stop) {
        try {
          const r = await fetch(`${g1.url}/load/${served}`);
          await r.arrayBuffer();
          if (r.status === 200) served++;
        } catch {
          return;
        }
      }
    });
    // A 5xx raises wake.error; the receiver fails attempt 1, and attempt 2 is due 2 s later.
    expect((await fetch(`${g1.url}/boom`)).status).toBe(500);
    await rx.waitFor(1, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    g1.proc.kill('SIGKILL');
    await Promise.all(workers);
    const secs = (Date.now() - t0) / 1000;
    expect((await g1.exited).signal).toBe('SIGKILL');
    expect(rx.got.map((g) => g.headers['x-service-attempt'])).toEqual(['1/8']);

    const g2 = await spawnGateway(args, env);
    try {
      let count = 0;
      let cursor: string | null = null;
      do {
        const page: { data: unknown[]; next_cursor: string | null } = await (
          await fetch(`${g2.url}/v2/wakes?path=/load/*&limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
            headers: auth,
          })
        ).json();
        count += page.data.length;
        cursor = page.next_cursor;
      } while (cursor);
      const rate = served / secs;
      const lost = served - count;
      // The documented bound: the wakes of the last flush_interval_ms (500 ms) not yet
      // written, plus the batch being written. Allow two intervals of traffic.
      const bound = Math.ceil(rate * 1.0);
      expect(served).toBeGreaterThan(300);
      expect(lost).toBeLessThanOrEqual(bound);
      // The pending delivery resumes: attempt 2, same delivery, after the restart.
      await rx.waitFor(2, 15_000);
      const attempts = rx.got.map((g) => g.headers['x-service-attempt']);
      expect(attempts[attempts.length - 1]).toBe('2/8');
      expect(attempts.filter((a) => a === '2/8')).toHaveLength(1);
      expect(new Set(rx.got.map((g) => g.headers['x-service-delivery-id'])).size).toBe(1);
      console.log(
        `crash: served ${served} in ${secs.toFixed(1)} s, stored ${count}, lost ${lost} (bound ${bound}); attempts ${attempts.join(' ')}`,
      );
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
