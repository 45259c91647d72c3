// Regression tests from a review of HTTP semantics (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * RFC 9110 §7.6.2: "Each intermediary that receives a TRACE or OPTIONS request containing
 * a Max-Forwards header field MUST check and update its value prior to forwarding the
 * request. If the received value is zero (0), the intermediary MUST NOT forward the
 * request; instead, the intermediary MUST respond as the final recipient. If the received
 * Max-Forwards value is greater than zero, the intermediary MUST generate an updated
 * Max-Forwards field in the forwarded message with a field value that is the lesser of
 * a) the received value decremented by one (1) or b) the recipient's maximum supported
 * value for Max-Forwards." The gateway passes the field untouched: `Max-Forwards: 0`
 * (how a client asks the gateway itself, not what is behind it) reaches the origin, and
 * the hop count is never decremented, so tracing the chain hop by hop cannot work.
 */
describe('Max-Forwards on OPTIONS and TRACE (RFC 9110 §7.6.2)', () => {
  let t: TestGateway;
  let o: Scripted;
  let port: number;

  beforeAll(async () => {
    o = await scripted((_h, _c, _n, s) =>
      s.write('HTTP/1.1 200 OK\r\nAllow: GET, OPTIONS\r\nContent-Length: 0\r\n\r\n'),
    );
    t = await startGateway({ routes: [route('o', o.url)] });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  it('Max-Forwards: 0 is answered by the gateway, never forwarded', async () => {
    for (const method of ['OPTIONS', 'TRACE']) {
      const before = o.heads.length;
      const r = await rawExchange(
        port,
        `${method} /o/x HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n`,
      );
      const status = statusOf(r.text);
      expect(status).toBeGreaterThanOrEqual(200);
      expect(status).toBeLessThan(500);
      expect({ method, forwarded: o.heads.length - before }).toEqual({ method, forwarded: 0 });
    }
  });

  it('a positive Max-Forwards reaches the origin decremented by one', async () => {
    const r = await rawExchange(
      port,
      'OPTIONS /o/x HTTP/1.1\r\nHost: x\r\nMax-Forwards: 5\r\nConnection: close\r\n\r\n',
    );
    expect(statusOf(r.text)).toBe(200);
    const head = o.heads[o.heads.length - 1] as string;
    expect(/\r\nmax-forwards: *([^\r]*)/i.exec(head)?.[1]).toBe('4');
  });
});
