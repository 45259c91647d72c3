import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { BUCKETS_FILE } from '../../src/ratelimit/persist.js';
import { bearer, startGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Issue #36: a lone gateway's buckets and quota windows outlive a clean restart on the same DATA_DIR. */
describe('buckets across a restart', () => {
  let origin: TestServer;
  let dir: string;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const admin = `svc_live_${'r'.repeat(32)}`;
  const values = (url: string) => ({
    routes: [
      { name: 'pay', prefix: '/pay', scopes: { read: 'p:read', write: 'p:write' }, origins: { production: url } },
    ],
  });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-buckets-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const statuses = async (url: string, secret: string, n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = await fetch(`${url}/pay/x`, { headers: bearer(secret) });
      await r.arrayBuffer();
      out.push(r.status);
    }
    return out;
  };

  it('a key that spent its burst is still limited after a clean restart, and refills as the clock moved', async () => {
    const a = await startGateway(values(origin.url), { dir, admin, clock });
    const { secret } = await a.gw.keys.create(
      {
        label: 'burst',
        environment: 'production',
        scopes: ['p:read'],
        rate_limit: { limit: 3, burst: 3, window: 'minute' },
      },
      'production',
    );
    expect(await statuses(a.url, secret, 4)).toEqual([200, 200, 200, 429]);
    await a.stop();
    // Written at the stop, only the gateway's user may read it.
    expect(statSync(join(dir, BUCKETS_FILE)).mode & 0o777).toBe(0o600);

    const b = await startGateway(values(origin.url), { dir, admin, clock });
    try {
      // Before the fix, the restart handed the key a fresh burst: [200, 200, 200].
      expect(await statuses(b.url, secret, 1)).toEqual([429]);
      // One token each 20 s: 20 s later (as the clock says), exactly one more.
      clock.advance(20_000);
      expect(await statuses(b.url, secret, 2)).toEqual([200, 429]);
      clock.advance(60_000);
      expect(await statuses(b.url, secret, 4)).toEqual([200, 200, 200, 429]);
    } finally {
      await b.stop();
    }
  });

  it('a damaged file is ignored: the gateway starts with fresh buckets', async () => {
    const file = join(dir, BUCKETS_FILE);
    writeFileSync(file, Buffer.concat([readFileSync(file).subarray(0, 40), Buffer.from('garbage')]));
    const c = await startGateway(values(origin.url), { dir, admin, clock });
    try {
      const r = await fetch(`${c.url}/pay/x`);
      expect(r.status).toBe(401);
    } finally {
      await c.stop();
    }
  });
});
