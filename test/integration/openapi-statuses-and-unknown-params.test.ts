// Regression tests from a review of the /v2 API and CLI (2026-11-28).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, call, startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * docs/api.md (generated from GET /v2/openapi.json): "unknown query parameters and body fields are 400
 * `invalid_request` naming `param`"; DESIGN.md "Errors": "Unknown query parameters and body fields are
 * 400 invalid_request naming param." Each operation's "Responses:" line is the list of what it answers.
 */
describe('the OpenAPI document and docs/api.md against what the server answers', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ webhooks: { allow_insecure_http: true, allow_private_networks: true } });
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('GET /v2/openapi.json?bogus=1 is 400 invalid_request naming bogus, as every other /v2 call is', async () => {
    const r = await fetch(`${t.url}/v2/openapi.json?bogus=1`);
    const body = (await r.json()) as { error?: { type: string; param: string } };
    expect(r.status).toBe(400);
    expect(body.error).toMatchObject({ type: 'invalid_request', param: 'bogus' });
  });

  it('lists every status the server gives: 400 for GET /v2/environments?bogus=1, 413 for a 2 MiB body to rotate-secret', async () => {
    const doc = (await (await fetch(`${t.url}/v2/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    const answered: { op: string; status: number; documented: string[] }[] = [];

    const envs = await fetch(`${t.url}/v2/environments?bogus=1`, { headers: bearer(t.admin) });
    await envs.arrayBuffer();
    answered.push({
      op: 'get /v2/environments',
      status: envs.status,
      documented: Object.keys(doc.paths['/v2/environments']?.get?.responses ?? {}),
    });

    const ep = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: 'http://127.0.0.1:9/hook',
      events: ['*'],
    });
    expect(ep.status).toBe(201);
    const big = await fetch(`${t.url}/v2/webhooks/endpoints/${ep.body.id}/rotate-secret`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: `{"x":"${'a'.repeat(2 * 1024 * 1024)}"}`,
    });
    await big.arrayBuffer();
    answered.push({
      op: 'post /v2/webhooks/endpoints/{endpoint_id}/rotate-secret',
      status: big.status,
      documented: Object.keys(doc.paths['/v2/webhooks/endpoints/{endpoint_id}/rotate-secret']?.post?.responses ?? {}),
    });

    expect(answered.map((a) => a.status)).toEqual([400, 413]);
    const undocumented = answered
      .filter((a) => !a.documented.includes(String(a.status)))
      .map((a) => `${a.op} ${a.status}`);
    expect(undocumented, 'statuses the server gives that its OpenAPI document (and docs/api.md) does not list').toEqual(
      [],
    );
  });
});
