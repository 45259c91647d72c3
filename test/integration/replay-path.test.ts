import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Wake } from '../../src/capture/wake.js';
import { newSecret, newWakeId } from '../../src/ids.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * A replay passes the one admission with the wake's path: what the proxy refuses of a
 * path (a lenient reading that matches another route, dot segments, encoded slashes,
 * double encoding) a replay refuses too (409, param wake_id), so no replay reaches a
 * route its caller could not reach directly. A wake only holds such a path when it
 * was captured under another configuration (a keyed route added under a public
 * parent since) or by an earlier version of the gateway.
 */
describe('the path of a replayed wake', () => {
  let origin: TestServer;
  let t: TestGateway;
  let dir: string;
  const admin = `svc_live_${newSecret()}`;
  let replayer: string;
  /** Wakes captured before /v2/payments was a keyed route. */
  const before: Record<string, string> = {};
  const seen: string[] = [];

  const publicRoute = () => ({ name: 'public', prefix: '/', auth: 'none', origins: { production: origin.url } });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push(req.url ?? '');
      res.end('ok');
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-replay-path-'));
    // First a gateway with the public route alone: these paths are ordinary and are captured.
    const first = await startGateway({ routes: [publicRoute()] }, { dir, admin });
    const port = Number(new URL(first.url).port);
    for (const path of [
      '/v2/%70ayments/p_1',
      '/V2/PAYMENTS/p_1',
      '/v2/payments;x/p_1',
      '//v2/payments/p_1',
      '/docs/x',
    ]) {
      const r = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r.text), path).toBe(200);
      before[path] = /x-wake-id: (\S+)/i.exec(r.text)?.[1] as string;
    }
    await flushed(first.gw);
    await first.stop();
    // Then the same data with a keyed route under the public one.
    t = await startGateway(
      {
        routes: [
          publicRoute(),
          {
            name: 'payments',
            prefix: '/v2/payments',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: origin.url },
          },
        ],
      },
      { dir, admin },
    );
    replayer = (
      await t.gw.keys.create(
        { label: 'replayer', environment: 'production', scopes: ['wakes:read', 'wakes:write'] },
        'production',
      )
    ).secret;
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const replay = async (id: string, key = replayer) => {
    const r = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{}',
    });
    return { status: r.status, body: await r.json() };
  };
  /** Waits for what a replay sent to reach the origin (or 300 ms of nothing). */
  const reached = async (from: number) => {
    const until = Date.now() + 300;
    while (seen.length === from && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 50));
    return seen.slice(from);
  };

  it('control: the replaying key cannot reach /v2/payments directly, in any spelling', async () => {
    const port = Number(new URL(t.url).port);
    const direct = await rawExchange(
      port,
      `GET /v2/payments/p_1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${replayer}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(direct.text)).toBe(403);
    const spelled = await rawExchange(
      port,
      `GET /v2/%70ayments/p_1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${replayer}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(spelled.text)).toBe(400);
  });

  it('a wake whose path an origin now reads as /v2/payments is not replayed through the public route (409)', async () => {
    for (const path of ['/v2/%70ayments/p_1', '/V2/PAYMENTS/p_1', '/v2/payments;x/p_1', '//v2/payments/p_1']) {
      const from = seen.length;
      // Neither by a key without the payments scopes, nor by the admin key: the path is ambiguous now.
      for (const key of [replayer, admin]) {
        const r = await replay(before[path] as string, key);
        expect(r.status, path).toBe(409);
        expect(r.body.error, path).toMatchObject({ type: 'conflict', param: 'wake_id' });
        expect(r.body.error.message, path).toMatch(
          /^ambiguous path: an origin may read it as route payments, .*cannot be replayed$/,
        );
      }
      expect(await reached(from), path).toEqual([]);
    }
  });

  it('control: a wake of an ordinary public path is replayed', async () => {
    const from = seen.length;
    const r = await replay(before['/docs/x'] as string);
    expect(r.status).toBe(202);
    expect(await reached(from)).toEqual(['/docs/x']);
  });

  it('a wake holding a path the proxy refuses (kept by an earlier version) is not replayed (409), never sent', async () => {
    const legacy = async (path: string) => {
      const now = Date.now();
      const w: Wake = {
        id: newWakeId(now),
        method: 'GET',
        path,
        path_truncated: false,
        route: 'public',
        status: 200,
        latency_ms: 1,
        consumer: '',
        key_id: '',
        environment: 'production',
        region: 'local',
        captured_at: now,
        request_bytes: 0,
        response_bytes: 2,
        client_ip: '127.0.0.1',
        user_agent: '',
        detail: {
          query: '',
          request_headers: [['host', 'x']],
          response_headers: [['content-type', 'text/plain']],
          request_body: null,
          response_body: { data: Buffer.from('ok'), bytes: 2, truncated: false, encoding: 'utf8' },
          diff: null,
        },
      };
      t.gw.batcher.push(w);
      await flushed(t.gw);
      return w.id;
    };
    // Tomcat and Spring read /..;/v2/payments/p_1 as /v2/payments/p_1; an origin that decodes twice, %252e as a dot.
    for (const path of [
      '/..;/v2/payments/p_1',
      '/docs/%2e%2e/v2/payments/p_1',
      '/docs/%252e%252e/v2/payments',
      '/a%2fb',
    ]) {
      const id = await legacy(path);
      const from = seen.length;
      // The public route needs no scope: a key with wakes:write alone got it sent before.
      const r = await replay(id);
      expect(r.status, path).toBe(409);
      expect(r.body.error, path).toMatchObject({ type: 'conflict', param: 'wake_id' });
      expect(r.body.error.message, path).toMatch(/^its path must not contain .*; this wake cannot be replayed$/);
      expect(await reached(from), path).toEqual([]);
    }
    // The same kind of wake with an ordinary path is replayed: the refusal is the path's.
    const from = seen.length;
    expect((await replay(await legacy('/docs/legacy'), admin)).status).toBe(202);
    expect(await reached(from)).toEqual(['/docs/legacy']);
  });
});
