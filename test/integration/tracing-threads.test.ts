import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type OtlpReceiver, startReceiver } from '../helpers/otlp-receiver.js';

// Runs again on the Node LTS (scripts/test-on-lts.sh), where the child gateway serves with two edge threads.

/**
 * Edge threads hand their requests' span inputs to the control thread (the thread
 * protocol's `spans`), which builds and exports them: every thread's requests reach
 * the collector, each with the trace the origin was told.
 */
describe('tracing with edge threads', () => {
  let origin: TestServer;
  let receiver: OtlpReceiver;
  let dir: string;
  let g: ChildGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end(req.headers.traceparent ?? '');
    });
    receiver = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-tracing-threads-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server: { threads: 2 }',
        'log: { level: info }',
        'capture: { flush_interval_ms: 50 }',
        `tracing: { otlp_url: "${receiver.url}", sample_ratio: 1, flush_interval_ms: 50 }`,
        'rate_limits: { unauthenticated: { limit: 100000, burst: 100000, window: minute } }',
        'routes:',
        `  - { name: open, prefix: /open, auth: none, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) g.proc.kill('SIGKILL');
    await receiver.close();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('exports the SERVER span of every request, whichever thread served it', async () => {
    const threads = hasReusePort() ? 2 : 1;
    expect(g.stderr()).toContain(`"threads":${threads}`);
    const seen = new Set<string | null>();
    const sent = new Map<string, string>();
    for (let i = 0; i < 30; i++) {
      const traceId = i.toString(16).padStart(32, 'a');
      // A connection each, so the kernel hands them to both threads.
      const r = await fetch(`${g.url}/open/${i}`, {
        headers: { connection: 'close', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      });
      expect(r.status).toBe(200);
      sent.set(traceId, (await r.text()).slice(36, 52));
      seen.add(r.headers.get('x-wakegate-thread'));
    }
    expect(seen.size).toBe(threads);
    await receiver.waitFor(60, 20_000);
    for (const [traceId, spanId] of sent) {
      const server = receiver.spans.find((s) => s.traceId === traceId && s.kind === 2);
      expect(server?.spanId).toBe(spanId);
      expect(server?.parentSpanId).toBe('00f067aa0ba902b7');
    }
    g.proc.kill('SIGTERM');
    expect(await g.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});
