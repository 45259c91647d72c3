import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { HotCounter, HotHistogram } from '../../src/metrics/hot.js';

// The hot-path instruments must print exactly what prom-client's own would for the
// same observations: dashboards and alerts written against them keep working.
describe('hot-path metrics', () => {
  const buckets = [0.00001, 0.000025, 0.0001, 0.001, 0.01];
  const samples = [0, 0.00001, 0.0000100001, 0.00002, 0.0005, 0.001, 0.5, 7, 0.000025];

  it('print the same exposition as prom-client for the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const hc = new HotCounter({ name: 'x_requests_total', help: 'Requests', labelNames: ['route', 'method'] as const });
    const hh = new HotHistogram({
      name: 'x_latency_seconds',
      help: 'Latency',
      labelNames: ['route'] as const,
      buckets,
    });
    ours.registerMetric(hc as never);
    ours.registerMetric(hh as never);
    const pc = new Counter({
      name: 'x_requests_total',
      help: 'Requests',
      labelNames: ['route', 'method'],
      registers: [theirs],
    });
    const ph = new Histogram({
      name: 'x_latency_seconds',
      help: 'Latency',
      labelNames: ['route'],
      buckets,
      registers: [theirs],
    });
    for (const [i, v] of samples.entries()) {
      const route = i % 3 === 0 ? 'orders' : 'users "v2"\\n';
      hh.labels(route).observe(v);
      ph.labels(route).observe(v);
      hc.labels(route, i % 2 ? 'GET' : 'POST').inc();
      pc.labels(route, i % 2 ? 'GET' : 'POST').inc();
    }
    hc.labels('orders', 'GET').inc(5);
    pc.labels('orders', 'GET').inc(5);
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain('x_latency_seconds_bucket{le="0.000025",route="orders"} 2');
    expect(text).toContain('x_requests_total{route="orders",method="GET"} 6');
  });

  it('hands back the same child for the same label values, and refuses a wrong count', () => {
    const hc = new HotCounter({ name: 'y_total', help: 'y', labelNames: ['a', 'b'] as const });
    expect(hc.labels('1', '2')).toBe(hc.labels('1', '2'));
    expect(hc.labels('1', '2')).not.toBe(hc.labels('12', ''));
    expect(() => hc.labels('1')).toThrow(/takes 2 label values/);
    hc.labels('1', '2').inc();
    expect(hc.get().values).toEqual([
      { labels: { a: '1', b: '2' }, value: 1 },
      { labels: { a: '12', b: '' }, value: 0 },
    ]);
    // A reset zeroes the children in place: one a caller holds keeps counting.
    const held = hc.labels('1', '2');
    hc.reset();
    held.inc(2);
    expect(hc.get().values).toEqual([
      { labels: { a: '1', b: '2' }, value: 2 },
      { labels: { a: '12', b: '' }, value: 0 },
    ]);
    const hh = new HotHistogram({ name: 'z_seconds', help: 'z', labelNames: ['r'] as const, buckets: [1] });
    const child = hh.labels('x');
    child.observe(0.5);
    hh.reset();
    child.observe(2);
    expect(hh.get().values.map((v) => v.value)).toEqual([0, 1, 2, 1]);
  });
});

describe('label positions', () => {
  it('agree with the label functions for every method and status the recorder can see', async () => {
    const { METHOD_COUNT, STATUS_CLASS_COUNT, methodIndex, methodLabel, statusClass, statusClassIndex } = await import(
      '../../src/metrics/index.js'
    );
    const byIndex = new Map<number, string>();
    for (const m of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'get', 'PURGE', '', undefined]) {
      const i = methodIndex(m);
      expect(i).toBeGreaterThanOrEqual(0);
      expect(i).toBeLessThan(METHOD_COUNT);
      expect(byIndex.get(i) ?? methodLabel(m)).toBe(methodLabel(m));
      byIndex.set(i, methodLabel(m));
    }
    expect(methodLabel('PURGE')).toBe('OTHER');
    const classes = new Map<number, string>();
    for (const s of [-1, 0, 99, 101, 200, 299, 301, 404, 499, 502, 599, 600, 999, Number.NaN]) {
      const i = statusClassIndex(s);
      expect(i).toBeGreaterThanOrEqual(0);
      expect(i).toBeLessThan(STATUS_CLASS_COUNT);
      expect(classes.get(i) ?? statusClass(s)).toBe(statusClass(s));
      classes.set(i, statusClass(s));
    }
  });
});
