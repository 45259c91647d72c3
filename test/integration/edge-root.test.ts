import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { startEdgeThread } from '../../src/threads/edge-root.js';
import type { FromEdge, ToEdge } from '../../src/threads/protocol.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/**
 * The edge thread's root is a function (issue #35, "roots as lists"): built here in
 * the test's own thread, against a MessageChannel standing where the control thread
 * would be, it serves through its real listener and speaks the protocol.
 */
describe('the edge root, called in one thread', () => {
  let origin: TestServer;
  let dir: string;
  beforeAll(async () => {
    origin = await echoOrigin();
    dir = mkdtempSync(join(tmpdir(), 'wg-edge-root-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('proxies, hands its wakes to the control side as a sealed log segment, and stops when told', async () => {
    const config = loadConfig({
      values: {
        server: { port: 0, host: '127.0.0.1' },
        storage: { data_dir: dir },
        capture: { flush_interval_ms: 20 },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
    });
    const { port1: control, port2: edgeSide } = new MessageChannel();
    const heard: FromEdge[] = [];
    const waiters: { type: FromEdge['type']; resolve: (m: FromEdge) => void }[] = [];
    control.on('message', (m: FromEdge) => {
      heard.push(m);
      // The control side stores each segment; here it is only acknowledged.
      if (m.type === 'insert') control.postMessage({ type: 'inserted', id: m.id, error: null } satisfies ToEdge);
      for (const w of waiters.splice(0))
        if (w.type === m.type) w.resolve(m);
        else waiters.push(w);
    });
    const next = (type: FromEdge['type']) =>
      new Promise<FromEdge>((resolve) => {
        const had = heard.find((m) => m.type === type);
        if (had) resolve(had);
        else waiters.push({ type, resolve });
      });
    const thread = await startEdgeThread(
      {
        config,
        index: 1,
        threads: 1,
        port: 0,
        buckets: null,
        authorityBuckets: null,
        keys: [],
        redactionKey: randomBytes(32),
        via: 'wakegate-test',
        internal: { port: 1, token: 'unused' },
        retryMs: undefined,
        testHooks: false,
      },
      edgeSide,
    );
    try {
      expect(await next('listening')).toEqual({ type: 'listening', port: thread.port });
      const res = await fetch(`http://127.0.0.1:${thread.port}/open/edge-root-marker?x=1`);
      expect(res.status).toBe(200);
      expect((await res.json()).url).toBe('/open/edge-root-marker?x=1');
      const insert = await next('insert');
      if (insert.type !== 'insert') throw new Error('unreachable');
      // Rows stay in the thread's log: the segment's file crosses, not its rows.
      expect(insert.rows).toEqual([]);
      expect(insert.file).not.toBeNull();
      expect(readFileSync(insert.file as string).includes('edge-root-marker')).toBe(true);
      control.postMessage({ type: 'stop', graceMs: 1000 } satisfies ToEdge);
      await next('stopped');
      await expect(fetch(`http://127.0.0.1:${thread.port}/open/after`)).rejects.toThrow();
    } finally {
      control.close();
    }
  });
});
