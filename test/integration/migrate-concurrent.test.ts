import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type HttpStorage, startHttpStorage } from '../helpers/http-storage.js';

/**
 * A fleet started at once on a fresh ClickHouse server (`docker compose up --scale
 * wakegate=3`): every instance finds migrations to apply. They take turns (a lock in
 * the server itself); each starts, and the schema is made once.
 */
const admin = `svc_live_${newSecret()}`;
const key = randomBytes(32).toString('base64');
let storage: HttpStorage;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  storage = await startHttpStorage();
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.cleanup();
  await storage?.stop();
}, 60_000);

describe('three gateways started at once on a fresh storage server', () => {
  it('all start, take turns at the migrations, and share one schema', async () => {
    const started = await Promise.allSettled(
      [0, 1, 2].map(() => startGateway({ storage: { clickhouse_url: storage.url, encryption_key: key } }, { admin })),
    );
    for (const s of started) if (s.status === 'fulfilled') gateways.push(s.value);
    expect(started.map((s) => (s.status === 'rejected' ? String(s.reason) : 'started'))).toEqual([
      'started',
      'started',
      'started',
    ]);
    for (const g of gateways) {
      const r = await fetch(`${g.managementUrl}/v2/api-keys`, { headers: bearer(admin) });
      expect(r.status).toBe(200);
    }
    // Each version recorded once, and no lock left behind.
    const q = async (sql: string) =>
      (await (await fetch(`${storage.url}/?query=${encodeURIComponent(sql)}`)).text()).trim();
    expect(await q('SELECT count() - uniqExact(version) FROM wakegate.schema_migrations')).toBe('0');
    expect(
      await q("SELECT count() FROM system.tables WHERE database = 'wakegate' AND name LIKE 'migration_lock%'"),
    ).toBe('0');
  }, 120_000);
});
