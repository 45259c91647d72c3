import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * Review of #34 item 10: a Content-Encoding named after an Object.prototype property
 * (`constructor`, `__proto__`) passed the "known coding" check, and the body scanner
 * then threw outside any handler: one request ended the process (threads: 1) or the
 * edge thread. Every coding name a client can send is refused (400) or read.
 */
describe('Content-Encoding names from the client', () => {
  let origin: TestServer;
  let t: TestGateway;
  const port = () => Number(new URL(t.url).port);
  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      // A streamed body in a coding that reads fine (identity) is waited for until
      // request_timeout_ms; a short one makes that answer (408) come within the exchange.
      server: { headers_timeout_ms: 1000, request_timeout_ms: 1000 },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const post = (coding: string, length: number, body = '') =>
    rawExchange(
      port(),
      `POST /open/x HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Encoding: ${coding}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n${body}`,
      3000,
    );

  it('a streamed body (past the buffer) with coding __proto__ or constructor is refused, and the gateway serves on', async () => {
    for (const coding of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'gzip, __proto__']) {
      const r = await post(coding, 2_000_000, '{"a":');
      expect(statusOf(r.text), `${coding}: ${r.text.slice(0, 200)}`).toBe(400);
      expect(r.text).toContain('content-encoding');
    }
    const ok = await fetch(`${t.url}/open/still-here`);
    expect(ok.status).toBe(200);
  });

  it('a streamed body in a coding that reads fine is answered at request_timeout_ms', async () => {
    for (const coding of ['identity', 'identity, identity']) {
      const r = await post(coding, 2_000_000, '{"a":');
      expect(statusOf(r.text), `${coding}: ${r.text.slice(0, 200)}`).toBe(408);
    }
  });

  it('property: any coding name, buffered or streamed, gets an answer and never stops the gateway', async () => {
    const names = fc.oneof(
      fc.constantFrom(...Object.getOwnPropertyNames(Object.prototype), 'gzip', 'br', 'deflate', 'identity', 'zstd'),
      fc.stringMatching(/^[A-Za-z_-]{1,16}$/),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(names, { minLength: 1, maxLength: 3 }), fc.boolean(), async (list, streamed) => {
        const r = await post(list.join(', '), streamed ? 2_000_000 : 5, streamed ? '{"a":' : '{"a":');
        expect(statusOf(r.text)).toBeGreaterThanOrEqual(200);
      }),
      { numRuns: 40 },
    );
    expect((await fetch(`${t.url}/open/still-here`)).status).toBe(200);
  }, 60_000);
});
