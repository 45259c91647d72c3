import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { handOver, internalConnectionLimit } from '../../src/threads/handover.js';
import { closeBoth, edgeInFront } from '../helpers/edge-handover.js';

/**
 * An edge thread's handover of /v2 calls to the control thread's internal listener,
 * on loopback (the whole gateway with two edge threads needs SO_REUSEPORT: see
 * starvation.test.ts): bodies are read whole first, answers are read at the control
 * thread's speed, and the internal listener keeps to a connection limit.
 */
describe('handover to the internal listener', () => {
  let internal: http.Server;
  let edge: http.Server;
  let edgePort: number;
  let bodiesSeen = 0;

  beforeAll(async () => {
    internal = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (chunks.length > 0) bodiesSeen++;
        res.end(JSON.stringify({ bytes: Buffer.concat(chunks).length }));
      });
    });
    internal.maxConnections = internalConnectionLimit(1);
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    const hand = handOver({ port: (internal.address() as AddressInfo).port, token: 't' }, silentLogger);
    ({ edge, port: edgePort } = await edgeInFront(hand));
  });
  afterAll(() => closeBoth(edge, internal));

  it('160 slow bodies reach no handover socket; a call answers at once, and its body arrives whole', async () => {
    const slow = Array.from({ length: 160 }, () => {
      const s = net.connect(edgePort, '127.0.0.1');
      s.on('error', () => {});
      s.write('POST /v2/api-keys HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a');
      return s;
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(bodiesSeen).toBe(0);
    const t0 = performance.now();
    const r = await fetch(`http://127.0.0.1:${edgePort}/v2/api-keys`, {
      method: 'POST',
      body: 'x'.repeat(5000),
      signal: AbortSignal.timeout(3000),
    });
    expect(await r.json()).toEqual({ bytes: 5000 });
    expect(performance.now() - t0).toBeLessThan(1500);
    for (const s of slow) s.destroy();
  });
});
