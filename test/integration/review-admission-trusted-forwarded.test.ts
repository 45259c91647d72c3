import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

function heard(text: string): Record<string, string> {
  const rest = text.slice(text.indexOf('\r\n\r\n') + 4);
  const body = JSON.parse(rest.slice(rest.indexOf('{'), rest.lastIndexOf('}') + 1)) as { rawHeaders: string[] };
  const h: Record<string, string> = {};
  for (let i = 0; i < body.rawHeaders.length; i += 2) {
    const n = (body.rawHeaders[i] as string).toLowerCase();
    h[n] = h[n] === undefined ? (body.rawHeaders[i + 1] as string) : `${h[n]}, ${body.rawHeaders[i + 1]}`;
  }
  return h;
}

// Regression and coverage tests from a review of admission and forwarded headers (the defects' tests failed before their fixes).
describe('review: a trusted proxy in front of the gateway', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port = 0;
  const clock = new ManualClock(Date.UTC(2026, 3, 1, 8, 0, 0));

  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway(
      {
        server: { trusted_proxies: ['127.0.0.1'] },
        routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
        rate_limits: { default: { limit: 60, burst: 2, window: 'minute' } },
      },
      { clock },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const exchange = (headers: string[]) =>
    rawExchange(port, `${['GET /x HTTP/1.1', 'Host: a', ...headers, 'Connection: close'].join('\r\n')}\r\n\r\n`);
  const send = async (headers: string[]) => {
    clock.advance(3_600_000);
    const r = await exchange(headers);
    expect(statusOf(r.text)).toBe(200);
    return heard(r.text);
  };

  it('held up: the X-Forwarded-For chain of a trusted proxy is appended to', async () => {
    const h = await send(['X-Forwarded-For: 6.6.6.6, 203.0.113.7']);
    expect(h['x-forwarded-for']).toBe('6.6.6.6, 203.0.113.7, 127.0.0.1');
  });

  // docs/security.md: "`X-Forwarded-For/-Proto/-Host`, `Forwarded` and `x-wakegate-*` are the
  // gateway's own; a client's are dropped unless its address is in server.trusted_proxies,
  // whose chain is appended to". A client put `for=6.6.6.6` first and the trusted proxy
  // appended the address it saw; an origin that trusts two hops (the proxy and the
  // gateway) reads the second `for=` from the right: with the gateway's hop missing, that
  // is the client's forgery, while X-Forwarded-For of the same request gives 203.0.113.7.
  it("a trusted proxy's Forwarded chain is appended to with the gateway's own hop", async () => {
    const h = await send(['Forwarded: for=6.6.6.6, for=203.0.113.7', 'X-Forwarded-For: 6.6.6.6, 203.0.113.7']);
    const xff = (h['x-forwarded-for'] as string).split(/\s*,\s*/);
    const fwd = (h.forwarded ?? '').split(/\s*,\s*/);
    // Both chains name the same hops, in the same order.
    expect(fwd.length).toBe(xff.length);
    expect(fwd.at(-1)).toMatch(/for="?127\.0\.0\.1"?/);
  });

  // Keyless requests are limited "per client address". Behind a trusted proxy every client
  // arrives from the proxy's address: Kong (trusted_ips + real_ip_header) and nginx (realip)
  // take the client from X-Forwarded-For for `limit_by: ip`, so one client behind a load
  // balancer cannot spend every other client's bucket. It did: the bucket was the proxy's address's.
  it('behind a trusted proxy, one client spending its keyless bucket does not refuse another client', async () => {
    clock.advance(3_600_000);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push(statusOf((await exchange(['X-Forwarded-For: 198.51.100.1'])).text));
    expect(statuses).toEqual([200, 200, 429]);
    const other = await exchange(['X-Forwarded-For: 198.51.100.2']);
    expect(statusOf(other.text)).toBe(200);
  });
});

describe('behind a trusted proxy, the wake', () => {
  let origin: TestServer;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      server: { trusted_proxies: ['127.0.0.1'] },
      routes: [{ name: 'open', prefix: '/', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it("records the client X-Forwarded-For names past the trusted proxy, not the proxy's address", async () => {
    const port = Number(new URL(t.url).port);
    const r = await rawExchange(
      port,
      'GET /x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.9\r\nConnection: close\r\n\r\n',
    );
    expect(statusOf(r.text)).toBe(200);
    const id = /x-wake-id: (\S+)/i.exec(r.text)?.[1] as string;
    await flushed(t.gw);
    const page = await t.gw.wakes.list({ environment: 'production', pathExact: '/x' }, 100, null);
    expect(page.rows.find((w) => w.id === id)?.client_ip).toBe('198.51.100.9');
  });
});
