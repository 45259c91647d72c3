// Regression tests from a review of tracing (2026-11-28): the CLIENT span's url.full is as long as the client made its path.
// The SERVER span's url.path is the wake's path, cut at 2048 characters (capture/recorder.ts
// MAX_PATH, wake.path_truncated); the CLIENT span of the same request writes url.full from
// x.upstreamPath (src/tracing/spans.ts), never cut: a client picks its size, up to
// server.max_header_bytes (16 KiB by default, no upper bound in the schema) or HTTP/2's
// max_header_list_bytes (64 KiB by default, up to 1 MiB), in every exported span.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';
import { get, traceOrigin } from '../helpers/tracing.js';

const CLIENT = 3;
const SERVER = 2;

describe('review tracing: url.full of a long path', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await traceOrigin();
    receiver = await startReceiver();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      tracing: { otlp_url: receiver.url, sample_ratio: 1, flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await origin.close();
  });

  it('bounds url.full as url.path is bounded', async () => {
    const long = `/open/${'a'.repeat(12_000)}`;
    const r = await get(`${t.url}${long}`);
    expect(r.status).toBe(200);
    const spans: ReceivedSpan[] = await receiver.waitFor(2);
    const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
    const client = spans.find((s) => s.kind === CLIENT) as ReceivedSpan;
    const path = String(server.attributes['url.path']);
    expect(path.length).toBeLessThanOrEqual(2048);
    const full = String(client.attributes['url.full']);
    // url.full is the origin and the path: no longer than the bounded path plus the origin.
    expect(full.length).toBeLessThanOrEqual(origin.url.length + 2048);
  });
});
