import { describe, expect, it } from 'vitest';
import { MAX_PATH, Recorder, type RequestInfo } from '../../src/capture/recorder.js';
import type { Wake } from '../../src/capture/wake.js';
import { ManualClock } from '../../src/clock.js';
import { createMetrics } from '../../src/metrics/index.js';
import { keyRecord } from '../helpers/keys.js';

/** The recorder turns a finished exchange into one wake and its request metrics (issue #35: unit depth). */
describe('the recorder', () => {
  const setup = () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 25, 12));
    const metrics = createMetrics({ process: false });
    const wakes: Wake[] = [];
    const recorder = new Recorder({ clock, metrics, region: 'eu-1', capture: (w) => wakes.push(w) });
    return { clock, metrics, wakes, recorder };
  };
  const req = (url: string, headers: Record<string, string> = {}): RequestInfo => ({
    method: 'POST',
    url,
    headers,
    socket: { remoteAddress: '10.1.2.3' },
  });
  const count = async (m: ReturnType<typeof createMetrics>, labels: Record<string, string>) => {
    const json = await m.registry.getMetricsAsJSON();
    const series = json.find((s) => s.name === 'wakegate_requests_total');
    const v = (series?.values ?? []).find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
    return v?.value ?? 0;
  };

  it('records a wake once with what the exchange learned, and counts it by route, method and status class', async () => {
    const { clock, metrics, wakes, recorder } = setup();
    const x = recorder.begin();
    expect(recorder.open).toBe(1);
    x.route = 'orders';
    x.key = keyRecord('key_1', 'sandbox');
    x.consumer = 'acme';
    x.environment = 'sandbox';
    x.status = 201;
    x.reqBytes = 12;
    x.resBytes = 34;
    x.tUp = performance.now();
    recorder.finish(req('/orders/9?page=2', { 'user-agent': 'curl/8' }), x);
    recorder.finish(req('/orders/9?page=2'), x);
    expect(recorder.open).toBe(0);
    expect(wakes).toHaveLength(1);
    expect(wakes[0]).toMatchObject({
      id: x.id,
      method: 'POST',
      path: '/orders/9',
      path_truncated: false,
      refused: false,
      route: 'orders',
      status: 201,
      consumer: 'acme',
      key_id: 'key_1',
      environment: 'sandbox',
      region: 'eu-1',
      captured_at: clock.now(),
      request_bytes: 12,
      response_bytes: 34,
      client_ip: '10.1.2.3',
      user_agent: 'curl/8',
    });
    expect(await count(metrics, { route: 'orders', method: 'POST', status_class: '2xx' })).toBe(1);
  });

  it('a refused exchange (never upstream) is a refused wake; a sampled-out one is counted and not stored', async () => {
    const { metrics, wakes, recorder } = setup();
    const refused = recorder.begin();
    refused.route = 'none';
    refused.status = 404;
    recorder.finish(req('/nowhere'), refused);
    const flood = recorder.begin();
    flood.route = 'orders';
    flood.status = 429;
    flood.sampledOut = true;
    recorder.finish(req('/orders'), flood);
    expect(wakes.map((w) => [w.route, w.status, w.refused])).toEqual([['none', 404, true]]);
    expect(await count(metrics, { route: 'orders', status_class: '4xx' })).toBe(1);
    const sampled = (await metrics.registry.getMetricsAsJSON()).find(
      (s) => s.name === 'wakegate_wakes_sampled_out_total',
    );
    expect(sampled?.values[0]?.value).toBe(1);
  });

  it('never stores a gateway key from the path, consumer or user agent, and cuts a long path saying so', () => {
    const { wakes, recorder } = setup();
    const secret = `svc_test_${'a1B2c3D4'.repeat(4)}`;
    const x = recorder.begin();
    x.route = 'r';
    x.consumer = `c ${secret}`;
    recorder.finish(req(`/p/${secret}?q=1`, { 'user-agent': `ua ${secret}` }), x);
    const long = recorder.begin();
    long.route = 'r';
    recorder.finish(req(`/${'x'.repeat(MAX_PATH + 10)}`), long);
    const text = JSON.stringify(wakes);
    expect(text).not.toContain(secret);
    expect(wakes[1]?.path).toHaveLength(MAX_PATH);
    expect(wakes[1]?.path_truncated).toBe(true);
  });
});
