// Regression tests from a review of wake replay (2026-11-28): origins that never finish answering a replay.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/api.md: a replay is sent "waiting for the answer as long as the route's
 * `timeout_ms` (then 504 `upstream_timeout` in the replay's wake)", and "Replays running
 * at once (until the origin's answer is recorded) are bounded". app.ts: stop() drains
 * for a grace period (`server.drain_timeout_ms`). The replayer uses undici's
 * headersTimeout/bodyTimeout: each 1xx interim answer re-arms the head timer, and each
 * body chunk the body timer, so an origin that keeps sending 102 Processing, or
 * streams (server-sent events, a heartbeat within timeout_ms), keeps the replay running
 * with no end: it is never recorded, holds its running place for good, and
 * Replayer.close() (awaited by the gateway's stop, control.ts) waits for it forever.
 */
describe('a replay whose origin never finishes its answer', () => {
  let origin: TestServer;
  let t: TestGateway;
  const held: ServerResponse[] = [];
  const timers: NodeJS.Timeout[] = [];
  const processing: { res: ServerResponse; timer: NodeJS.Timeout }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (!req.headers['x-wakegate-replay-of']) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"ok":true}');
          return;
        }
        if (req.url?.startsWith('/api/processing')) {
          // 102 Processing every 100 ms, never a final answer.
          processing.push({ res, timer: setInterval(() => res.writeProcessing(), 100) });
          return;
        }
        // An event stream: a heartbeat every 100 ms, for ever.
        held.push(res);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        timers.push(setInterval(() => res.write(': ping\n\n'), 100));
      });
    });
    t = await startGateway({
      server: { drain_timeout_ms: 1000 },
      routes: [{ name: 'api', prefix: '/api', auth: 'none', timeout_ms: 300, origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    for (const x of timers) clearInterval(x);
    for (const p of processing) clearInterval(p.timer);
    for (const r of held) r.destroy();
    await t.cleanup();
    await origin.close();
  });

  const captured = async (path: string) => {
    const r = await fetch(`${t.url}${path}`);
    await r.text();
    await flushed(t.gw);
    return r.headers.get('x-wake-id') as string;
  };
  const replay = async (id: string) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(202);
    return ((await r.json()) as { replay_wake_id: string }).replay_wake_id;
  };
  // biome-ignore lint/suspicious/noExplicitAny: read loosely
  const recordedWithin = async (id: string, ms: number): Promise<any> => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      await flushed(t.gw);
      const g = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
      if (g.status === 200) return g.json();
      await g.text();
      await new Promise((r) => setTimeout(r, 100));
    }
    return null;
  };

  it('an origin sending 102 Processing for ever: the replay is recorded as 504 upstream_timeout within a few seconds (timeout_ms 300)', async () => {
    const id = await captured('/api/processing/1');
    const rid = await replay(id);
    const w = await recordedWithin(rid, 4000);
    // Let it go either way, so the next test sees only its own replay running.
    for (const p of processing) {
      clearInterval(p.timer);
      p.res.destroy();
    }
    expect(w, 'no wake after 4 s: the replay still waits for the origin (route timeout_ms 300)').not.toBeNull();
    expect(w.status).toBe(504);
  });

  it("the gateway's stop ends within its grace period while a replay of an event stream is running", async () => {
    const id = await captured('/api/events');
    await replay(id);
    await new Promise((r) => setTimeout(r, 300));
    expect(held.length, 'the origin is streaming to the replay').toBeGreaterThan(0);
    const t0 = Date.now();
    const stopped = await Promise.race([
      t.gw.stop(1000).then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 8000)),
    ]);
    expect(stopped, `stop(1000) had not returned after ${Date.now() - t0} ms`).toBe(true);
  });
});
