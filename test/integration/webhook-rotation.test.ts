import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { endpointView } from '../../src/webhooks/endpoints.js';
import { LocalQueue } from '../../src/webhooks/local-queue.js';
import type { EndpointRecord } from '../../src/webhooks/records.js';
import { endpointSender } from '../../src/webhooks/sender.js';
import { verifySignature } from '../../src/webhooks/signer.js';
import { testDelivery } from '../../src/webhooks/test-delivery.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Received, type Receiver, startReceiver } from '../helpers/receiver.js';
import { endpoint, endpointService, MemoryRows, webhooksConfig } from '../helpers/webhook-fakes.js';

/*
 * Secret rotation: a secret rotated away keeps signing alongside the new one for 24 h,
 * and that holds for each secret when the operator rotates again within the 24 h
 * (A -> B -> C): a receiver that still only knows A verifies until A's own 24 h end.
 * Through the real dispatcher and sender to a real receiver on loopback, with the
 * injected clock; and through the API, storage and a restart.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

/** Which of `secrets` a received delivery verifies with, on both signature schemes (checked independently). */
function verifiedBy(g: Received, secrets: Record<string, string>, nowMs: number): string[] {
  const stripe = String(g.headers['x-service-signature']);
  const standard = String(g.headers['webhook-signature']).split(' ');
  const out: string[] = [];
  for (const [name, s] of Object.entries(secrets)) {
    const v1 = verifySignature(g.body, stripe, s, 300, Math.floor(nowMs / 1000));
    const mac = createHmac('sha256', Buffer.from(s.slice(6), 'base64'))
      .update(`${g.headers['webhook-id']}.${g.headers['webhook-timestamp']}.${g.body}`)
      .digest('base64');
    const std = standard.includes(`v1,${mac}`);
    expect(std, `${name}: both schemes agree`).toBe(v1);
    if (v1) out.push(name);
  }
  return out;
}

describe('rotating a secret again within 24 h, through the dispatcher and sender', () => {
  const clock = new ManualClock(T0);
  let rx: Receiver;
  const cfg = webhooksConfig({ allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 3000 });
  const { service } = endpointService(cfg, clock, []);
  const dispatcher = new Dispatcher({
    cfg,
    queue: new LocalQueue({ rows: new MemoryRows(), spool: null, clock, log: silentLogger }),
    endpoints: service,
    send: endpointSender(cfg, service),
    clock,
    log: silentLogger,
    metrics: createMetrics({ process: false }),
  });
  /** Sends a test event to `ep` now; returns what the receiver got. */
  const send = async (ep: EndpointRecord): Promise<Received> => {
    const before = rx.got.length;
    await testDelivery({ dispatcher, clock, endpoint: ep, maxAttempts: 8 });
    await dispatcher.idle();
    const [got] = (await rx.waitFor(before + 1)).slice(before);
    return got as Received;
  };
  const v1Count = (g: Received) => (String(g.headers['x-service-signature']).match(/v1=/g) ?? []).length;

  beforeAll(async () => {
    rx = await startReceiver(clock);
  });
  afterAll(async () => {
    await dispatcher.stop();
    await rx.close();
  });

  it('A -> B -> C within 24 h: each secret rotated away signs until its own 24 h end, then stops', async () => {
    clock.set(T0);
    const created = await service.create({ url: `${rx.url}/hook`, events: ['*'] }, 'production');
    const A = created.secret;
    clock.set(T0 + HOUR);
    const B = (await service.rotateSecret(created.id, 'production')).secret;
    clock.set(T0 + 2 * HOUR);
    const rotated = await service.rotateSecret(created.id, 'production');
    const C = rotated.secret;
    expect(new Set([A, B, C]).size).toBe(3);
    // Until when a secret rotated away still signs: the newest one's end (B's, at T0 + 26 h).
    expect(endpointView(rotated).previous_secret_expires_at).toBe(new Date(T0 + 2 * HOUR + DAY).toISOString());
    const secrets = { A, B, C };
    const ep = () => service.get(created.id) as EndpointRecord;

    // The receiver that still knows only A (the operator rotated twice quickly) verifies.
    let got = await send(ep());
    expect(verifiedBy(got, secrets, clock.now())).toEqual(['A', 'B', 'C']);
    expect(v1Count(got)).toBe(3);
    // The current secret signs first.
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(3);

    // Just before A's 24 h end (it was rotated away at T0 + 1 h): still A.
    clock.set(T0 + HOUR + DAY - 1000);
    got = await send(ep());
    expect(verifiedBy(got, secrets, clock.now())).toEqual(['A', 'B', 'C']);
    // A's own 24 h are over: B (rotated away an hour later) still signs.
    clock.set(T0 + HOUR + DAY);
    got = await send(ep());
    expect(verifiedBy(got, secrets, clock.now())).toEqual(['B', 'C']);
    expect(v1Count(got)).toBe(2);
    // And B's: only C.
    clock.set(T0 + 2 * HOUR + DAY);
    got = await send(ep());
    expect(verifiedBy(got, secrets, clock.now())).toEqual(['C']);
    expect(v1Count(got)).toBe(1);
    expect(endpointView(ep()).previous_secret_expires_at).toBe(new Date(T0 + 2 * HOUR + DAY).toISOString());

    // A rotation after every earlier secret's overlap ended keeps only the one it replaces.
    clock.set(T0 + 3 * DAY);
    const D = (await service.rotateSecret(created.id, 'production')).secret;
    got = await send(ep());
    expect(verifiedBy(got, { ...secrets, D }, clock.now())).toEqual(['C', 'D']);
  });

  it('keeps at most four secrets rotated away signing: a fifth rotation within 24 h ends the oldest early', async () => {
    const t1 = T0 + 10 * DAY;
    clock.set(t1);
    const created = await service.create({ url: `${rx.url}/hook`, events: ['*'] }, 'production');
    const secrets: Record<string, string> = { s0: created.secret };
    for (let i = 1; i <= 5; i++) {
      clock.set(t1 + i * 60_000);
      secrets[`s${i}`] = (await service.rotateSecret(created.id, 'production')).secret;
    }
    const got = await send(service.get(created.id) as EndpointRecord);
    // The current secret and the four rotated away last; s0 (the oldest) no longer signs.
    expect(verifiedBy(got, secrets, clock.now())).toEqual(['s1', 's2', 's3', 's4', 's5']);
    expect(v1Count(got)).toBe(5);
  });

  it('an endpoint stored with one previous secret (as before) still signs with it until its time', async () => {
    const t2 = T0 + 20 * DAY;
    clock.set(t2);
    const old = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/hjlShFr7Gk=';
    const cur = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD/fjEKdYhRIs=';
    service.apply(
      endpoint('we_legacy', {
        url: `${rx.url}/hook`,
        secret: cur,
        previous_secret: old,
        previous_secret_until: t2 + HOUR,
        updated_at: t2,
      }),
    );
    const ep = () => service.get('we_legacy') as EndpointRecord;
    expect(endpointView(ep()).previous_secret_expires_at).toBe(new Date(t2 + HOUR).toISOString());
    let got = await send(ep());
    expect(verifiedBy(got, { old, cur }, clock.now())).toEqual(['old', 'cur']);
    // Rotating it again keeps the stored previous secret until its own time, too.
    clock.set(t2 + 30 * 60_000);
    const next = (await service.rotateSecret('we_legacy', 'production')).secret;
    got = await send(ep());
    expect(verifiedBy(got, { old, cur, next }, clock.now())).toEqual(['old', 'cur', 'next']);
    clock.set(t2 + HOUR);
    got = await send(ep());
    expect(verifiedBy(got, { old, cur, next }, clock.now())).toEqual(['cur', 'next']);
  });
});

describe('rotating twice through the API, kept in storage across a restart', () => {
  const clock = new ManualClock(T0);
  const values = { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0 } };
  let t: TestGateway;
  let rx: Receiver;
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };

  beforeAll(async () => {
    rx = await startReceiver(clock);
    t = await startGateway(values, { clock });
  });
  afterAll(async () => {
    await t.cleanup();
    await rx.close();
  });

  it('a receiver on the first secret still verifies after two rotations and a restart', async () => {
    const created = await api('POST', '/v2/webhooks/endpoints', { url: `${rx.url}/hook`, events: ['*'] });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const A = created.body.secret as string;
    clock.advance(HOUR);
    const B = (await api('POST', `/v2/webhooks/endpoints/${id}/rotate-secret`)).body.secret as string;
    clock.advance(HOUR);
    const second = await api('POST', `/v2/webhooks/endpoints/${id}/rotate-secret`);
    expect(second.status).toBe(200);
    const C = second.body.secret as string;
    expect(second.body.previous_secret_expires_at).toBe(new Date(clock.now() + DAY).toISOString());
    expect(second.body).not.toHaveProperty('previous_secret');

    // Every instance (and this one after a restart) reads the endpoint from storage.
    await t.stop();
    t = await startGateway(values, { clock, dir: t.dir, admin: t.admin });
    const read = await api('GET', `/v2/webhooks/endpoints/${id}`);
    expect(read.body.previous_secret_expires_at).toBe(second.body.previous_secret_expires_at);

    expect((await api('POST', `/v2/webhooks/endpoints/${id}/test`)).status).toBe(201);
    const [got] = await rx.waitFor(1);
    expect(verifiedBy(got as Received, { A, B, C }, clock.now())).toEqual(['A', 'B', 'C']);
  });
});
