// Regression tests from a review of the key lifecycle (2026-11-28).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashSecret } from '../../src/auth/secrets.js';
import { newKeyId, newSecret } from '../../src/ids.js';
import { KeyTable } from '../../src/store/keys.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * docs/keys-and-limits.md: "the key poll (storage.key_poll_interval_ms, 1 s) stays the
 * backstop, so even with Redis away a revocation reaches every instance within about 2 s".
 * The poll reads keys (and key_revocations) whose updated_at/written_at is within 5 min of
 * the newest version it holds. Another instance whose clock is 10 min behind stamps its
 * revocation of a key last written a day ago with its own now (max(now, updated_at + 1)):
 * the poll never reads it, and the revoked key keeps working here (until a restart).
 * Simulated as tunnel-revocation.test.ts does: the peer's write goes straight to the table.
 */
describe('a revocation written by a peer whose clock is 10 minutes behind', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-review-peer-'));
  const admin = `svc_live_${'p'.repeat(40)}`;
  let t: TestGateway | null = null;
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const behindMs of [0, 600_000])
    it(`reaches this instance through the key poll within a few seconds (peer ${behindMs / 60_000} min behind)`, async () => {
      await t?.stop();
      t = await startGateway({}, { dir, admin });
      const secret = `svc_live_${newSecret()}`;
      const day = Date.now() - 86_400_000;
      const old = {
        id: newKeyId(),
        environment: 'production',
        label: 'old-key',
        consumer: 'old-key',
        scopes: ['wakes:read'],
        rate_limit: null,
        replaces: null,
        secret_hash: hashSecret(secret),
        created_at: day,
        revoke_at: null,
        revoked_at: null,
        updated_at: day,
      };
      await new KeyTable(t.gw.store).put(old);
      await t.stop();
      t = await startGateway({}, { dir, admin });
      const ok = await fetch(`${t.url}/v2/wakes?limit=1`, { headers: bearer(secret) });
      await ok.text();
      expect(ok.status).toBe(200);
      // The peer, 10 minutes behind, revokes it.
      const peerNow = Date.now() - behindMs;
      await new KeyTable(t.gw.store).put({
        ...old,
        revoked_at: peerNow,
        updated_at: Math.max(peerNow, old.updated_at + 1),
      });
      await expect
        .poll(
          async () => {
            const r = await fetch(`${t?.url}/v2/wakes?limit=1`, { headers: bearer(secret) });
            await r.text();
            return r.status;
          },
          { timeout: 4000, interval: 250 },
        )
        .toBe(401);
    }, 30_000);
});
