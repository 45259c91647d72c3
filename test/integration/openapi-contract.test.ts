import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';

interface Param {
  name: string;
  in: string;
  schema: { type?: string; minimum?: number; maximum?: number; enum?: string[]; format?: string; pattern?: string };
}
interface Op {
  parameters: Param[];
  responses: Record<string, unknown>;
  security: unknown[];
  requestBody?: {
    content: { 'application/json': { schema: { properties?: Record<string, Record<string, unknown>> } } };
  };
}

/** Issue #26, item 7: what /v2/openapi.json states is what the server enforces, both ways. */
describe('the OpenAPI document against the server', () => {
  let t: TestGateway;
  let paths: Record<string, Record<string, Op>>;

  beforeAll(async () => {
    t = await startGateway();
    paths = ((await (await fetch(`${t.url}/v2/openapi.json`)).json()) as { paths: typeof paths }).paths;
  });
  afterAll(async () => {
    await t.cleanup();
  });

  /** The error a GET with one query parameter set gets (null when it is not refused for that parameter). */
  const refusal = async (path: string, name: string, value: string) => {
    const r = await fetch(`${t.url}${path}?${name}=${encodeURIComponent(value)}`, { headers: bearer(t.admin) });
    const body = (await r.json()) as { error?: { param: string | null } };
    return r.status === 400 && body.error?.param === name ? 400 : null;
  };

  it('every integer range and enum of a list query is accepted at its edges and refused past them', async () => {
    let checked = 0;
    for (const [path, ops] of Object.entries(paths)) {
      const get = ops.get;
      if (!get || path.includes('{')) continue;
      for (const p of get.parameters.filter((x) => x.in === 'query')) {
        const s = p.schema;
        if (s.type === 'integer' && s.minimum !== undefined && s.maximum !== undefined) {
          expect(await refusal(path, p.name, String(s.minimum)), `${path} ${p.name}=${s.minimum}`).toBeNull();
          expect(await refusal(path, p.name, String(s.maximum)), `${path} ${p.name}=${s.maximum}`).toBeNull();
          expect(await refusal(path, p.name, String(s.minimum - 1)), `${path} ${p.name}=${s.minimum - 1}`).toBe(400);
          expect(await refusal(path, p.name, String(s.maximum + 1)), `${path} ${p.name}=${s.maximum + 1}`).toBe(400);
          checked++;
        }
        if (s.enum) {
          for (const v of s.enum) expect(await refusal(path, p.name, v), `${path} ${p.name}=${v}`).toBeNull();
          expect(await refusal(path, p.name, 'not-a-member'), `${path} ${p.name}`).toBe(400);
          checked++;
        }
        if (s.format === 'date-time') {
          expect(await refusal(path, p.name, '2026-11-22T10:00:00Z'), `${path} ${p.name}`).toBeNull();
          expect(await refusal(path, p.name, '2026-02-30T10:00:00Z'), `${path} ${p.name}`).toBe(400);
          checked++;
        }
        if (s.pattern === '^/') {
          expect(await refusal(path, p.name, '/a/{id}'), `${path} ${p.name}`).toBeNull();
          expect(await refusal(path, p.name, 'a/{id}'), `${path} ${p.name}`).toBe(400);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('every operation that needs a key says so, and lists 401 and 429; environment names and ids list 404 and 422', async () => {
    for (const [path, ops] of Object.entries(paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (path === '/v2/openapi.json') continue;
        expect(op.security, `${method} ${path}`).toEqual([{ bearer: [] }]);
        for (const s of ['401', '429']) expect(op.responses, `${method} ${path} ${s}`).toHaveProperty(s);
        if (op.parameters.some((p) => p.name === 'environment'))
          for (const s of ['404', '422']) expect(op.responses, `${method} ${path} ${s}`).toHaveProperty(s);
        if (path.includes('{'))
          for (const s of ['400', '404']) expect(op.responses, `${method} ${path} ${s}`).toHaveProperty(s);
      }
    }
    // And the server agrees: no key, 401.
    expect((await fetch(`${t.url}/v2/environments`)).status).toBe(401);
  });

  it('every operation that takes a body lists 413, and the server answers it past api_body_limit_bytes', async () => {
    const withBody = Object.entries(paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.requestBody !== undefined)
        .map(([method, op]) => ({ path, method, op })),
    );
    expect(withBody.length).toBeGreaterThan(0);
    for (const { path, method, op } of withBody) expect(op.responses, `${method} ${path}`).toHaveProperty('413');
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(r.status).toBe(413);
    expect(((await r.json()) as { error: { type: string } }).error.type).toBe('payload_too_large');
  });

  it('lists of scopes and events say they are non-empty and unique, as the server refuses otherwise', async () => {
    const keys = paths['/v2/api-keys']?.post?.requestBody?.content['application/json'].schema.properties?.scopes;
    expect(keys).toMatchObject({ minItems: 1, uniqueItems: true });
    const events =
      paths['/v2/webhooks/endpoints']?.post?.requestBody?.content['application/json'].schema.properties?.events;
    expect(events).toMatchObject({ minItems: 1, uniqueItems: true });
    const post = (body: unknown) =>
      fetch(`${t.url}/v2/api-keys`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.status);
    expect(await post({ label: 'x', environment: 'production', scopes: [] })).toBeGreaterThanOrEqual(400);
    expect(
      await post({ label: 'x', environment: 'production', scopes: ['wakes:read', 'wakes:read'] }),
    ).toBeGreaterThanOrEqual(400);
  });
});
