import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, startReceiver } from '../helpers/otlp-receiver.js';
import { get, routes, traceOrigin } from '../helpers/tracing.js';

// Regression tests from a review of tracing as an attacker (2026-11-27).

/*
 * The defect (fixed; low): with tracing on (`tracing.otlp_url` set), the W3C Level 2 "random"
 * trace-flag (0x02) a caller sent is dropped from the `traceparent` the origin receives:
 * the gateway writes its flags as '01' or '00' only (src/tracing/context.ts, TraceStart.begin).
 *
 * Documented behaviour (docs/tracing.md, "What every request gets"): the origin's
 * traceparent "flags are the sampled flag (01: with tracing on, the gateway's sampling
 * decision; off, the client's) and W3C's random flag (02) as they came". W3C Trace Context
 * Level 2 §3.2.2.5 (random trace-id flag) likewise expects the flag to travel with the trace
 * id it describes; downstream consistent samplers (the gateway's own docs point at them)
 * rely on it. With tracing off the flag is passed (test/integration/trace-flags-passed.test.ts);
 * turning tracing on must not lose it.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

describe('tracing on: the random flag (02) of a valid traceparent reaches the origin', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;
  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: routes(origin.url),
      // Ratio 0 and follow never: the gateway decides "not sampled" for every request.
      tracing: { otlp_url: receiver.url, sample_ratio: 0, follow_sampled: 'never', flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await receiver?.close();
    await origin?.close();
  });

  it('flags 02 (random, not sampled): the origin gets flags 02', async () => {
    const r = await get(`${t.url}/open/random`, { traceparent: `00-${TRACE}-${PARENT}-02` });
    expect(r.status).toBe(200);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(r.seen.traceparent ?? '');
    expect(m?.[1]).toBe(TRACE);
    expect(m?.[3], `origin received ${r.seen.traceparent}`).toBe('02');
  });

  it('flags 03 (random and sampled, not followed): the origin gets the decision (00) with the random bit, 02', async () => {
    const r = await get(`${t.url}/open/random-sampled`, { traceparent: `00-${TRACE}-${PARENT}-03` });
    expect(r.status).toBe(200);
    const flags = Number.parseInt((r.seen.traceparent ?? '').slice(53, 55), 16);
    expect(flags & 0x01).toBe(0);
    expect(flags & 0x02, `origin received ${r.seen.traceparent}`).toBe(0x02);
  });
});
