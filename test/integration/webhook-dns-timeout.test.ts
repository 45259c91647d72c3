import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { GatewayError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { DNS_TIMEOUT_MS, type Resolver } from '../../src/webhooks/address.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { EndpointService } from '../../src/webhooks/endpoints.js';
import { sendAttempt } from '../../src/webhooks/sender.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { endpoint, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * Registration resolves the url's host to refuse private addresses (SSRF), and each
 * delivery attempt resolves it again. A resolver that never answers used to hold the
 * registration request forever. Both lookups are bounded now (DNS_TIMEOUT_MS); the
 * resolver is injected, so no test here asks the real network anything.
 */

const PUBLIC = [{ address: '93.184.216.34', family: 4 }];
/** Answers names by the table; a name it lacks is never answered (a hung resolver). */
const resolver = (table: Record<string, { address: string; family: number }[]>, timeoutMs: number): Resolver => ({
  timeoutMs,
  lookup: (host, cb) => {
    const a = table[host];
    if (a) setImmediate(() => cb(null, a));
  },
});

function service(r: Resolver, puts: unknown[] = []) {
  return new EndpointService({
    cfg: webhooksConfig(),
    table: {
      put: async (e) => {
        puts.push(e);
      },
      changedSince: async () => [],
    },
    events: { emit: () => ({ id: 'evt_x', type: 'x', environment: 'production', created_at: 0, data: '{}' }) },
    clock: new ManualClock(),
    log: silentLogger,
    announce: null,
    resolver: r,
  });
}

describe('registration with a resolver that does not answer', () => {
  it('is bounded at a few seconds by default', () => {
    expect(DNS_TIMEOUT_MS).toBe(5000);
  });

  it('refuses after the bound: 503 service_unavailable on the url, with a retry_after; nothing is stored', async () => {
    const puts: unknown[] = [];
    const s = service(resolver({}, 250), puts);
    const t0 = performance.now();
    const err = await s.create({ url: 'https://hangs.invalid/hook', events: ['*'] }, 'production').catch((e) => e);
    const took = performance.now() - t0;
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ type: 'service_unavailable', status: 503, param: 'url' });
    expect((err as GatewayError).retryAfter).toBeGreaterThan(0);
    expect((err as GatewayError).message).toMatch(/hangs\.invalid did not resolve within 250 ms/);
    expect(took).toBeGreaterThanOrEqual(200);
    expect(took).toBeLessThan(2000);
    expect(puts).toEqual([]);
    expect(s.list('production')).toEqual([]);
  });

  it('still judges what the injected resolver answers: a public address registers, a private one is refused (422)', async () => {
    const s = service(
      resolver({ 'hooks.example': PUBLIC, 'inside.example': [{ address: '10.1.2.3', family: 4 }] }, 250),
    );
    const ok = await s.create({ url: 'https://hooks.example/hook', events: ['*'] }, 'production');
    expect(ok.url).toBe('https://hooks.example/hook');
    const err = await s.create({ url: 'https://inside.example/hook', events: ['*'] }, 'production').catch((e) => e);
    expect(err).toMatchObject({ type: 'unprocessable', status: 422, param: 'url' });
    // The reason reads the same as for a name that does not resolve: no DNS oracle.
    expect((err as GatewayError).message).toContain('inside.example does not resolve to a public address');
  });

  it('an answer that comes after the bound changes nothing', async () => {
    let late: (() => void) | null = null;
    const s = service({
      timeoutMs: 100,
      lookup: (_h, cb) => {
        late = () => cb(null, PUBLIC);
      },
    });
    const err = await s.create({ url: 'https://slow.invalid/hook', events: ['*'] }, 'production').catch((e) => e);
    expect(err).toMatchObject({ type: 'service_unavailable' });
    (late as unknown as () => void)();
    await new Promise((r) => setTimeout(r, 20));
    expect(s.list('production')).toEqual([]);
  });
});

describe('a delivery attempt resolves the host again, within the bound', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(async () => {
    await rx.close();
  });
  const delivery = () =>
    pendingDelivery(
      {
        environment: 'production',
        endpoint_id: 'we_dns',
        event_id: 'evt_dns',
        event_type: 'wake.error',
        payload: '{}',
        max_attempts: 8,
      },
      Date.now(),
    );

  it('dials what the resolver answered, and checks it on each new connection', async () => {
    const asked: string[] = [];
    const r: Resolver = {
      timeoutMs: 1000,
      lookup: (host, cb) => {
        asked.push(host);
        setImmediate(() => cb(null, [{ address: '127.0.0.1', family: 4 }]));
      },
    };
    const opts = { timeoutMs: 3000, allowInsecure: true, nowMs: Date.now(), resolver: r };
    const ep = endpoint('we_dns', { url: `http://receiver.invalid:${rx.port}/hook` });
    const out = await sendAttempt(delivery(), ep, { ...opts, attempt: 1, allowPrivate: true });
    expect(out).toMatchObject({ ok: true, status: 200 });
    expect(asked).toEqual(['receiver.invalid']);
    expect(rx.got).toHaveLength(1);
    // (A kept-alive connection to the same host is reused: it was checked when dialled.)
    // A host the resolver puts on loopback is refused unless allow_private_networks.
    const inside = endpoint('we_dns', { url: `http://inside.invalid:${rx.port}/hook` });
    const refused = await sendAttempt(delivery(), inside, { ...opts, attempt: 2, allowPrivate: false });
    expect(refused).toMatchObject({ ok: false, status: 0, error: 'ENOTPUBLIC' });
    expect(asked).toEqual(['receiver.invalid', 'inside.invalid']);
    expect(rx.got).toHaveLength(1);
  });

  it('a resolver that does not answer fails the attempt at the DNS bound, well before the attempt timeout, saying so', async () => {
    const ep = endpoint('we_dns', { url: `http://hangs.invalid:${rx.port}/hook` });
    const t0 = performance.now();
    const out = await sendAttempt(delivery(), ep, {
      attempt: 1,
      timeoutMs: 10_000,
      allowPrivate: true,
      allowInsecure: true,
      nowMs: Date.now(),
      resolver: resolver({}, 200),
    });
    const took = performance.now() - t0;
    expect(out).toMatchObject({ ok: false, status: 0, error: 'ETIMEOUT' });
    expect(took).toBeLessThan(3000);
  });
});

describe('through the API', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway(
      { webhooks: { allow_insecure_http: false, allow_private_networks: false } },
      { webhookResolver: resolver({ 'hooks.example': PUBLIC }, 300) },
    );
  });
  afterAll(async () => {
    await t.cleanup();
  });
  const register = (url: string) =>
    fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url, events: ['*'] }),
    });

  it('a host whose lookup hangs: 503 with the error body on url and Retry-After, within the bound', async () => {
    const t0 = performance.now();
    const pending = register('https://hangs.invalid/hook');
    // The gateway answers other calls meanwhile.
    const list = await fetch(`${t.url}/v2/webhooks/endpoints`, { headers: bearer(t.admin) });
    expect(list.status).toBe(200);
    const r = await pending;
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(r.status).toBe(503);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = await r.json();
    expect(body.error).toMatchObject({ type: 'service_unavailable', param: 'url' });
    expect(body.error.message).toContain('did not resolve within 300 ms');
    expect(body.error.retry_after).toBe(Number(r.headers.get('retry-after')));
    // A host the resolver answers with a public address registers.
    expect((await register('https://hooks.example/hook')).status).toBe(201);
  });
});
