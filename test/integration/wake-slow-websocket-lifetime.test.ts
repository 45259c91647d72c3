// Regression tests from a review of the event rules (2026-11-27).
// Defect: a WebSocket tunnel is one wake when it ends, with latency_ms the tunnel's whole
// lifetime (src/proxy/websocket.ts:438 splice ... finish() -> src/capture/recorder.ts:244 latency_ms = end - t0), and
// src/events/wake-rules.ts:21 raises wake.slow for any wake over the route's
// latency_objective_ms. So every WebSocket session held longer than the objective (the
// shipped default route: upgrades [websocket], latency_objective_ms 800) raises wake.slow,
// and counts as a slow request toward the latency SLO (src/events/slo.ts:130), though the
// origin switched protocols at once. docs/events.md: wake.slow is "a request was slower
// than its route's latency_objective_ms"; a session kept open by its client is no slow
// request (the origin's answer, the 101, came in milliseconds).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventTable } from '../../src/store/events.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

describe('wake.slow and a WebSocket session', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('plain'));
    origin.server.on('upgrade', (req, socket) => {
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`,
      );
      socket.on('data', (c: Buffer) => socket.write(c));
      socket.on('end', () => socket.end());
      socket.on('error', () => {});
    });
    t = await startGateway({
      routes: [
        {
          name: 'live',
          prefix: '/live',
          auth: 'none',
          upgrades: ['websocket'],
          latency_objective_ms: 200,
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a session switched at once and held open 700 ms is not a slow request', async () => {
    const port = Number(new URL(t.url).port);
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    let switchedAt = 0;
    const opened = Date.now();
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (switchedAt === 0 && text.includes('\r\n\r\n')) switchedAt = Date.now();
    });
    s.write(
      'GET /live/socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await new Promise((r) => setTimeout(r, 700));
    expect(text.startsWith('HTTP/1.1 101')).toBe(true);
    expect(switchedAt - opened).toBeLessThan(200); // the origin switched within the objective
    s.end();
    await new Promise((r) => s.on('close', r));
    await new Promise((r) => setTimeout(r, 200));
    await flushed(t.gw);
    await t.gw.events.flush();
    const slow = await new EventTable(t.gw.store).list({ type: 'wake.slow' });
    expect(
      slow.map(
        (e) => `${(e.data.wake as { status: number }).status} ${(e.data.wake as { latency_ms: number }).latency_ms} ms`,
      ),
    ).toEqual([]);
  });
});
