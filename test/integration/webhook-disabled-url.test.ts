// Regression test: webhook.disabled must not carry the disabled endpoint's URL secrets (2026-11-27).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { shownUrl } from '../../src/webhooks/endpoints.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startReceiver } from '../helpers/receiver.js';

/*
 * webhook.disabled goes to the OTHER endpoints of the environment (possibly third-party
 * receivers). An endpoint URL often is a capability (Slack's /services/T000/B000/XXXX, a
 * `?token=`): the event names the endpoint by its id and shows only the URL's scheme,
 * host and port. One gateway with an injected clock (the 7 days never slept through),
 * real receivers on 127.0.0.1.
 */
describe('webhook.disabled does not leak the disabled endpoint URL', () => {
  const DAY = 86_400_000;
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12, 0, 0));
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const register = async (url: string, events: string[]) => {
    const r = await api('POST', '/v2/webhooks/endpoints', { url, events });
    expect(r.status).toBe(201);
    return r.json();
  };

  beforeAll(async () => {
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 1000 } },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('sends the endpoint id and scheme://host:port/… only: no secret path segment, query token or signing secret', async () => {
    const PATH_SECRET = 'XoxbPathSecret7f3a9c';
    const QUERY_SECRET = 'qtokQuerySecret51d2e8';
    const gone = await startReceiver(clock);
    gone.answer = (_q, res) => {
      res.writeHead(410);
      res.end();
    };
    const watcher = await startReceiver(clock);
    try {
      const secretUrl = `${gone.url}/services/T000/B000/${PATH_SECRET}?token=${QUERY_SECRET}`;
      const g = await register(secretUrl, ['key.rotated']);
      await register(watcher.url, ['webhook.disabled']);
      const day0 = clock.now();
      for (let d = 0; d <= 7; d++) {
        clock.set(day0 + d * DAY);
        const before = gone.got.length;
        t.gw.events.emit('key.rotated', 'production', { n: d });
        await t.gw.events.flush();
        await gone.waitFor(before + 1);
        await new Promise((r) => setTimeout(r, 150));
        await t.gw.dispatcher.idle();
      }
      const [note] = await watcher.waitFor(1);
      const body = note?.body ?? '';
      const ev = JSON.parse(body);
      expect(ev).toMatchObject({ type: 'webhook.disabled', data: { endpoint: { id: g.id, status: 'disabled' } } });
      expect(body).toContain(g.id);
      // Nothing of the URL's path or query, nor the endpoint's signing secret, anywhere in the body.
      expect(body).not.toContain(PATH_SECRET);
      expect(body).not.toContain(QUERY_SECRET);
      expect(body).not.toContain('/services/T000');
      expect(body).not.toContain(g.secret);
      expect(body).not.toContain(g.secret.slice(6));
      expect(ev.data.endpoint.secret).toBeUndefined();
      expect(ev.data.endpoint.url).toBe(`http://127.0.0.1:${gone.port}/…`);
      // Its authorized callers still read the whole URL.
      const list = await (await api('GET', '/v2/webhooks/endpoints?limit=100')).json();
      expect(list.data.find((e: { id: string }) => e.id === g.id).url).toBe(secretUrl);
    } finally {
      await Promise.all([gone.close(), watcher.close()]);
    }
  });
});

describe('shownUrl: what an event tells of an endpoint URL', () => {
  it('keeps scheme, host and port only, never path, query, fragment or credentials', () => {
    expect(shownUrl('https://hooks.slack.com/services/T000/B000/XXXXXXXX')).toBe('https://hooks.slack.com/…');
    expect(shownUrl('https://user:pass@example.com:8443/hook?token=abc#frag')).toBe('https://example.com:8443/…');
    expect(shownUrl('https://example.com:443/x')).toBe('https://example.com/…');
    expect(shownUrl('http://[::1]:9000/t?token=abc')).toBe('http://[::1]:9000/…');
    expect(shownUrl('https://example.com')).toBe('https://example.com/…');
    expect(shownUrl('not a url ?token=abc')).toBe('…');
  });
});
