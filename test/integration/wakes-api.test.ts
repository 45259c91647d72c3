import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

interface WakeOut {
  id: string;
  path: string;
  status: number;
  latency_ms: number;
  consumer: string;
  captured_at: string;
}

describe('GET /v2/wakes', () => {
  let origin: TestServer;
  let t: TestGateway;
  const get = (q: string, secret = t.admin) => fetch(`${t.url}/v2/wakes${q}`, { headers: bearer(secret) });

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const m = /status=(\d+)/.exec(req.url ?? '');
      const delay = /delay=(\d+)/.exec(req.url ?? '');
      setTimeout(
        () => {
          res.writeHead(m ? Number(m[1]) : 200);
          res.end('x');
        },
        delay ? Number(delay[1]) : 0,
      );
    });
    t = await startGateway({
      capture: { batch_rows: 100, flush_interval_ms: 20 },
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('pages through 1,000 wakes newest first, each exactly once, while new wakes arrive', async () => {
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => fetch(`${t.url}/api/bulk/${i + j}`).then((r) => r.arrayBuffer())),
      );
    }
    await flushed(t.gw);
    const seen: WakeOut[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await get(`?path=/api/bulk/{n}&limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      const page = await r.json();
      expect(page.object).toBe('list');
      seen.push(...page.data);
      cursor = page.next_cursor;
      expect(page.has_more).toBe(cursor !== null);
      if (cursor) expect(cursor).toMatch(/^cur_/);
      // New wakes on the same path arrive while paging; they are newer than the cursor.
      await Promise.all(
        Array.from({ length: 5 }, (_, j) => fetch(`${t.url}/api/bulk/new${pages}-${j}`).then((x) => x.arrayBuffer())),
      );
      await flushed(t.gw);
      pages++;
    } while (cursor);
    const bulk = seen.filter((w) => !w.path.includes('new'));
    expect(bulk.length).toBe(1000);
    expect(new Set(bulk.map((w) => w.id)).size).toBe(1000);
    expect(new Set(bulk.map((w) => w.path)).size).toBe(1000);
    for (let i = 1; i < seen.length; i++) {
      const a = seen[i - 1] as WakeOut;
      const b = seen[i] as WakeOut;
      expect(a.captured_at > b.captured_at || (a.captured_at === b.captured_at && a.id > b.id)).toBe(true);
    }
    expect(seen[0]?.captured_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('applies every filter, each narrowing the result', async () => {
    await fetch(`${t.url}/api/f/one?status=503`, { headers: { 'x-consumer-id': 'filter-co' } });
    await fetch(`${t.url}/api/f/two?status=404`, { headers: { 'x-consumer-id': 'filter-co' } });
    await fetch(`${t.url}/api/f/three?delay=150`);
    await fetch(`${t.url}/api/f/deep/four`);
    await flushed(t.gw);
    const paths = async (q: string) => ((await (await get(q)).json()).data as WakeOut[]).map((w) => w.path).sort();
    expect(await paths('?path=/api/f/*')).toEqual(['/api/f/deep/four', '/api/f/one', '/api/f/three', '/api/f/two']);
    expect(await paths('?path=/api/f/{name}')).toEqual(['/api/f/one', '/api/f/three', '/api/f/two']);
    expect(await paths('?path=/api/f/*&status=503')).toEqual(['/api/f/one']);
    expect(await paths('?path=/api/f/*&status_class=4xx')).toEqual(['/api/f/two']);
    expect(await paths('?path=/api/f/*&consumer=filter-co')).toEqual(['/api/f/one', '/api/f/two']);
    expect(await paths('?path=/api/f/*&consumer=filter-co&status_class=5xx')).toEqual(['/api/f/one']);
    expect(await paths('?path=/api/f/*&min_latency_ms=100')).toEqual(['/api/f/three']);
    expect(await paths('?path=/api/f/*&environment=production&status_class=2xx')).toEqual([
      '/api/f/deep/four',
      '/api/f/three',
    ]);
    const adminKey = t.gw.ring.bySecret(t.admin);
    // Management calls are wakes too, with their key.
    const mine = (await (await get(`?key_id=${adminKey?.id}&limit=5`)).json()).data as (WakeOut & { route: string })[];
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((w) => w.route === 'v2')).toBe(true);
  });

  it('reads one wake by id, and 404s unknown ones', async () => {
    const r = await fetch(`${t.url}/api/one`);
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const w = await get(`/${id}`);
    expect(w.status).toBe(200);
    expect(await w.json()).toMatchObject({ id, object: 'wake', path: '/api/one', status: 200 });
    for (const bad of ['wk_000000000AAAAAAAAAAAAAA', 'nope', 'key_abc']) {
      const m = await get(`/${bad}`);
      expect(m.status).toBe(404);
      expect((await m.json()).error.type).toBe('resource_missing');
    }
  });

  it('answers 400 invalid_request naming param for every bad parameter', async () => {
    const cases: [string, string][] = [
      ['?bogus=1', 'bogus'],
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit'],
      ['?status=200&status_class=2xx', 'status_class'],
      ['?status_class=6xx', 'status_class'],
      ['?status=99', 'status'],
      ['?cursor=garbage', 'cursor'],
      ['?cursor=cur_AAAA', 'cursor'],
      ['?min_latency_ms=-1', 'min_latency_ms'],
      ['?path=nope', 'path'],
      ['?path=/a/{unclosed', 'path'],
      ['?limit=1&limit=2', 'limit'],
    ];
    for (const [q, param] of cases) {
      const r = await get(q);
      expect(r.status, q).toBe(400);
      const b = await r.json();
      expect(b.error, q).toMatchObject({ type: 'invalid_request', param });
      expect(b.error.wake_id).toBe(r.headers.get('x-wake-id'));
    }
    // A cursor made for one filter is refused with another.
    const first = await (await get('?limit=1&status=200')).json();
    const r = await get(`?limit=1&status=404&cursor=${first.next_cursor}`);
    expect(r.status).toBe(400);
    expect((await r.json()).error.param).toBe('cursor');
  });

  it('answers 401 with www-authenticate for a missing, malformed or unknown key; a test-class key never sees another environment', async () => {
    for (const h of [{}, { authorization: 'Basic abc' }, bearer('svc_live_unknownunknownunknownunknownunknownxx1')]) {
      const r = await fetch(`${t.url}/v2/wakes`, { headers: h });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect((await r.json()).error.type).toBe('authentication_required');
    }
    // A live-class key may name another environment; a test-class key never can.
    expect((await get('?environment=sandbox')).status).toBe(200);
    const { secret } = await t.gw.keys.create(
      { label: 's', environment: 'sandbox', scopes: ['wakes:read'] },
      'sandbox',
    );
    const r = await fetch(`${t.url}/v2/wakes?environment=production`, { headers: bearer(secret) });
    expect(r.status).toBe(404);
    expect((await r.json()).error).toMatchObject({ type: 'resource_missing', param: 'environment' });
  });
});
