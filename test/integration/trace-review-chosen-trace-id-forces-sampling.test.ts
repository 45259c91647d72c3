import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, startReceiver } from '../helpers/otlp-receiver.js';
import { get, metric, routes, traceOrigin } from '../helpers/tracing.js';

// Regression tests from a review of tracing as an attacker (2026-11-27).

/*
 * The defect (fixed; medium, cost amplification): `tracing.follow_sampled: never` (or `trusted`) is
 * documented as the way to stop untrusted clients from having all their requests exported:
 * docs/tracing.md, Sampling: "`never` (the ratio alone decides). On a public API, `trusted`
 * or `never` keeps clients from having every one of their requests exported (about 4 to 8 us
 * of CPU each, and room in the queue that other requests' spans then lose)."
 *
 * But head sampling is decided from the caller's own trace id (R = its last 14 hex digits,
 * sampled when R >= T; src/tracing/context.ts TraceStart.sampled), and the caller picks that
 * id freely. A client that sends `traceparent: 00-<anything>ffffffffffffff-<parent>-00`
 * (sampled flag NOT set, so follow_sampled never comes into it) is head-sampled at every
 * ratio above 0: with `sample_ratio: 0.01, follow_sampled: never` every one of its requests
 * is exported, exactly what `never` is documented to prevent. A fresh id per request even
 * defeats per-trace dedup in the collector.
 *
 * Correct behaviour: with follow_sampled `never` (or `trusted` and an untrusted peer) the
 * gateway's decision must not be steerable by the client: about `sample_ratio` of an
 * untrusted client's requests are exported whatever trace ids it sends (e.g. the randomness
 * drawn by the gateway or keyed with a gateway secret for callers whose decision is not
 * followed), or the docs must stop promising it.
 */

const N = 40;

describe('follow_sampled: never — a client cannot choose its way into head sampling', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: routes(origin.url),
      tracing: {
        otlp_url: receiver.url,
        sample_ratio: 0.01,
        follow_sampled: 'never',
        always_sample: [],
        flush_interval_ms: 20,
      },
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await receiver?.close();
    await origin?.close();
  });

  it(`${N} requests with "not sampled" flags and crafted trace ids: about 1% exported, not all`, async () => {
    for (let i = 0; i < N; i++) {
      // 18 random hex digits, then the 14 "random" digits the sampler reads, all f: R = 2^56 - 1.
      const trace = `${randomBytes(9).toString('hex')}ffffffffffffff`;
      const r = await get(`${t.url}/open/crafted/${i}`, { traceparent: `00-${trace}-00f067aa0ba902b7-00` });
      expect(r.status).toBe(200);
    }
    // Let the exporter (20 ms flush) send whatever was chosen.
    await new Promise((r) => setTimeout(r, 1500));
    const exported = await metric(t.opsUrl, 'wakegate_trace_spans_exported_total');
    const servers = receiver.spans.filter((s) => s.kind === 2).length;
    // At 1%, 40 requests export 0 to a handful; anywhere near all 40 means the client decided.
    expect(
      servers,
      `SERVER spans exported for ${N} unsampled requests at ratio 0.01 (metric: ${exported})`,
    ).toBeLessThan(10);
  });
});
