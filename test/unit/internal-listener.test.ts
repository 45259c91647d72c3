import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { handOver } from '../../src/threads/handover.js';
import { internalListener } from '../../src/threads/internal-listener.js';
import { closeBoth, edgeInFront } from '../helpers/edge-handover.js';

/**
 * The control thread's internal listener against local processes that can reach its
 * loopback port without its token: idle connections, wrong tokens and half-sent
 * headers never keep the edges' /v2 calls from being answered. (The whole gateway
 * with edge threads needs SO_REUSEPORT, Node 22.12 or later; this runs everywhere.)
 */
describe('internal listener against local connections without the token', () => {
  let internal: http.Server;
  let internalPort: number;
  let edge: http.Server;
  let edgePort: number;
  const token = 'x'.repeat(43);

  beforeAll(async () => {
    internal = internalListener({
      token,
      threads: 2,
      serve: (req, res, peer) => {
        req.resume();
        req.on('end', () => res.end(JSON.stringify({ peer })));
      },
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    internalPort = (internal.address() as AddressInfo).port;
    const hand = handOver({ port: internalPort, token }, silentLogger);
    ({ edge, port: edgePort } = await edgeInFront(hand));
  });
  afterAll(() => closeBoth(edge, internal));

  const raw = (what: 'idle' | 'bad-token' | 'half-headers'): net.Socket => {
    const s = net.connect(internalPort, '127.0.0.1');
    s.on('error', () => {});
    if (what === 'bad-token') s.write('GET /v2/api-keys HTTP/1.1\r\nHost: x\r\nX-Wakegate-Internal: nope\r\n\r\n');
    if (what === 'half-headers') s.write('GET /v2/api-keys HTTP/1.1\r\nHost: x\r\n');
    return s;
  };
  const closed = (s: net.Socket) =>
    new Promise<boolean>((r) => {
      if (s.destroyed) return r(true);
      s.once('close', () => r(true));
      setTimeout(() => r(false), 10_000);
    });
  const calls = (n: number) =>
    Promise.all(
      Array.from({ length: n }, () =>
        fetch(`http://127.0.0.1:${edgePort}/v2/api-keys`, { signal: AbortSignal.timeout(5000) }).then((r) => r.json()),
      ),
    );

  it('100 idle raw connections: 40 /v2 calls through the edge still answer, and the idle ones are closed', async () => {
    const idle = Array.from({ length: 100 }, () => raw('idle'));
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    const answers = await calls(40);
    expect(answers).toHaveLength(40);
    for (const a of answers) expect(a).toEqual({ peer: '127.0.0.1' });
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(await Promise.all(idle.map(closed))).toEqual(idle.map(() => true));
  });

  it('a wrong token closes the connection at once, with no answer', async () => {
    const s = raw('bad-token');
    let got = '';
    s.on('data', (c) => {
      got += c;
    });
    const t0 = performance.now();
    expect(await closed(s)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(got).toBe('');
  });

  it('property: any mix of idle, wrong-token and half-sent connections leaves every call answered', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom('idle' as const, 'bad-token' as const, 'half-headers' as const), {
          minLength: 1,
          maxLength: 120,
        }),
        fc.integer({ min: 1, max: 20 }),
        async (attack, n) => {
          const sockets = attack.map(raw);
          try {
            const answers = await calls(n);
            expect(answers).toHaveLength(n);
          } finally {
            for (const s of sockets) s.destroy();
          }
        },
      ),
      { numRuns: 12 },
    );
  });
});
