import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { spelledWord } from '../helpers/key-spellings.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * Review of issue #34: request trailer fields are filtered as headers are. A trailer
 * holding a gateway key refuses the request before the origin gets anything; the
 * gateway's own, forwarding, credential and hop-by-hop names never reach the origin
 * (one that merges trailers into headers would read them as the gateway's).
 */
describe('request trailers are filtered as headers are', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  /** What the origin received: each request's trailers and every raw header and trailer line. */
  let seen: { trailers: Record<string, string | undefined>; raw: string }[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          trailers: { ...req.trailers },
          raw: [...req.rawHeaders, ...req.rawTrailers, Buffer.concat(chunks).toString('latin1')].join('\n'),
        });
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });
  beforeEach(() => {
    seen = [];
  });

  /** A chunked POST with `trailers` after its body, on a raw socket. */
  const send = (trailers: [string, string][]) =>
    rawExchange(
      port,
      `POST /open/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: ${trailers.map(([n]) => n).join(', ')}\r\nConnection: close\r\n\r\n` +
        `5\r\nhello\r\n0\r\n${trailers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`,
      10_000,
    );

  it('regression: a trailer holding a gateway key refuses the request (400, param trailers); the origin gets nothing', async () => {
    const key = `svc_live_${newSecret()}`;
    const r = await send([
      ['x-checksum', 'abc'],
      ['X-Token', key],
    ]);
    expect(statusOf(r.text)).toBe(400);
    const err = JSON.parse(r.text.slice(r.text.indexOf('{'))).error;
    expect(err).toMatchObject({ type: 'invalid_request', param: 'trailers' });
    expect(err.message).not.toContain(key);
    expect(seen).toEqual([]);
  });

  it("regression: the gateway's own, forwarding, credential and hop-by-hop trailer names are dropped; others pass", async () => {
    const r = await send([
      ['x-checksum', 'sha-256=abc'],
      ['x-wakegate-consumer', 'billing-service'],
      ['X-Wakegate-Key-Id', 'key_forged'],
      ['X-Forwarded-For', '10.9.9.9'],
      ['forwarded', 'for=10.9.9.9'],
      ['Authorization', 'Basic Zm9vOmJhcg=='],
      ['proxy-authorization', 'Basic Zm9vOmJhcg=='],
      ['keep-alive', 'timeout=5'],
      ['TE', 'trailers'],
      ['grpc-status', '0'],
    ]);
    expect(statusOf(r.text)).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.trailers).toEqual({ 'x-checksum': 'sha-256=abc', 'grpc-status': '0' });
    expect(seen[0]?.raw).not.toContain('billing-service');
    expect(seen[0]?.raw).not.toContain('key_forged');
  });

  it('regression: trailers that are all dropped leave a plain request that still reaches the origin', async () => {
    const r = await send([['x-wakegate-consumer', 'billing-service']]);
    expect(statusOf(r.text)).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.trailers).toEqual({});
    expect(seen[0]?.raw).not.toContain('billing-service');
  });

  const tchar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_.!#$&*+^`|~'.split(''));
  const name = fc.string({ unit: tchar, minLength: 1, maxLength: 20 });
  const value = fc.string({ unit: fc.constantFrom(...' abcXYZ019-_=;,./:"{}'.split('')), maxLength: 30 });

  it('property: a trailer holding a gateway key in any spelling, among random others, is refused and reaches no origin', async () => {
    const key = `svc_live_${newSecret()}`;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(name, value), { maxLength: 4 }),
        fc.tuple(name, spelledWord(key), value, value),
        fc.nat({ max: 4 }),
        async (others, [n, spelled, before, after], at) => {
          seen = [];
          const list: [string, string][] = others.map(([a, b]) => [`x-${a}`, b]);
          list.splice(Math.min(at, list.length), 0, [`x-${n}`, `${before.trim()} ${spelled} ${after.trim()}`.trim()]);
          const r = await send(list);
          expect(statusOf(r.text)).toBe(400);
          expect(seen).toEqual([]);
          expect(r.text).not.toContain(key);
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000);

  it('property: trailer names of the dropped families, in any case and with _ for -, never reach the origin; the rest pass unchanged', async () => {
    const dropped = fc.oneof(
      fc.constantFrom('authorization', 'proxy-authorization', 'forwarded', 'keep-alive', 'te', 'upgrade', 'connection'),
      name.map((s) => `x-wakegate-${s}`),
      name.map((s) => `x-forwarded-${s}`),
    );
    // Any case, and any - as _ (origins that fold _ into - read both as the same name).
    const randomCase = (s: string, bits: number[]) =>
      [...s]
        .map((c, i) => {
          const b = bits[i % bits.length] ?? 0;
          if (c === '-' && (b >> 1) % 2) return '_';
          return b % 2 ? c.toUpperCase() : c;
        })
        .join('');
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          name.map((s) => `y-${s.toLowerCase()}`),
          { maxLength: 4 },
        ),
        fc.array(fc.tuple(dropped, fc.array(fc.nat(), { minLength: 1, maxLength: 8 })), { minLength: 1, maxLength: 4 }),
        async (kept, drops) => {
          seen = [];
          const list: [string, string][] = [
            ...kept.map((k, i): [string, string] => [k, `v${i}`]),
            ...drops.map(([d, bits]): [string, string] => [randomCase(d, bits), 'dropped-value']),
          ];
          const r = await send(list);
          expect(statusOf(r.text)).toBe(200);
          expect(seen).toHaveLength(1);
          expect(seen[0]?.trailers).toEqual(Object.fromEntries(kept.map((k, i) => [k, `v${i}`])));
          expect(seen[0]?.raw).not.toContain('dropped-value');
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000);
});
