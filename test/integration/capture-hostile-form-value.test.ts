// Regression tests from a review of capture and redaction (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/security.md: "no body costs more than about a plain 32 KB JSON body"; "A request
 * body costs a bounded amount of work per byte whatever it spells". A form value that
 * mentions a named field and holds a long run of `a-a-a-…` is read by the GraphQL
 * argument pattern (redact.ts graphqlArgs), which backtracks quadratically: ~0.7 s of
 * the serving thread's CPU for one 32 KB body (default max_body_bytes), during which
 * nothing else on that thread is answered.
 */
describe('redaction of a hostile form value is bounded', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway({
      routes: [{ name: 'pub', prefix: '/pub', auth: 'none', origins: { production: origin.url } }],
    });
  }, 20_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const post = async (body: string, type: string) => {
    const t0 = performance.now();
    const r = await fetch(`${t.url}/pub/a`, { method: 'POST', headers: { 'content-type': type }, body });
    await r.arrayBuffer();
    return performance.now() - t0;
  };
  /** Time of a tiny GET sent right after `n` bodies: it waits for whatever blocks the thread. */
  const pingAfter = async (body: string, type: string, n: number) => {
    const sent = Array.from({ length: n }, () => post(body, type));
    await Promise.all(sent);
    const t0 = performance.now();
    const r = await fetch(`${t.url}/pub/ping`);
    await r.arrayBuffer();
    return performance.now() - t0;
  };

  it('a 32 KB form value "token a-a-a-…" does not stall the gateway for much longer than a plain 32 KB JSON body', async () => {
    const plain = JSON.stringify({ data: 'x'.repeat(32_000), token: 'abc' });
    const hostile = `q=token+${'a-'.repeat(16_000)}`;
    expect(hostile.length).toBeLessThanOrEqual(32_768);
    // Warm up.
    await pingAfter(plain, 'application/json', 1);
    const t0 = performance.now();
    await pingAfter(plain, 'application/json', 3);
    const plainMs = performance.now() - t0;
    const t1 = performance.now();
    await pingAfter(hostile, 'application/x-www-form-urlencoded', 3);
    const hostileMs = performance.now() - t1;
    // Generous: three hostile bodies may cost ten times three plain ones, plus 300 ms.
    expect(hostileMs).toBeLessThan(plainMs * 10 + 300);
  }, 30_000);
});
