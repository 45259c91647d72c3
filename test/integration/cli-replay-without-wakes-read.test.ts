// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { bearer, call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * DESIGN.md: `POST /v2/wakes/{wake_id}/replay` needs `wakes:write` (not wakes:read); SPEC
 * Authentication 6: "Issue one key per job, with only the scopes that job needs."
 * docs/console-and-cli.md: "`wakegate replay WAKE_ID` calls `POST /v2/wakes/{id}/replay`, waits for
 * the replay's own wake ... and prints its diff"; when the diff does not come the CLI says the replay
 * "was sent" (src/cli/replay.ts). A replay re-sends a request to the origin: a CLI that reports a
 * failure without saying it was sent invites the operator to send it again.
 */
describe('wakegate replay with a key that may replay but not read wakes', () => {
  let t: TestGateway;
  let origin: TestServer;
  let hits = 0;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      hits++;
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      capture: { flush_interval_ms: 20 },
      routes: [
        {
          name: 'pay',
          prefix: '/pay',
          auth: 'required',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  it('says the replay was sent (and its wake id), or succeeds; never only "403 ... wakes:read"', async () => {
    const r = await fetch(`${t.url}/pay/orders/1`, { headers: bearer(t.admin) });
    const wakeId = r.headers.get('x-wake-id') as string;
    await r.arrayBuffer();
    await flushed(t.gw);
    const replayer = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
      label: 'replay job',
      environment: 'production',
      scopes: ['wakes:write', 'payments:read'],
    });
    expect(replayer.status).toBe(201);
    const before = hits;
    const ran = await wakegate(['replay', wakeId, '--wait-ms', '3000'], {
      WAKEGATE_KEY: replayer.body.secret,
      WAKEGATE_URL: t.url,
    });
    // The replay reached the origin: the API accepted it.
    expect(hits - before).toBe(1);
    // What the operator is told.
    const told = `${ran.stdout}\n${ran.stderr}`;
    expect(
      { code: ran.code, told },
      'the replay was sent, yet the CLI only reports a 403 for the scope of its follow-up read',
    ).toSatisfy((x: { code: number | null; told: string }) => x.code === 0 || /was sent|replay wk_/.test(x.told));
    // docs/console-and-cli.md: one line on stderr saying it was sent, and exit code 1.
    expect(ran.stderr).toMatch(
      new RegExp(`^wakegate: replay wk_\\w+ of ${wakeId} was sent; its diff cannot be read: 403 insufficient_scope`),
    );
    expect(ran.code).toBe(1);
  });
});
