import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkName } from '../../src/auth/key.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Issue #34 item 5: `POST /v2/api-keys` took consumer `"billing-service "`, which an
 * origin reads as `billing-service` (impersonation). Labels and consumers are now NFC,
 * 1 to 128 characters, with no control characters and no whitespace at either end;
 * a consumer is reserved against its case-folded, normalized form; and two creates
 * at once can no longer both reserve one consumer.
 */
/** Names as a client could send them: any graphemes, any UTF-16 (lone surrogates too), and tricky pieces. */
const names = fc.oneof(
  fc.string({ unit: 'grapheme', minLength: 0, maxLength: 20 }),
  fc.string({ unit: 'binary', minLength: 0, maxLength: 12 }),
  fc.string({
    unit: fc.constantFrom('a', 'Z', ' ', '%', '%2', '\t', '\u00a0', 'e\u0301', '東', '\ud83d', '\ude00', '\n', '+'),
    maxLength: 10,
  }),
);

describe('key labels and consumers', () => {
  let origin: TestServer;
  let t: TestGateway;
  const routes = Array.from({ length: 10 }, (_, i) => ({
    name: `r${i}`,
    prefix: `/r${i}`,
    scopes: { read: `r${i}:read`, write: `r${i}:write` },
    origins: { production: '' },
  }));
  const scopes = routes.flatMap((r) => [r.scopes.read, r.scopes.write]);

  const post = async (body: unknown, secret = t.admin, raw?: string) => {
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(secret), 'content-type': 'application/json' },
      body: raw ?? JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: the tests read API answers loosely
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  };
  const create = async (body: Record<string, unknown>, secret = t.admin) => {
    const r = await post({ environment: 'production', ...body }, secret);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as { id: string; secret: string; consumer: string; label: string };
  };
  /** The consumer as the origin reads it: x-wakegate-consumer, decoded. */
  const originReads = async (secret: string): Promise<string> => {
    const r = await fetch(`${t.url}/r0/who`, { headers: bearer(secret) });
    expect(r.status).toBe(200);
    return decodeURIComponent(await r.text());
  };

  beforeAll(async () => {
    // fast-check builds its grapheme table on first use (seconds on a loaded machine): done
    // here, before any connection is open, so it cannot hold the event loop past keep-alive.
    fc.sample(names, 5);
    origin = await startServer((req, res) => {
      req.resume();
      res.end(String(req.headers['x-wakegate-consumer'] ?? ''));
    });
    for (const r of routes) r.origins.production = origin.url;
    t = await startGateway({
      rate_limits: { default: { limit: 1_000_000, burst: 1_000_000, window: 'minute' } },
      routes,
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it.each([
    ['consumer', { consumer: 'billing-service ' }],
    ['consumer', { consumer: ' billing-service' }],
    ['consumer', { consumer: 'billing-service\t' }],
    ['consumer', { consumer: 'billing-service\u00a0' }],
    ['consumer', { consumer: 'billing-service\u3000' }],
    ['consumer', { consumer: 'billing-service\u200b' }],
    ['consumer', { consumer: '\ufeffbilling-service' }],
    ['consumer', { consumer: 'billing\u0000service' }],
    ['consumer', { consumer: 'billing\r\nx-wakegate-consumer: admin' }],
    ['consumer', { consumer: 'billing\u0085service' }],
    ['consumer', { consumer: 'billing\u007fservice' }],
    ['consumer', { consumer: '' }],
    ['consumer', { consumer: 'x'.repeat(129) }],
    ['label', { label: 'ops team ' }],
    ['label', { label: 'ops\nteam' }],
    ['label', { label: '' }],
    ['label', { label: '東'.repeat(129) }],
  ])('refuses %s %j with 400 invalid_request naming it', async (param, fields) => {
    const r = await post({ label: 'named', environment: 'production', scopes: ['r0:read'], ...fields });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param });
  });

  it('refuses a lone surrogate (not Unicode) as 400 naming consumer', async () => {
    const raw = '{"label":"x","environment":"production","scopes":["r0:read"],"consumer":"ab\\ud800"}';
    const r = await post(undefined, t.admin, raw);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'consumer' });
  });

  it('takes 128 characters (of any plane), and stores a decomposed name as NFC', async () => {
    const long = await create({ label: '東'.repeat(128), scopes: ['r0:read'] });
    expect(long.consumer).toBe('東'.repeat(128));
    expect(await originReads(long.secret)).toBe('東'.repeat(128));
    const emoji = await create({ label: 'e', consumer: '😀'.repeat(128), scopes: ['r0:read'] });
    expect(emoji.consumer).toBe('😀'.repeat(128));
    const nfd = await create({ label: 'Cafe\u0301 ops', consumer: 'cafe\u0301-team', scopes: ['r0:read'] });
    expect(nfd).toMatchObject({ label: 'Café ops', consumer: 'café-team' });
    expect(await originReads(nfd.secret)).toBe('café-team');
    const inner = await create({ label: 'inner space', consumer: 'billing service', scopes: ['r0:read'] });
    expect(await originReads(inner.secret)).toBe('billing service');
  });

  it('refuses a consumer that differs only in case or normalization from one a key it cannot manage holds', async () => {
    await create({ label: 'billing', consumer: 'billing-service', scopes: ['r1:write'] });
    await create({ label: 'café', consumer: 'café-team', scopes: ['r1:write'] });
    const caller = await create({ label: 'issuer', scopes: ['keys:write', 'r0:read', 'r1:read'] });
    for (const consumer of ['billing-service', 'Billing-Service', 'BILLING-SERVICE', 'billing-ſervice', 'CAFÉ-TEAM']) {
      const r = await post({ label: 'mine', environment: 'production', scopes: ['r0:read'], consumer }, caller.secret);
      expect(r.status, consumer).toBe(403);
      expect(r.body.error, consumer).toMatchObject({ type: 'insufficient_scope', param: 'consumer' });
    }
    // Decomposed, it is the same name.
    const r = await post(
      { label: 'mine', environment: 'production', scopes: ['r0:read'], consumer: 'Cafe\u0301-Team' },
      caller.secret,
    );
    expect(r.status).toBe(403);
    // The default consumer (the label) is held to the same rule.
    const byLabel = await post(
      { label: 'Billing-Service', environment: 'production', scopes: ['r0:read'] },
      caller.secret,
    );
    expect(byLabel.status).toBe(403);
    // A name of its own is fine, and a key it can manage may share its consumer.
    await create({ label: 'mine', consumer: 'billing-service-2', scopes: ['r0:read'] }, caller.secret);
    await create({ label: 'mine too', consumer: 'Billing-Service-2', scopes: ['r0:read'] }, caller.secret);
  });

  it('20 concurrent creates of one new consumer by keys that may not share it: exactly one succeeds', async () => {
    const callers = [];
    for (const s of scopes) callers.push(await create({ label: `issuer ${s}`, scopes: ['keys:write', s] }));
    const answers = await Promise.all(
      callers.map((c, i) =>
        post({ label: `race ${i}`, environment: 'production', scopes: [scopes[i]], consumer: 'race-target' }, c.secret),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, ...Array(19).fill(403)]);
    for (const a of answers.filter((x) => x.status === 403))
      expect(a.body.error).toMatchObject({ type: 'insufficient_scope', param: 'consumer' });
  });

  it('property: any string is either refused (400 naming consumer) or read by the origin as the key says', async () => {
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(names, async (consumer) => {
        const r = await post({ label: 'prop', environment: 'production', scopes: ['r0:read'], consumer });
        if ('problem' in checkName(consumer)) {
          expect(r.status, JSON.stringify(consumer)).toBe(400);
          expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'consumer' });
          return;
        }
        accepted++;
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        expect(r.body.consumer).toBe(consumer.normalize('NFC'));
        expect(await originReads(r.body.secret as string)).toBe(r.body.consumer);
      }),
      { numRuns: 60 },
    );
    expect(accepted).toBeGreaterThan(10);
  }, 60_000);
});
