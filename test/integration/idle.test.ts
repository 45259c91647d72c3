import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/**
 * On the embedded store only this process writes the key and endpoint tables, so an
 * idle gateway does not poll them (storage.key_poll_interval_ms is 200 ms here): a
 * write by any gateway of the process is what makes the others read.
 */
describe('an idle gateway on the embedded store', () => {
  let t: TestGateway;
  let other: TestGateway;
  let origin: TestServer;
  beforeAll(async () => {
    origin = await echoOrigin();
    const routes = [
      {
        name: 'pay',
        prefix: '/pay',
        scopes: { read: 'pay:read', write: 'pay:write' },
        origins: { production: origin.url },
      },
    ];
    const webhooks = { allow_insecure_http: true, allow_private_networks: true };
    t = await startGateway({ routes, webhooks });
    // A second gateway on the same directory (tests run several in one process, on one engine).
    other = await startGateway({ routes, webhooks }, { dir: t.dir, admin: t.admin });
  });
  afterAll(async () => {
    await other?.stop();
    await t?.cleanup();
    await origin?.close();
  });

  /** Reads of the key and endpoint tables by either gateway while `run` runs. */
  const tableReads = async (run: () => Promise<void>): Promise<number> => {
    let n = 0;
    const restore: (() => void)[] = [];
    for (const g of [t, other]) {
      const client = g.gw.store.client;
      const orig = client.query.bind(client);
      client.query = ((...args: Parameters<typeof client.query>) => {
        if (/\.(api_keys|webhook_endpoints) FINAL/.test(args[0].query)) n++;
        return orig(...args);
      }) as typeof client.query;
      restore.push(() => {
        client.query = orig;
      });
    }
    try {
      await run();
    } finally {
      for (const r of restore) r();
    }
    return n;
  };

  it('reads neither the keys nor the webhook endpoints while nothing is written', async () => {
    // Six poll intervals.
    expect(await tableReads(() => new Promise((r) => setTimeout(r, 1200)))).toBe(0);
  });

  it('still sees at once a key and an endpoint another gateway of the process writes', async () => {
    const reads = await tableReads(async () => {
      const k = await call(t.url, t.admin, 'POST', '/v2/api-keys', {
        label: 'idle',
        environment: 'production',
        scopes: ['pay:read'],
      });
      expect(k.status).toBe(201);
      // Within SPEC's 2 s for a key change, on a busy machine; a poll is not waited for.
      const deadline = Date.now() + 2000;
      while ((await fetch(`${other.url}/pay/1`, { headers: bearer(k.body.secret) })).status !== 200) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 10));
      }
      const e = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
        url: `${origin.url}/hooks`,
        events: ['key.rotated'],
      });
      expect(e.status).toBe(201);
      while (!other.gw.endpoints.get(e.body.id)) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 10));
      }
    });
    expect(reads).toBeGreaterThan(0);
  });
});
