// Regression tests from a review of isolation between environments and scopes (2026-11-27).
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Sandbox keys can take every replay place of the gateway process (REPLAY_LIMITS:
 * 64 running, src/proxy/replay.ts:61), so a production key's replay is refused 429.
 * SPEC (Limits): sandbox keys are held to one shared sandbox allowance; what sandbox
 * traffic does must not refuse production. Expected: the production replay is admitted.
 */
describe('replay places are not shared between a sandbox and production', () => {
  let prodO: TestServer;
  let sbO: TestServer;
  let t: TestGateway;
  const held: ServerResponse[] = [];
  const call = async (secret: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(secret), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    return { status: r.status, body: (await r.json()) as any };
  };

  beforeAll(async () => {
    prodO = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    // The sandbox origin answers the first request of each path at once, then holds every later one open.
    const seen = new Set<string>();
    sbO = await startServer((req, res) => {
      if (!seen.has(req.url ?? '')) {
        seen.add(req.url ?? '');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
        return;
      }
      held.push(res);
    });
    t = await startGateway({
      routes: [
        {
          name: 'payments',
          prefix: '/v2/payments',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: prodO.url, sandbox: sbO.url },
        },
      ],
    });
  });
  afterAll(async () => {
    for (const r of held) r.destroy();
    await t.cleanup();
    await prodO.close();
    await sbO.close();
  });

  it("a production key's replay is admitted while sandbox keys hold 64 replays open", async () => {
    const sandboxKeys: string[] = [];
    for (let i = 0; i < 8; i++) {
      const k = await call(t.admin, 'POST', '/v2/api-keys', {
        label: `sb${i}`,
        environment: 'sandbox',
        scopes: ['wakes:write', 'payments:read'],
      });
      expect(k.status).toBe(201);
      sandboxKeys.push(k.body.secret);
    }
    const s = await fetch(`${t.url}/v2/payments/sandbox-wake`, { headers: bearer(sandboxKeys[0] as string) });
    await s.text();
    const sandboxWake = s.headers.get('x-wake-id') as string;
    const p = await fetch(`${t.url}/v2/payments/production-wake`, { headers: bearer(t.admin) });
    await p.text();
    const productionWake = p.headers.get('x-wake-id') as string;
    await flushed(t.gw);

    // Every sandbox key starts 8 replays of the sandbox wake; the sandbox origin holds them open.
    const started = await Promise.all(
      sandboxKeys.flatMap((k) =>
        Array.from({ length: 8 }, () => call(k, 'POST', `/v2/wakes/${sandboxWake}/replay`, {})),
      ),
    );
    expect(started.map((r) => r.status)).toEqual(Array(64).fill(202));

    const r = await call(t.admin, 'POST', `/v2/wakes/${productionWake}/replay`, {});
    expect(r.body.error?.message ?? '').not.toMatch(/replays running/);
    expect(r.status).toBe(202);
    // 64 replays each read their wake from storage: well past vitest's 30 s on a loaded host (CI crossed it).
  }, 90_000);
});
