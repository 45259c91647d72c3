import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * A cursor is opaque (SPEC "List envelope") and signed by the installation: one this
 * API did not issue (made by a client, altered, or from before an upgrade) is a clean
 * 400 invalid_request `param: cursor`, and nothing in it reaches the store unchecked.
 */
describe('list cursors', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({});
    for (let i = 0; i < 3; i++) await (await fetch(`${t.url}/v2/wakes`, { headers: bearer(t.admin) })).arrayBuffer();
    await flushed(t.gw);
  });
  afterAll(async () => {
    await t.cleanup();
  });
  const get = async (q: string) => {
    const r = await fetch(`${t.url}/v2/wakes${q}`, { headers: bearer(t.admin) });
    return { status: r.status, body: await r.json() };
  };

  /** A cursor as the gateway made them before they were signed: no secret involved. */
  const mint = (tMs: number, id: string, filters: Record<string, unknown>) => {
    const fp = createHash('sha256').update(JSON.stringify(filters)).digest('base64url').slice(0, 12);
    return `cur_${Buffer.from(JSON.stringify([tMs, id, fp])).toString('base64url')}`;
  };

  it('a cursor with a position far before 1970 is 400 param cursor, not 500', async () => {
    const r = await get(`?cursor=${mint(-9007199254740991, 'wk_a', { environment: 'production' })}`);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'cursor' });
  });

  it('a cursor a client made (unsigned, in range, right filters) is 400 param cursor', async () => {
    for (const filters of [{ environment: 'production' }, { what: 'wakes', environment: 'production' }]) {
      const r = await get(`?cursor=${mint(Date.now(), 'wk_a', filters)}`);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'cursor' });
      expect(r.body.error.message).toMatch(/not a cursor this API issued/);
    }
  });

  it('pages with the cursors it issues; one altered by a byte is 400 param cursor', async () => {
    const first = await get('?limit=1&management=include');
    expect(first.status).toBe(200);
    const cursor = first.body.next_cursor as string;
    expect(cursor).toMatch(/^cur_[A-Za-z0-9_-]+$/);
    const second = await get(`?limit=1&management=include&cursor=${cursor}`);
    expect(second.status).toBe(200);
    expect(second.body.data[0].id).not.toBe(first.body.data[0].id);
    const raw = Buffer.from(cursor.slice(4), 'base64url');
    raw[raw.length - 3] = (raw[raw.length - 3] as number) ^ 1;
    const altered = await get(`?limit=1&management=include&cursor=cur_${raw.toString('base64url')}`);
    expect(altered.status).toBe(400);
    expect(altered.body.error).toMatchObject({ type: 'invalid_request', param: 'cursor' });
  });

  it('a cursor of one list is refused by another (keys, deliveries)', async () => {
    const first = await get('?limit=1');
    const cursor = first.body.next_cursor as string;
    expect(cursor).toMatch(/^cur_/);
    for (const path of ['/v2/api-keys', '/v2/webhooks/deliveries', '/v2/webhooks/endpoints']) {
      const r = await fetch(`${t.url}${path}?cursor=${cursor}`, { headers: bearer(t.admin) });
      expect(r.status, path).toBe(400);
      expect((await r.json()).error.param, path).toBe('cursor');
    }
  });
});
