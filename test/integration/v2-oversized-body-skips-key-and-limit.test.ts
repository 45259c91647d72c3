// Regression tests from a review of rate limits and buckets (2026-11-27).
// The threaded case runs on the Node LTS (bash scripts/test-on-lts.sh <this file>), where two threads share the port (on an older Node it skips).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * DESIGN (Rate limits): requests whose key is refused (missing, malformed, unknown,
 * revoked) are limited per client address under `unauthenticated`; "past it they get
 * 429 before any key work", and their 401 carries that bucket's headers
 * (docs/keys-and-limits.md). The API says so of itself (src/api/server.ts: "no key is
 * 401 and draws the unauthenticated bucket, before the path is answered ... and before a
 * body is read"), and the management listener does. On the main listener, a /v2 call
 * announcing a body over server.api_body_limit_bytes is answered 413 by the edge
 * (src/management-body.ts readWhole) before admission: no key is looked at, no bucket is
 * drawn, no rate-limit header is sent, and every such call is stored as a wake, without
 * bound, from a client that holds no key at all.
 */
describe('review: an oversized /v2 body from a client without a key is still limited per address', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ rate_limits: { unauthenticated: { limit: 2, burst: 2, window: 'hour' } } });
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  const post = async (base: string) => {
    const port = Number(new URL(base).port);
    const head = [
      'POST /v2/api-keys HTTP/1.1',
      'Host: a',
      `Authorization: Bearer svc_live_${'u'.repeat(43)}`,
      'Content-Type: application/json',
      'Content-Length: 5000000',
      'Connection: close',
    ].join('\r\n');
    const r = await rawExchange(port, `${head}\r\n\r\n{"label":`, 3000);
    const limit = /\r\nx-ratelimit-limit: (\d+)/i.exec(r.text)?.[1] ?? null;
    return { status: statusOf(r.text), limit };
  };

  it.each([
    ['the management listener (reference)', 'managementUrl'],
    ['the main listener', 'url'],
  ] as const)('%s: a bad key with a 5 MB body is 401, 401 (with the bucket headers), then 429', async (_, which) => {
    const base = t[which];
    // Both cases come from 127.0.0.1: one address, one unauthenticated bucket (the reference runs first).
    const seen = [await post(base), await post(base), await post(base)];
    if (which === 'managementUrl') {
      expect(seen.map((s) => s.status)).toEqual([401, 401, 429]);
    } else {
      // The reference spent the address's burst: the main listener must answer 429 now.
      // Today: 413, 413, 413, without a rate-limit header, none of them counted.
      expect(seen.map((s) => [s.status, s.limit])).toEqual([
        [429, '2'],
        [429, '2'],
        [429, '2'],
      ]);
    }
  });
});

/**
 * The other sides of the same order (DESIGN, "One admission": key, scope, buckets, then
 * what the call does): a live key whose body is past the limit is charged and answered
 * 413 on both listeners alike, with its bucket's headers; past its bucket, 429. A body
 * that is too large only once it streams (chunked), or too slow, is refused after the
 * key as well; an admitted call keeps its 413 and 408 from the edge's limits.
 */
describe('an oversized or slow /v2 body is refused after admission, on both listeners alike', () => {
  let t: TestGateway;
  let secret: string;
  beforeAll(async () => {
    t = await startGateway({
      server: { api_body_limit_bytes: 4096, api_body_timeout_ms: 400 },
      rate_limits: { unauthenticated: { limit: 2, burst: 2, window: 'hour' } },
    });
    // A key of its own small bucket (4 an hour), allowed to create keys.
    const made = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({
        label: 'small',
        environment: 'production',
        scopes: ['keys:write', 'wakes:read'],
        rate_limit: { limit: 4, burst: 4, window: 'hour' },
      }),
    });
    expect(made.status).toBe(201);
    secret = ((await made.json()) as { secret: string }).secret;
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  const send = async (base: string, head: string[], body: string, ms = 3000) => {
    const r = await rawExchange(
      Number(new URL(base).port),
      `${[...head, 'Connection: close'].join('\r\n')}\r\n\r\n${body}`,
      ms,
    );
    const header = (name: string) => new RegExp(`\r\n${name}: ([^\r]*)`, 'i').exec(r.text)?.[1] ?? null;
    const json = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
    return { status: statusOf(r.text), header, json, closed: r.closed };
  };
  const big = (key: string) => [
    'POST /v2/api-keys HTTP/1.1',
    'Host: a',
    `Authorization: Bearer ${key}`,
    'Content-Type: application/json',
    'Content-Length: 5000000',
  ];

  it('a live key with a 5 MB body: 413 with its bucket drawn, on the management listener and the main one alike; past it 429', async () => {
    const seen = [];
    for (const base of [t.managementUrl, t.url, t.managementUrl, t.url, t.url]) {
      const r = await send(base, big(secret), '{"label":');
      seen.push([r.status, r.header('x-ratelimit-limit'), r.header('x-ratelimit-remaining')]);
      if (r.status === 413) {
        const body = JSON.parse(r.json) as { error: { type: string; wake_id: string; param: string } };
        expect(body.error).toMatchObject({ type: 'payload_too_large', param: 'body' });
        expect(body.error.wake_id).toBe(r.header('x-wake-id'));
      }
    }
    expect(seen).toEqual([
      [413, '4', '3'],
      [413, '4', '2'],
      [413, '4', '1'],
      [413, '4', '0'],
      [429, '4', '0'],
    ]);
    // The main listener's 413 is the edge's limit, said so; a wake of route v2 with the key that sent it.
    const r = await send(t.url, big(t.admin), '{"label":');
    expect(r.status).toBe(413);
    expect(JSON.parse(r.json).error.message).toBe(
      'the request body is larger than server.api_body_limit_bytes (4096 bytes)',
    );
    await flushed(t.gw);
    const w = await fetch(`${t.url}/v2/wakes/${r.header('x-wake-id')}`, { headers: bearer(t.admin) });
    expect(await w.json()).toMatchObject({
      route: 'v2',
      status: 413,
      path: '/v2/api-keys',
      key_id: expect.stringMatching(/^key_/),
    });
  });

  it('a bad key is 401 or 429 however its body is too large (chunked past the limit) or too slow, never 413 or 408', async () => {
    const bad = `svc_live_${'q'.repeat(43)}`;
    const chunked = (key: string) =>
      send(
        t.url,
        [
          'POST /v2/api-keys HTTP/1.1',
          'Host: a',
          `Authorization: Bearer ${key}`,
          'Content-Type: application/json',
          'Transfer-Encoding: chunked',
        ],
        `1400\r\n${'a'.repeat(5120)}\r\n`,
      );
    const slow = (key: string) =>
      send(
        t.url,
        [
          'POST /v2/api-keys HTTP/1.1',
          'Host: a',
          `Authorization: Bearer ${key}`,
          'Content-Type: application/json',
          'Content-Length: 100',
        ],
        '{"la',
      );
    const a = await chunked(bad);
    const b = await slow(bad);
    const c = await chunked(bad);
    expect([a, b, c].map((r) => [r.status, r.header('x-ratelimit-limit')])).toEqual([
      [401, '2'],
      [401, '2'],
      [429, '2'],
    ]);
    expect(b.header('www-authenticate')).toBe('Bearer');
    // A live key's are still the edge's 413 and 408, each closing the connection.
    const big2 = await chunked(t.admin);
    expect(big2.status).toBe(413);
    expect(big2.closed).toBe(true);
    const slow2 = await slow(t.admin);
    expect(slow2.status).toBe(408);
    expect(JSON.parse(slow2.json).error).toMatchObject({ type: 'invalid_request', param: 'body' });
    expect(slow2.json).toContain('api_body_timeout_ms');
    expect(slow2.closed).toBe(true);
  });

  it('Expect: 100-continue with a live key and a body past the limit: 413 without a 100 Continue', async () => {
    const r = await send(t.url, [...big(t.admin), 'Expect: 100-continue'], '');
    expect(r.status).toBe(413);
    expect(r.closed).toBe(true);
  });
});

/** Two edge threads: the call whose body an edge refused is handed over without it, and answered after admission. */
describe.runIf(hasReusePort())(
  'threads: 2: an oversized /v2 body is refused after admission across the handover',
  () => {
    const admin = `svc_live_${newSecret()}`;
    let dir: string;
    let g: ChildGateway;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'wakegate-v2-body-threads-'));
      writeFileSync(
        join(dir, 'cfg.yaml'),
        [
          'server: { threads: 2, api_body_limit_bytes: 4096 }',
          'log: { level: info }',
          'rate_limits:',
          '  unauthenticated: { limit: 1, burst: 2, window: day }',
          '',
        ].join('\n'),
      );
      g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
        DATA_DIR: join(dir, 'data'),
        WAKEGATE_ADMIN_KEY: admin,
        WAKEGATE_TEST_HOOKS: '1',
      });
    }, 60_000);
    afterAll(async () => {
      if (g && g.proc.exitCode === null) {
        g.proc.kill('SIGTERM');
        await g.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    });

    const post = async (key: string, framing: string, body: string) => {
      const r = await rawExchange(
        g.port,
        `POST /v2/api-keys HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${framing}Connection: close\r\n\r\n${body}`,
        3000,
      );
      return { status: statusOf(r.text), closed: r.closed, text: r.text };
    };
    const announced = 'Content-Length: 5000000\r\n';
    const chunked = 'Transfer-Encoding: chunked\r\n';
    const chunk = `1400\r\n${'a'.repeat(5120)}\r\n`;

    it('a bad key: 401, 401, then 429, announced or streamed past the limit; a live key: 413 with its wake id', async () => {
      const bad = `svc_live_${'q'.repeat(43)}`;
      const seen = [
        await post(bad, announced, '{"label":'),
        await post(bad, chunked, chunk),
        await post(bad, announced, '{'),
      ];
      expect(seen.map((r) => r.status)).toEqual([401, 401, 429]);
      for (const [framing, body] of [
        [announced, '{"label":'],
        [chunked, chunk],
      ]) {
        const r = await post(admin, framing as string, body as string);
        expect(r.status).toBe(413);
        expect(r.closed).toBe(true);
        expect(r.text).toMatch(/\r\nx-wake-id: wk_/i);
        expect(r.text).toContain('server.api_body_limit_bytes (4096 bytes)');
      }
    });
  },
);
