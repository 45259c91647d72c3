// Regression tests from a review of a host whose resources run out (2026-11-27).
/**
 * What held when the host ran short (review of resource exhaustion).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sink } from '../../src/capture/batcher.js';
import type { Wake } from '../../src/capture/wake.js';
import { newSecret } from '../../src/ids.js';
import {
  CAN_MOUNT,
  type Child,
  fill,
  kill,
  metric,
  mountTmpfs,
  sleep,
  spawnLimited,
  storedIds,
  unmount,
} from '../helpers/exhaust.js';
import { startGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { until } from '../helpers/receiver.js';

const CONFIG =
  'rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nlog:\n  level: info\ncapture:\n  flush_interval_ms: 100\n';

describe('child gateway, host short of disk or descriptors', () => {
  let root: string;
  let origin: TestServer;
  let g: Child | null = null;
  const admin = `svc_live_${newSecret()}`;
  const walDir = () => join(root, 'data', 'wal');

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'wg-review-held-'));
    writeFileSync(join(root, 'cfg.yaml'), CONFIG);
    origin = await startServer((_q, res) => res.end('ok'));
  });
  afterAll(async () => {
    await kill(g);
    await origin?.close();
    unmount(walDir());
    rmSync(root, { recursive: true, force: true });
  });

  it.skipIf(!CAN_MOUNT)(
    'with only the log disk full and storage answering, every wake is inserted from memory exactly once',
    async () => {
      mkdirSync(join(root, 'data'), { recursive: true });
      mountTmpfs(walDir(), '1m');
      g = await spawnLimited(['serve', '--config', join(root, 'cfg.yaml')], {
        DATA_DIR: join(root, 'data'),
        ORIGIN_URL: origin.url,
        WAKEGATE_ADMIN_KEY: admin,
      });
      await (await fetch(`${g.url}/warm`)).arrayBuffer();
      fill(join(walDir(), 'filler'));
      const answered: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 5 }, async () => {
          for (let i = next++; i < 150; i = next++) {
            const r = await fetch(`${(g as Child).url}/walfull/${i}`);
            await r.arrayBuffer();
            expect(r.status).toBe(200);
            answered.push(r.headers.get('x-wake-id') as string);
          }
        }),
      );
      const gw = g;
      let stored: string[] = [];
      await until(
        async () => {
          stored = await storedIds(gw.url, admin, '/walfull/*');
          return stored.length >= 150;
        },
        15_000,
        'every wake stored',
      );
      await sleep(1000);
      stored = await storedIds(gw.url, admin, '/walfull/*');
      expect(new Set(stored)).toEqual(new Set(answered));
      expect(stored.length).toBe(150);
      const m = await (await fetch(`${g.opsUrl}/metrics`)).text();
      expect(metric(m, 'wakegate_storage_up')).toBe(1);
      // The disk has room again: segments are written, nothing left behind.
      rmSync(join(walDir(), 'filler'));
      for (let i = 0; i < 10; i++) await (await fetch(`${g.url}/walback/${i}`)).arrayBuffer();
      await until(async () => (await storedIds(gw.url, admin, '/walback/*')).length === 10, 15_000, 'after');
      const ready = await (await fetch(`${g.opsUrl}/readyz`)).json();
      expect(ready).toMatchObject({ status: 'ready', storage: 'up', spool_batches: 0 });
      await kill(g);
      g = null;
      unmount(walDir());
    },
    90_000,
  );

  it('out of descriptors: never crashes, keeps answering on open connections, and serves new ones once descriptors return', async () => {
    g = await spawnLimited(
      ['serve', '--config', join(root, 'cfg.yaml')],
      { DATA_DIR: join(root, 'fd-data'), ORIGIN_URL: origin.url, WAKEGATE_ADMIN_KEY: admin },
      { nofile: 256 },
    );
    const gw = g;
    const socks: net.Socket[] = [];
    try {
      for (let i = 0; i < 300; i++) {
        const s = net.connect(gw.port, '127.0.0.1');
        s.on('error', () => {});
        socks.push(s);
      }
      await sleep(1000);
      // A request on a connection it holds is answered (the origin's pool may be out of descriptors: 502).
      const answer = await new Promise<string>((resolve) => {
        const s = socks[0] as net.Socket;
        let buf = '';
        s.on('data', (c) => {
          buf += c;
          if (buf.includes('\r\n\r\n')) resolve(buf.slice(0, 12));
        });
        s.write('GET /held HTTP/1.1\r\nhost: x\r\n\r\n');
        setTimeout(() => resolve(buf.slice(0, 12)), 5000);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 (200|502)/);
      // The ops listener still answers (or at worst refuses); the process is alive.
      expect(gw.proc.exitCode).toBeNull();
    } finally {
      for (const s of socks) s.destroy();
    }
    await sleep(500);
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${gw.url}/fdback/${i}`);
      await r.arrayBuffer();
      expect(r.status).toBe(200);
    }
    await until(async () => (await storedIds(gw.url, admin, '/fdback/*')).length === 20, 15_000, 'stored after');
    expect(gw.proc.exitCode).toBeNull();
  }, 90_000);
});

describe('child gateway, many large uploads and downloads at once', () => {
  let root: string;
  let origin: TestServer;
  let g: Child | null = null;
  const admin = `svc_live_${newSecret()}`;
  const MB = 1 << 20;
  const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'wg-review-mem-'));
    // Within configured limits: one client address streams 16 uploads at once (the default allows 8).
    writeFileSync(join(root, 'cfg.yaml'), `${CONFIG}server:\n  max_streaming_uploads_per_client: 64\n`);
    // A slow origin: reads uploads at its own pace, and answers downloads of 4 MB in 64 KB writes.
    origin = await startServer((req, res) => {
      if (req.method === 'POST') {
        req.on('data', () => {
          req.pause();
          setTimeout(() => req.resume(), 5);
        });
        req.on('end', () => res.end('ok'));
        return;
      }
      const chunk = Buffer.alloc(64 * 1024, 120);
      let left = 64;
      const more = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
  });
  afterAll(async () => {
    await kill(g);
    await origin?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('streams 16 uploads and 16 downloads of 4 MB at once with its memory bounded, and records each one', async () => {
    g = await spawnLimited(['serve', '--config', join(root, 'cfg.yaml')], {
      DATA_DIR: join(root, 'data'),
      ORIGIN_URL: origin.url,
      WAKEGATE_ADMIN_KEY: admin,
    });
    const gw = g;
    await (await fetch(`${gw.url}/warm`)).arrayBuffer();
    await sleep(500);
    const base = rss(gw.pid);
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rss(gw.pid));
    }, 50);
    const body = Buffer.alloc(4 * MB, 97);
    try {
      const ups = Array.from({ length: 16 }, async (_, i) => {
        const r = await fetch(`${gw.url}/up/${i}`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/octet-stream' },
        });
        await r.arrayBuffer();
        return r.status;
      });
      const downs = Array.from({ length: 16 }, async (_, i) => {
        const r = await fetch(`${gw.url}/down/${i}`);
        // A slow reader: 64 KB at a time.
        const reader = (r.body as ReadableStream<Uint8Array>).getReader();
        let n = 0;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          n += value.length;
          await sleep(2);
        }
        return n;
      });
      const statuses = await Promise.all(ups);
      const sizes = await Promise.all(downs);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(sizes.filter((n) => n !== 4 * MB)).toEqual([]);
    } finally {
      clearInterval(sampler);
    }
    console.log(`rss ${Math.round(base / MB)} MB at rest, ${Math.round(peak / MB)} MB at peak for 128 MB moved`);
    // 128 MB passed through; streaming keeps far less than that.
    expect(peak - base).toBeLessThan(96 * MB);
    await until(
      async () =>
        (await storedIds(gw.url, admin, '/up/*')).length === 16 &&
        (await storedIds(gw.url, admin, '/down/*')).length === 16,
      20_000,
      'every wake stored',
    );
  }, 90_000);
});

describe('in-process gateway, storage stalling', () => {
  let origin: TestServer;
  beforeAll(async () => {
    origin = await startServer((_q, res) => res.end('ok'));
  });
  afterAll(async () => {
    await origin.close();
  });

  it('holds max_buffered_rows in memory while an insert hangs, keeps every later wake in the log, and stores each once when storage answers', async () => {
    let stall: Promise<void> | null = null;
    let release = () => {};
    const wakeSink =
      (real: Sink<Wake>): Sink<Wake> =>
      async (rows, token, file) => {
        if (stall) await stall;
        return real(rows, token, file);
      };
    const t = await startGateway(
      {
        capture: { batch_rows: 20, flush_interval_ms: 50, max_buffered_rows: 100 },
        routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
      },
      { wakeSink, spoolRetryMs: 100 },
    );
    try {
      await (await fetch(`${t.url}/api/warm`)).arrayBuffer();
      await t.gw.batcher.flush();
      stall = new Promise<void>((r) => {
        release = r;
      });
      const ids: string[] = [];
      for (let i = 0; i < 300; i++) {
        const r = await fetch(`${t.url}/api/stall/${i}`);
        await r.arrayBuffer();
        expect(r.status).toBe(200);
        ids.push(r.headers.get('x-wake-id') as string);
      }
      await sleep(200);
      expect(t.gw.batcher.buffered).toBeLessThanOrEqual(100);
      // Until 2026-11-28 the 200 past max_buffered_rows were dropped as buffer_full, though the
      // write-ahead log held them on disk: now each full batch is sealed into the log behind
      // the hung insert, and nothing is dropped (the disk budget, storage.spool_max_bytes, bounds it).
      const dropped = t.gw.batcher.stats.dropped;
      expect(dropped).toBe(0);
      expect(t.gw.batcher.stats.spoolBatches).toBeGreaterThanOrEqual(300 / 20 - 2);
      const m = await (await fetch(`${t.opsUrl}/metrics`)).text();
      expect(metric(m, 'wakegate_wakes_dropped_total{reason="buffer_full"}')).toBe(0);
      stall = null;
      release();
      await until(
        async () => {
          await t.gw.batcher.flush();
          return t.gw.batcher.stats.spoolBatches === 0 && t.gw.batcher.buffered === 0;
        },
        15_000,
        'drained',
      );
      const rs = await t.gw.store.client.query({
        query: `SELECT count() AS c, uniqExact(id) AS u FROM ${t.gw.store.db}.wakes WHERE path LIKE '/api/stall/%'`,
        format: 'JSONEachRow',
      });
      const [row] = await rs.json<{ c: string; u: string }>();
      // Every wake is stored, once.
      expect(Number(row?.c)).toBe(Number(row?.u));
      expect(Number(row?.c)).toBe(300);
    } finally {
      release();
      await t.cleanup();
    }
  }, 60_000);
});
