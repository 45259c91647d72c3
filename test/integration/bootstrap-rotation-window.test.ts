import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeySecret } from '../../src/auth/secrets.js';
import { call, startGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

/*
 * A restart with a new WAKEGATE_ADMIN_KEY (the documented way to rotate a lost or
 * leaked admin key). The start listened first and installed the new key (revoking the
 * old one) only after: meanwhile the old admin key was served, and could issue admin
 * keys that outlived the rotation. Regression tests from a review of concurrent /v2
 * writes; both failed before the key was installed ahead of the listeners.
 */

const ROUNDS = 3;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

describe('the old admin key during a start that rotates it', () => {
  let origin: TestServer;
  let dir: string;
  beforeAll(async () => {
    origin = await echoOrigin('prod');
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-boot-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the replaced (leaked) admin key is never served by the start that revokes it', async () => {
    const routes = [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        origins: { production: origin.url, sandbox: origin.url },
      },
    ];
    let old = newKeySecret('live');
    let t = await startGateway({ routes }, { dir, admin: old });
    await t.stop();
    let served = 0;
    const seen: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const port = await freePort();
      const next = newKeySecret('live');
      let started = false;
      const statuses: number[] = [];
      const poller = (async () => {
        while (!started) {
          try {
            const r = await fetch(`http://127.0.0.1:${port}/v2/environments`, {
              headers: { authorization: `Bearer ${old}` },
            });
            statuses.push(r.status);
            await r.arrayBuffer();
          } catch {
            await new Promise((r) => setTimeout(r, 1));
          }
        }
      })();
      t = await startGateway({ routes, server: { port } }, { dir, admin: next });
      started = true;
      await poller;
      const after = await call(t.url, old, 'GET', '/v2/environments');
      expect(after.status).toBe(401);
      const ok = statuses.filter((s) => s === 200).length;
      seen.push(`${ok}x200/${statuses.length}`);
      if (ok > 0) served++;
      await t.stop();
      old = next;
    }
    // docs/operations.md: "to rotate it (or when it is lost or leaked), set a new value and restart.
    // The start installs the new key and revokes the old one at once"
    expect(served, `starts that served the replaced admin key (200s/answers while starting): ${seen.join(' ')}`).toBe(
      0,
    );
  }, 60_000);
  it('a key issued with the replaced admin key while the start rotates it outlives the rotation', async () => {
    const routes = [
      {
        name: 'api',
        prefix: '/api',
        scopes: { read: 'api:read', write: 'api:write' },
        origins: { production: origin.url, sandbox: origin.url },
      },
    ];
    const body = JSON.stringify({
      label: 'planted',
      environment: 'production',
      scopes: ['wakes:read', 'wakes:write', 'keys:read', 'keys:write', 'webhooks:read', 'webhooks:write', 'api:write'],
    });
    let old = newKeySecret('live');
    let t = await startGateway({ routes }, { dir, admin: old });
    await t.stop();
    let planted = 0;
    const seen: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const port = await freePort();
      const next = newKeySecret('live');
      let started = false;
      const issued: string[] = [];
      const poller = (async () => {
        while (!started) {
          try {
            const r = await fetch(`http://127.0.0.1:${port}/v2/api-keys`, {
              method: 'POST',
              headers: { authorization: `Bearer ${old}`, 'content-type': 'application/json' },
              body,
            });
            const j = (await r.json()) as { secret?: string };
            if (r.status === 201 && j.secret) issued.push(j.secret);
          } catch {
            await new Promise((r) => setTimeout(r, 1));
          }
        }
      })();
      t = await startGateway({ routes, server: { port } }, { dir, admin: next });
      started = true;
      await poller;
      expect((await call(t.url, old, 'GET', '/v2/environments')).status).toBe(401);
      let alive = 0;
      for (const s of issued) if ((await call(t.url, s, 'GET', '/v2/api-keys')).status === 200) alive++;
      seen.push(`${alive}/${issued.length}`);
      if (alive > 0) planted++;
      await t.stop();
      old = next;
    }
    expect(
      planted,
      `starts after which a key issued by the replaced admin key still works (alive/issued): ${seen.join(' ')}`,
    ).toBe(0);
  }, 60_000);
});
