import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';
import { route, type Scripted, scripted } from '../helpers/scripted-origin.js';

// Regression tests from a review of the proxy's client to origins (src/proxy/origin-client.ts): each failed before its fix.
/**
 * Header values with obs-text (0x80-0xFF) pass byte-exact: they do for an answer of
 * announced length, and did on undici for every answer. An answer of no announced
 * length whose head comes before its first body bytes (an event stream, a long poll)
 * has its head sent at once with res.flushHeaders(), which Node writes as UTF-8: each
 * byte 0x80-0xFF reaches the client as two bytes. (Head and body in one piece pass:
 * the head then goes with the body's Buffer, in latin1.)
 */
describe('obs-text in the head of an answer of no announced length', () => {
  let t: TestGateway;
  let port: number;
  let o: Scripted;

  beforeAll(async () => {
    o = await scripted((head, _c, _n, s) => {
      const target = head.split(' ')[1] as string;
      const reason = target.includes('/reason') ? 'Caf\xe9' : 'OK';
      const h = Buffer.from(
        `HTTP/1.1 200 ${reason}\r\nContent-Type: text/event-stream\r\nX-Obs: caf\xe9 \xff\r\nTransfer-Encoding: chunked\r\n\r\n`,
        'latin1',
      );
      if (target.includes('/together')) {
        s.write(Buffer.concat([h, Buffer.from('5\r\nhello\r\n0\r\n\r\n')]));
        return;
      }
      // The head alone, its body 100 ms later.
      s.write(h);
      setTimeout(() => s.write('5\r\nhello\r\n0\r\n\r\n'), 100);
    });
    t = await startGateway({ routes: [route('o', o.url)] });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  const req = (path: string) => rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);

  it('head first, body later: the header value is byte-exact', async () => {
    const r = await req('/o/later');
    expect(statusOf(r.text)).toBe(200);
    expect(r.text).toContain('X-Obs: caf\xe9 \xff\r\n');
  });

  it('head first, body later: the reason phrase is byte-exact (undici could not pass it at all)', async () => {
    const r = await req('/o/reason');
    expect(r.text.startsWith('HTTP/1.1 200 Caf\xe9\r\n')).toBe(true);
  });
});
