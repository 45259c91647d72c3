// Regression tests from a review of tracing (2026-11-28): a gateway key at the end of a long User-Agent reaches the collector in part.
// capture/recorder.ts cuts the user agent at 512 characters and only then replaces gateway keys
// (withoutGatewayKeys(ua.slice(0, MAX_UA))): a key the cut leaves with fewer than 32 of its
// characters no longer reads as a key, so its first 31 secret characters stay, in the wake and
// in the SERVER span's user_agent.original exported to the collector ("A gateway key is never
// stored, nor printed ..., wherever a client put it").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import type { TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, type ReceivedSpan, startReceiver } from '../helpers/otlp-receiver.js';
import { traceOrigin } from '../helpers/tracing.js';

const SERVER = 2;

describe('review tracing: a key cut by the user agent bound', () => {
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

  it('exports no part of the secret', async () => {
    const secret = newSecret();
    const key = `svc_live_${secret}`;
    // 472 + 9 + 31 = 512: the cut leaves 31 characters of the secret.
    const ua = `${'a'.repeat(471)} ${key}`;
    const r = await fetch(`${t.url}/open/x`, { headers: { 'user-agent': ua } });
    await r.arrayBuffer();
    const spans: ReceivedSpan[] = await receiver.waitFor(1);
    const server = spans.find((s) => s.kind === SERVER) as ReceivedSpan;
    expect(server).toBeDefined();
    expect(String(server.attributes['user_agent.original'] ?? '')).not.toContain(secret.slice(0, 20));
  });
});
