import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startGateway } from '../helpers/gateway.js';
import { deadPort, type TestServer } from '../helpers/origin.js';
import { startReceiver } from '../helpers/otlp-receiver.js';
import { get, metric, routes, traceOrigin } from '../helpers/tracing.js';

describe('tracing: a collector that is down or stuck never slows a request nor grows memory', () => {
  let origin: TestServer;
  beforeAll(async () => {
    origin = await traceOrigin();
  });
  afterAll(() => origin.close());

  it('a dead collector port: requests are served, the failed exports counted as dropped', async () => {
    const port = await deadPort();
    const t = await startGateway({
      routes: routes(origin.url),
      tracing: {
        otlp_url: `http://127.0.0.1:${port}/v1/traces`,
        sample_ratio: 1,
        flush_interval_ms: 10,
        max_retries: 0,
      },
    });
    try {
      for (let i = 0; i < 20; i++) expect((await get(`${t.url}/open/${i}`)).status).toBe(200);
      let dropped = 0;
      for (let i = 0; i < 200 && dropped < 40; i++) {
        await new Promise((r) => setTimeout(r, 25));
        dropped = await metric(t.opsUrl, 'wakegate_trace_spans_dropped_total{reason="export_failed"}');
      }
      expect(dropped).toBe(40);
      expect(await metric(t.opsUrl, 'wakegate_trace_spans_exported_total')).toBe(0);
    } finally {
      await t.cleanup();
    }
  });

  it('a collector that never answers: requests are served, the queue stays within queue_size, the stop does not wait', async () => {
    const stuck = await startReceiver({ hang: true });
    const t = await startGateway({
      routes: routes(origin.url),
      tracing: {
        otlp_url: stuck.url,
        sample_ratio: 1,
        queue_size: 10,
        batch_size: 4,
        flush_interval_ms: 10,
        // Longer than the test: the export is still hanging when the gateway stops.
        export_timeout_ms: 30_000,
      },
    });
    try {
      const t0 = performance.now();
      for (let i = 0; i < 60; i++) expect((await get(`${t.url}/open/${i}`)).status).toBe(200);
      // 60 requests well within a second even on a loaded machine: nothing waited on the collector.
      expect(performance.now() - t0).toBeLessThan(10_000);
      expect(stuck.requests.length).toBe(1);
      expect(await metric(t.opsUrl, 'wakegate_trace_spans_queued')).toBeLessThanOrEqual(10);
      // 120 spans: 4 in the stuck request, at most 10 waiting, the rest dropped.
      expect(await metric(t.opsUrl, 'wakegate_trace_spans_dropped_total{reason="queue_full"}')).toBeGreaterThanOrEqual(
        120 - 4 - 10,
      );
      const s0 = performance.now();
      await t.stop();
      expect(performance.now() - s0).toBeLessThan(10_000);
    } finally {
      await t.cleanup();
      await stuck.close();
    }
  });
});

describe('tracing: a collector URL holding credentials', () => {
  it('never logs them (userinfo, a token in the query) when exports fail', async () => {
    const origin = await traceOrigin();
    const port = await deadPort();
    const lines: string[] = [];
    const t = await startGateway(
      {
        routes: routes(origin.url),
        tracing: {
          otlp_url: `http://collector:pa55-s3cret@127.0.0.1:${port}/v1/traces?api_key=t0ken-s3cret`,
          sample_ratio: 1,
          flush_interval_ms: 10,
          max_retries: 0,
        },
      },
      { log: createLogger('debug', (l) => lines.push(l)) },
    );
    try {
      for (let i = 0; i < 5; i++) expect((await get(`${t.url}/open/${i}`)).status).toBe(200);
      let failed: string | undefined;
      for (let i = 0; i < 200 && failed === undefined; i++) {
        await new Promise((r) => setTimeout(r, 25));
        failed = lines.find((l) => l.includes('trace export failed'));
      }
      expect(failed).toBeDefined();
      // Where it was sent is still said: the collector's address.
      expect(failed).toContain(`127.0.0.1:${port}/v1/traces`);
      expect(lines.join('\n')).not.toMatch(/s3cret/);
    } finally {
      await t.cleanup();
      await origin.close();
    }
  });
});
