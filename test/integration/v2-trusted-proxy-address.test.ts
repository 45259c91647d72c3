// Regression tests from a review of rate limits and buckets (2026-11-27).
// The threaded case runs on the Node LTS (bash scripts/test-on-lts.sh <this file>), where two threads share the port (on an older Node it skips).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { newSecret } from '../../src/ids.js';
import { silentLogger } from '../../src/log.js';
import { hasReusePort } from '../../src/startup.js';
import { handOver } from '../../src/threads/handover.js';
import { internalListener } from '../../src/threads/internal-listener.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { closeBoth, edgeInFront } from '../helpers/edge-handover.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Behind `server.trusted_proxies`, the client's address for the per-address limits is
 * the one X-Forwarded-For names (docs/security.md, docs/configuration.md
 * `server.trusted_proxies`; DESIGN: requests whose key is refused are limited per
 * client address under `unauthenticated`). The proxied path does so; a /v2 call on the
 * same main listener does not: it draws from the proxy's own address, so every client
 * behind one load balancer shares one `unauthenticated` bucket for /v2.
 */
describe('review: /v2 refused keys behind a trusted proxy are limited per client address', () => {
  let origin: TestServer;
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12, 0, 0));
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('{}');
    });
    t = await startGateway(
      {
        server: { trusted_proxies: ['127.0.0.1'] },
        rate_limits: { unauthenticated: { limit: 2, burst: 2, window: 'hour' } },
        routes: [
          {
            name: 'api',
            prefix: '/api',
            scopes: { read: 'api:read', write: 'api:write' },
            origins: { production: origin.url },
          },
        ],
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const bad = (client: string, path: string) =>
    fetch(`${t.url}${path}`, {
      headers: { authorization: `Bearer svc_live_${'u'.repeat(43)}`, 'x-forwarded-for': client },
    }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });

  it.each([
    ['the proxy', '/api/x'],
    ['/v2', '/v2/wakes'],
  ])(
    'through %s: one client spending its unauthenticated burst leaves another client behind the proxy its own',
    async (_, path) => {
      clock.advance(3_600_000);
      // Client A (203.0.113.1) spends its bucket: 401, 401, 429.
      const a = [await bad('203.0.113.1', path), await bad('203.0.113.1', path), await bad('203.0.113.1', path)];
      expect(a).toEqual([401, 401, 429]);
      // Client B (203.0.113.2), another address X-Forwarded-For names, has a bucket of its own: 401.
      // Through /v2 today: 429, A's (in fact the proxy's, 127.0.0.1) bucket.
      expect(await bad('203.0.113.2', path)).toBe(401);
    },
  );

  it("a /v2 call's wake names the client X-Forwarded-For names, admitted or refused, as a proxied request's does", async () => {
    clock.advance(3_600_000);
    const ids: string[] = [];
    for (const [path, key] of [
      ['/v2/wakes?limit=1', t.admin],
      ['/v2/wakes', `svc_live_${'u'.repeat(43)}`],
      ['/v2/openapi.json', null],
    ] as const) {
      const r = await fetch(`${t.url}${path}`, {
        headers: { ...(key ? bearer(key) : {}), 'x-forwarded-for': '198.51.100.7, 203.0.113.9' },
      });
      await r.arrayBuffer();
      ids.push(r.headers.get('x-wake-id') as string);
    }
    await flushed(t.gw);
    for (const id of ids) {
      const w = (await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json()) as {
        client_ip: string;
        route: string;
      };
      expect(w, id).toMatchObject({ route: 'v2', client_ip: '203.0.113.9' });
    }
  });

  it('the management listener reads X-Forwarded-For behind a trusted proxy as the main listener does', async () => {
    clock.advance(3_600_000);
    const m = (client: string) =>
      fetch(`${t.managementUrl}/v2/wakes`, {
        headers: { authorization: `Bearer svc_live_${'u'.repeat(43)}`, 'x-forwarded-for': client },
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    expect([await m('203.0.113.3'), await m('203.0.113.3'), await m('203.0.113.3')]).toEqual([401, 401, 429]);
    expect(await m('203.0.113.4')).toBe(401);
  });
});

/**
 * The other side: X-Forwarded-For is read only from a trusted proxy. A client that is
 * none (here every client, from 127.0.0.1, is not in trusted_proxies) cannot name
 * another address to draw a fresh `unauthenticated` bucket on /v2, nor name the peer
 * the handover would carry.
 */
describe('/v2 refused keys from a client that is no trusted proxy: X-Forwarded-For and handover headers are not read', () => {
  let t: TestGateway;
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12, 0, 0));
  beforeAll(async () => {
    t = await startGateway(
      {
        server: { trusted_proxies: ['10.9.9.9'] },
        rate_limits: { unauthenticated: { limit: 2, burst: 2, window: 'hour' } },
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it.each(['url', 'managementUrl'] as const)(
    "%s: spoofed X-Forwarded-For and x-wakegate-peer share one bucket, the connection's",
    async (which) => {
      clock.advance(3_600_000);
      const ids: string[] = [];
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await fetch(`${t[which]}/v2/wakes`, {
          headers: {
            authorization: `Bearer svc_live_${'u'.repeat(43)}`,
            'x-forwarded-for': `203.0.113.${10 + i}`,
            'x-wakegate-peer': `198.51.100.${10 + i}`,
            'x-wakegate-body-refused': 'too-large',
          },
        });
        await r.arrayBuffer();
        statuses.push(r.status);
        ids.push(r.headers.get('x-wake-id') as string);
      }
      expect(statuses).toEqual([401, 401, 429, 429]);
      await flushed(t.gw);
      const w = (await (await fetch(`${t.url}/v2/wakes/${ids[0]}`, { headers: bearer(t.admin) })).json()) as {
        client_ip: string;
      };
      expect(w.client_ip).toBe('127.0.0.1');
    },
  );
});

/**
 * The handover of an edge thread (threads > 1) carries its client connection's address
 * and why a body was refused in headers of its own; a client sending those headers
 * reaches the control thread with the edge's values, never its own.
 */
describe('the handover: what a client sends under the handover headers never reaches the control thread', () => {
  let internal: http.Server;
  let edge: http.Server;
  let edgePort: number;
  const served: { peer: string; refused: string | null; headers: http.IncomingHttpHeaders }[] = [];
  beforeAll(async () => {
    const token = 't'.repeat(43);
    internal = internalListener({
      token,
      threads: 1,
      serve: (req, res, peer, refused) => {
        served.push({ peer, refused, headers: req.headers });
        req.resume();
        req.on('end', () => res.end('{}'));
      },
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    const hand = handOver({ port: (internal.address() as AddressInfo).port, token }, silentLogger);
    ({ edge, port: edgePort } = await edgeInFront(hand));
  });
  afterAll(() => closeBoth(edge, internal));

  it("x-wakegate-peer, x-wakegate-body-refused and x-wakegate-internal from a client: the edge's own values, then none", async () => {
    served.length = 0;
    const r = await fetch(`http://127.0.0.1:${edgePort}/v2/wakes`, {
      headers: {
        'x-wakegate-peer': '198.51.100.1',
        'x-wakegate-body-refused': 'too-large',
        'x-wakegate-internal': 'guess',
        'x-forwarded-for': '203.0.113.1',
      },
    });
    expect(r.status).toBe(200);
    expect(served).toHaveLength(1);
    expect(served[0]?.peer).toBe('127.0.0.1');
    expect(served[0]?.refused).toBeNull();
    expect(served[0]?.headers).not.toHaveProperty('x-wakegate-peer');
    expect(served[0]?.headers).not.toHaveProperty('x-wakegate-body-refused');
    expect(served[0]?.headers).not.toHaveProperty('x-wakegate-internal');
    // X-Forwarded-For passes as sent: the control thread reads it only behind a trusted peer (admission.ts clientOf).
    expect(served[0]?.headers['x-forwarded-for']).toBe('203.0.113.1');
  });
});

/** Two edge threads: a /v2 call handed over from either is limited and recorded per X-Forwarded-For's client. */
describe.runIf(hasReusePort())(
  'threads: 2, behind a trusted proxy: /v2 handed over keeps the client X-Forwarded-For names',
  () => {
    const admin = `svc_live_${newSecret()}`;
    let dir: string;
    let g: ChildGateway;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'wakegate-xff-threads-'));
      writeFileSync(
        join(dir, 'cfg.yaml'),
        [
          "server: { threads: 2, trusted_proxies: ['127.0.0.1'] }",
          'log: { level: info }',
          'rate_limits:',
          '  unauthenticated: { limit: 1, burst: 2, window: day }',
          '',
        ].join('\n'),
      );
      g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
        DATA_DIR: join(dir, 'data'),
        WAKEGATE_ADMIN_KEY: admin,
        WAKEGATE_TEST_HOOKS: '1',
      });
    }, 60_000);
    afterAll(async () => {
      if (g && g.proc.exitCode === null) {
        g.proc.kill('SIGTERM');
        await g.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    });

    const bad = (client: string) =>
      fetch(`${g.url}/v2/wakes`, {
        headers: { authorization: `Bearer svc_live_${'u'.repeat(43)}`, 'x-forwarded-for': client, connection: 'close' },
      }).then(async (r) => {
        await r.arrayBuffer();
        return { status: r.status, thread: r.headers.get('x-wakegate-thread'), wake: r.headers.get('x-wake-id') };
      });

    it('each client its own bucket across both threads, and its wake its address', async () => {
      const a = [];
      for (let i = 0; i < 6; i++) a.push(await bad('203.0.113.1'));
      expect(a.map((r) => r.status)).toEqual([401, 401, 429, 429, 429, 429]);
      const b = await bad('203.0.113.2');
      expect(b.status).toBe(401);
      // The wake is stored by the control thread; it is read once it is in.
      let w: { client_ip?: string } = {};
      for (let i = 0; i < 50 && w.client_ip === undefined; i++) {
        const r = await fetch(`${g.url}/v2/wakes/${b.wake}`, { headers: bearer(admin) });
        if (r.status === 200) w = (await r.json()) as { client_ip: string };
        else await new Promise((res) => setTimeout(res, 100));
      }
      expect(w.client_ip).toBe('203.0.113.2');
    });
  },
);
