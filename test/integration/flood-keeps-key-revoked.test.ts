// Regression tests from a review of the event rules (2026-11-27).
// Defect (isolation of the delivery queue): the queue bound `max_queued_events` is one
// count for the whole gateway (src/webhooks/fanout.ts fanOut: `dispatcher.queued + rows.length
// >= max_queued_events`, src/webhooks/dispatcher.ts room()), so wake.error deliveries of a
// sandbox key's failing requests, retried against a sandbox endpoint that answers 500, hold
// the queue (for ~18 h) and production's key.revoked to a healthy production endpoint is
// shed: never delivered. docs/security.md: "sandbox failures ... must not fire, or silence,
// production alerts"; docs/events.md: an endpoint gets "only events of its own environment"
// (and one environment's traffic should not decide what another receives).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('a sandbox wake.error flood and a production key.revoked', () => {
  let origin: TestServer;
  let t: TestGateway;
  let broken: Receiver;
  let healthy: Receiver;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const api = (secret: string, method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(secret), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.writeHead(500);
      res.end('boom');
    });
    broken = await startReceiver(clock);
    broken.answer = (_q, res) => {
      res.writeHead(500);
      res.end('down');
    };
    healthy = await startReceiver(clock);
    t = await startGateway(
      {
        routes: [
          {
            name: 'api',
            prefix: '/api',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: origin.url, sandbox: origin.url },
          },
        ],
        webhooks: { allow_insecure_http: true, allow_private_networks: true, max_queued_events: 50, timeout_ms: 300 },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await Promise.all([origin.close(), broken.close(), healthy.close()]);
  });

  it("delivers production's key.revoked whatever sandbox traffic did to sandbox's queue", async () => {
    const sbx = await t.gw.keys.create(
      { label: 'sbx', environment: 'sandbox', scopes: ['api:read', 'webhooks:write', 'webhooks:read'] },
      'sandbox',
    );
    expect((await api(sbx.secret, 'POST', '/v2/webhooks/endpoints', { url: broken.url, events: ['*'] })).status).toBe(
      201,
    );
    expect(
      (await api(t.admin, 'POST', '/v2/webhooks/endpoints', { url: healthy.url, events: ['key.revoked'] })).status,
    ).toBe(201);
    // A sandbox key's requests to an origin that fails: 60 wake.error events in sandbox.
    for (let i = 0; i < 60; i++) await (await api(sbx.secret, 'GET', '/api/x')).arrayBuffer();
    // As many as traffic events may fill of the queue (nine tenths of 50), each attempted once.
    await until(() => broken.got.length >= 45, 10_000, 'sandbox first attempts');
    // Production: a key is revoked; its endpoint answers 200 at once.
    const victim = await t.gw.keys.create(
      { label: 'leaked', environment: 'production', scopes: ['api:read'] },
      'production',
    );
    expect((await api(t.admin, 'DELETE', `/v2/api-keys/${victim.key.id}`)).status).toBe(200);
    await until(() => healthy.got.length >= 1, 5_000, 'production key.revoked delivered').catch(() => {});
    // It was shed by the fan-out (counted in wakegate_events_shed_total{type="key.revoked"}).
    expect(
      healthy.got.map((g) => JSON.parse(g.body).data.key.id),
      `queued ${t.gw.dispatcher.queued}, shed ${t.gw.fanout?.shed}`,
    ).toEqual([victim.key.id]);
  });
});
