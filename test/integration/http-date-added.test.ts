// Regression tests from a review of HTTP semantics (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { rawExchange } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

/**
 * RFC 9110 §6.6.1: "A recipient with a clock that receives a response message without a
 * Date header field MUST record the time it was received and append a corresponding
 * Date header field to the message's header section if it is cached or forwarded
 * downstream." The gateway turns off node's own Date (res.sendDate = false) so the
 * origin's passes as it is, but adds none when the origin sent none: downstream caches
 * then have no date_value for their age calculation (RFC 9111 §4.2.3) and heuristic
 * freshness. (Its own error answers do carry one.) An origin Date, when sent, must
 * still pass unchanged.
 */
describe('Date on relayed answers (RFC 9110 §6.6.1)', () => {
  let t: TestGateway;
  let o: Scripted;

  beforeAll(async () => {
    o = await scripted((head, _c, _n, s) => {
      if (head.includes('/dated'))
        s.write('HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 2\r\n\r\nok');
      else s.write('HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\nok');
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [
        route('o', o.url),
        route('ws', o.url, { upgrades: ['websocket'] }),
        {
          ...route('wsk', o.url, { upgrades: ['websocket'] }),
          auth: 'required',
          scopes: { read: 'payments:read', write: 'payments:write' },
        },
      ],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  it('HTTP/1.1: an origin answer without Date reaches the client with one', async () => {
    const r = await rawExchange(
      Number(new URL(t.url).port),
      'GET /o/undated HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(r.text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    const date = /\r\ndate: ([^\r]+)/i.exec(r.text)?.[1];
    expect(date).toBeDefined();
    expect(Math.abs(Date.parse(date as string) - Date.now())).toBeLessThan(5000);
  });

  it('HTTP/2: an origin answer without Date reaches the client with one', async () => {
    const r = await h2once(t.url, { ':path': '/o/undated' });
    expect(r.status).toBe(200);
    expect(r.headers.date).toBeDefined();
  });

  // (2026-11-28) The upgrade path writes its answers itself: an origin's refusal of the switch, and the gateway's own.
  const upgrade = (path: string) =>
    rawExchange(
      Number(new URL(t.url).port),
      `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
  it('an upgrade the origin answers without switching (and without Date) reaches the client with one', async () => {
    const r = await upgrade('/ws/undated');
    expect(r.text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    const dates = [...r.text.matchAll(/\r\ndate: ([^\r]+)/gi)].map((m) => m[1] as string);
    expect(dates).toHaveLength(1);
    expect(Math.abs(Date.parse(dates[0] as string) - Date.now())).toBeLessThan(5000);
    // The origin's own passes alone.
    const dated = await upgrade('/ws/dated');
    expect([...dated.text.matchAll(/\r\ndate: ([^\r]+)/gi)].map((m) => m[1])).toEqual([
      'Mon, 01 Jan 2024 00:00:00 GMT',
    ]);
  });

  it("the gateway's own refusal of an upgrade carries Date", async () => {
    const r = await upgrade('/wsk/refused');
    expect(r.text.split('\r\n')[0]).toMatch(/^HTTP\/1\.1 401 /);
    expect(r.text).toMatch(/\r\ndate: [A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT\r\n/i);
  });

  it("the origin's own Date passes unchanged", async () => {
    const r = await rawExchange(
      Number(new URL(t.url).port),
      'GET /o/dated HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    const dates = [...r.text.matchAll(/\r\ndate: ([^\r]+)/gi)].map((m) => m[1]);
    expect(dates).toEqual(['Mon, 01 Jan 2024 00:00:00 GMT']);
  });
});
