import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, startReceiver } from '../helpers/otlp-receiver.js';
import { get, routes, traceOrigin } from '../helpers/tracing.js';

// Regression tests from a review of tracing as an attacker (2026-11-27).

/*
 * The defect (fixed; low, interoperability): head sampling ignores OpenTelemetry's explicit randomness
 * value `rv` in the caller's tracestate (`ot=rv:<14 hex digits>`), and so decides differently
 * from the OpenTelemetry samplers the docs promise to agree with.
 *
 * docs/tracing.md, Sampling: the decision follows "OpenTelemetry's consistent probability
 * sampling (TraceState: Probability Sampling ...)" and "Every gateway ... decides alike for a
 * trace, as does an OpenTelemetry SDK's or the Collector's (probabilistic_sampler, proportional
 * mode) consistent sampler at the same ratio". That specification's common source of
 * randomness R is "either an explicit randomness value expressed in the OpenTelemetry
 * TraceState rv sub-key, or taken from the trailing 7 bytes of the trace ID": when `rv` is
 * present it is R (the Collector's pkg/sampling: "rv: an explicit randomness value, which
 * overrides randomness in the TraceID"). src/tracing/context.ts (TraceStart.sampled) only ever
 * reads the trace id's last 14 digits, so for a trace carrying `ot=rv:...` the gateway and every
 * consistent sampler around it disagree, and traces come out incomplete.
 *
 * Correct behaviour: with a valid `ot=rv:` in the caller's tracestate, R is that value.
 */

// R from the trace id: 0x00000000000001 (below the ratio's threshold: "drop");
// R from rv: 0xffffffffffffff (above it: "keep").
const TRACE_LOW_R = '4bf92f3577b34da6a300000000000001';
// R from the trace id: max ("keep"); R from rv: 0 ("drop").
const TRACE_HIGH_R = '4bf92f3577b34da6a3ffffffffffffff';
const PARENT = '00f067aa0ba902b7';

describe('consistent probability sampling: an explicit rv in tracestate is the randomness', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: routes(origin.url),
      // The caller says "not sampled" (00) in every request below: the ratio alone decides.
      tracing: { otlp_url: receiver.url, sample_ratio: 0.5, always_sample: [], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await receiver?.close();
    await origin?.close();
  });

  it('rv:ffffffffffffff is kept at ratio 0.5 (rv >= th), whatever the trace id says', async () => {
    const r = await get(`${t.url}/open/rv-keep`, {
      traceparent: `00-${TRACE_LOW_R}-${PARENT}-00`,
      tracestate: 'ot=rv:ffffffffffffff',
    });
    expect(r.status).toBe(200);
    // The origin's traceparent carries the gateway's decision.
    expect(r.seen.traceparent?.slice(53), `origin received ${r.seen.traceparent}`).toBe('01');
  });

  it('rv:00000000000000 is dropped at ratio 0.5 (rv < th), whatever the trace id says', async () => {
    const r = await get(`${t.url}/open/rv-drop`, {
      traceparent: `00-${TRACE_HIGH_R}-${PARENT}-00`,
      tracestate: 'ot=rv:00000000000000',
    });
    expect(r.status).toBe(200);
    expect(r.seen.traceparent?.slice(53), `origin received ${r.seen.traceparent}`).toBe('00');
  });
});
