import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSigningSecret } from '../../src/auth/secrets.js';
import { trafficBound } from '../../src/webhooks/fanout.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('webhook safety', () => {
  let t: TestGateway;
  let rx: Receiver;
  let logs = '';

  beforeAll(async () => {
    rx = await startReceiver();
    rx.answer = () => {}; // never answers: the queue stays full
    const { createLogger } = await import('../../src/log.js');
    t = await startGateway(
      {
        webhooks: {
          allow_insecure_http: true,
          allow_private_networks: false,
          max_queued_events: 100,
          max_concurrency: 4,
          max_per_endpoint: 4,
          timeout_ms: 60_000,
        },
      },
      {
        log: createLogger('info', (l) => {
          logs += l;
        }),
      },
    );
  });
  afterAll(async () => {
    rx.server.closeAllConnections();
    await t.cleanup();
    await rx.close();
  });

  it('refuses to register non-public hosts (SSRF)', async () => {
    for (const url of [
      'http://127.0.0.1/x',
      'http://10.0.0.1/x',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://localhost/x',
      'http://0.0.0.0/x',
      'http://user:pw@example.com/x',
    ]) {
      const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: JSON.stringify({ url, events: ['*'] }),
      });
      expect(r.status, url).toBe(422);
      expect((await r.json()).error, url).toMatchObject({ type: 'unprocessable', param: 'url' });
    }
  });

  // Regression test (a review): the 2048-character bound was checked on the URL as given, and
  // 2000 'é' were stored and sent as about 12,000 characters once percent-encoded.
  it('bounds the URL as it is stored and sent (percent-encoded), not only as given', async () => {
    const r = await fetch(`${t.url}/v2/webhooks/endpoints`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ url: `https://example.com/${'é'.repeat(1100)}`, events: ['*'] }),
    });
    expect(r.status).toBe(422);
    const e = (await r.json()).error;
    expect(e).toMatchObject({ type: 'unprocessable', param: 'url' });
    expect(e.message).toContain('2048');
  });

  it('resolves and filters when sending too, so a name that now points at loopback is never dialed', async () => {
    // As if the name resolved publicly at registration and was rebound to loopback later.
    const now = Date.now();
    const ep = {
      id: 'we_rebound000000000000',
      environment: 'production',
      url: `http://localhost:${rx.port}/hook`,
      events: ['key.rotated'],
      secret: newSigningSecret(),
      status: 'enabled' as const,
      previous_secret: '',
      previous_secret_until: null,
      created_at: now,
      first_410_at: null,
      disabled_at: null,
      updated_at: now,
    };
    await t.gw.endpointTable.put(ep);
    t.gw.endpoints.apply(ep);
    t.gw.events.emit('key.rotated', 'production', { x: 1 });
    await t.gw.events.flush();
    await until(
      async () => {
        const page = await (
          await fetch(`${t.url}/v2/webhooks/deliveries?endpoint_id=${ep.id}`, { headers: bearer(t.admin) })
        ).json();
        return page.data[0]?.status === 'failed';
      },
      5000,
      'failed attempt',
    );
    const [d] = (
      await (await fetch(`${t.url}/v2/webhooks/deliveries?endpoint_id=${ep.id}`, { headers: bearer(t.admin) })).json()
    ).data;
    expect(d.response_body).toBe('ENOTPUBLIC');
    expect(rx.got.length).toBe(0);
    expect(logs).not.toContain(ep.secret.slice(6));
  });

  it('sheds deliveries past the queue bound, counting and logging them', async () => {
    // The endpoint is a loopback literal, so every attempt is refused at once and stays queued for a retry.
    const now = Date.now();
    const ep = {
      id: 'we_storm00000000000000',
      environment: 'production',
      url: `http://127.0.0.1:${rx.port}/storm`,
      events: ['wake.error'],
      secret: newSigningSecret(),
      status: 'enabled' as const,
      previous_secret: '',
      previous_secret_until: null,
      created_at: now,
      first_410_at: null,
      disabled_at: null,
      updated_at: now,
    };
    t.gw.endpoints.apply(ep);
    const before = t.gw.dispatcher.queued;
    for (let i = 0; i < 1000; i++) t.gw.events.emit('wake.error', 'production', { i });
    await t.gw.events.flush();
    // wake.error fills nine tenths of the queue (100): the rest is kept for other events.
    const bound = trafficBound(100);
    await until(() => t.gw.fanout.shed >= 1000 - (bound - before), 5000, 'shedding');
    expect(t.gw.dispatcher.queued).toBeLessThanOrEqual(bound);
    expect(t.gw.fanout.shed).toBe(1000 - (bound - before));
    const metrics = await (await fetch(`${t.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`wakegate_events_shed_total\\{type="wake.error"\\} ${t.gw.fanout.shed}`));
    expect(logs).toContain('webhook queue full');
  });
});
