import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';

// Regression tests from a review of the /v2 contract and W3C Trace Context (each failed before its fix).

/**
 * DESIGN.md "Errors": every error the gateway returns has the body
 * `{error: {type, message, param, retry_after, wake_id}}`; and "Every response, proxied or
 * not, carries `x-wake-id`. Every request is a wake, management calls included (route `v2`),
 * so a leaked key's activity can be reviewed." A /v2 call on the main listener is read whole
 * on the edge (size and time limits) before the API sees it: its refusals there must keep
 * that contract, as the same call on the management listener does.
 */
describe('/v2 on the main listener: a body refused at the edge is still a wake', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ server: { api_body_timeout_ms: 300 } });
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  const tooBig = () => `{"label":"${'a'.repeat(1_100_000)}","environment":"production","scopes":["wakes:read"]}`;

  it('the management listener answers an over-limit body 413 with x-wake-id and records it (the reference)', async () => {
    const r = await fetch(`${t.managementUrl}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: tooBig(),
    });
    const body = (await r.json()) as { error: { type: string; wake_id: string | null } };
    expect(r.status).toBe(413);
    expect(r.headers.get('x-wake-id')).toMatch(/^wk_/);
    expect(body.error.wake_id).toBe(r.headers.get('x-wake-id'));
  });

  it('the main listener answers an over-limit body 413 with x-wake-id, wake_id in the body, and a wake of it', async () => {
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json', 'user-agent': 'big-body-main/1' },
      body: tooBig(),
    });
    const body = (await r.json()) as { error: { type: string; wake_id: string | null } };
    expect(r.status).toBe(413);
    expect(body.error.type).toBe('payload_too_large');
    const wakeId = r.headers.get('x-wake-id');
    expect(wakeId ?? 'no x-wake-id header', 'no x-wake-id on the 413').toMatch(/^wk_/);
    expect(body.error.wake_id).toBe(wakeId);
    await flushed(t.gw);
    const w = await fetch(`${t.url}/v2/wakes/${wakeId}`, { headers: bearer(t.admin) });
    expect(w.status).toBe(200);
    expect(await w.json()).toMatchObject({ route: 'v2', status: 413, path: '/v2/api-keys' });
  });

  it('the main listener answers a body that never arrives 408 with x-wake-id and wake_id in the body', async () => {
    const port = Number(new URL(t.url).port);
    const answer = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.write(
          'POST /v2/api-keys HTTP/1.1\r\nHost: x\r\n' +
            `Authorization: Bearer ${t.admin}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
        );
      });
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (c: string) => {
        got += c;
      });
      s.on('close', () => resolve(got));
      s.on('error', reject);
      setTimeout(() => s.destroy(), 5000);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(answer.toLowerCase()).toMatch(/\r\nx-wake-id: wk_/);
    const json = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { wake_id: string | null } };
    expect(json.error.wake_id).toMatch(/^wk_/);
  });
});
