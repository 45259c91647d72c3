import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Headers: DESIGN ("Identifiers and secrets"): a gateway key "never reaches an origin or
 * storage, whatever the route's auth and wherever it stands (headers, …), in any
 * spelling that the receiving application would decode". The proxy already treats HTTP
 * Basic credentials as such a spelling (it drops `Authorization: Basic <base64 of a key>`
 * before the origin, src/proxy/headers.ts basicHoldsKey). And docs/security.md: origins
 * behind nginx (underscores_in_headers), CGI/PHP, Django and Rack read `_` as `-` in a
 * header's name, which the gateway honours for its own fields.
 */
// Regression tests from a review of redaction (each failed before its fix).
describe('review: redaction of headers', () => {
  let origin: TestServer;
  let t: TestGateway;
  const seen: Record<string, string | string[] | undefined>[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    // An operator who wants to see the origin's own Authorization schemes in wakes leaves
    // `authorization` out of redact_headers; gateway keys must stay out all the same.
    t = await startGateway({
      capture: { redact_headers: ['cookie', 'set-cookie', 'x-api-key'] },
      routes: [{ name: 'pub', prefix: '/pub', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** A GET with raw header lines as given (node:http keeps their spelling; given a list, it adds no Host: sent here). */
  const get = (path: string, headers: [string, string][]) =>
    new Promise<{ status: number; wakeId: string }>((resolve, reject) => {
      const u = new URL(`${t.url}${path}`);
      const lines = [['Host', u.host], ...headers].flat();
      const req = http.request({ host: u.hostname, port: u.port, path, method: 'GET', headers: lines });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, wakeId: String(res.headers['x-wake-id']) }));
      });
      req.on('error', reject);
      req.end();
    });
  // biome-ignore lint/suspicious/noExplicitAny: wakes are read loosely
  const wake = async (id: string): Promise<any> => {
    await flushed(t.gw);
    return (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
  };
  const stored = async () => JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));

  it('a gateway key sent as HTTP Basic credentials (curl -u svc_live_…:) is not stored, as it is not forwarded', async () => {
    const key = `svc_live_${newSecret()}`;
    const basic = Buffer.from(`${key}:`).toString('base64');
    seen.length = 0;
    const r = await get('/pub/basic', [['Authorization', `Basic ${basic}`]]);
    // The proxy knows this spelling: the origin never sees it.
    expect(seen.length === 0 || seen[0]?.authorization === undefined).toBe(true);
    const w = await wake(r.wakeId);
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    const shown = JSON.stringify(w.request.headers);
    // The stored header decodes to the key: base64 is a spelling anyone reading the wake undoes.
    expect(shown).not.toContain(basic);
    expect(await stored()).not.toContain(basic);
  });

  it('a redacted header spelled with underscores (X_Api_Key), which nginx/Django/Rack/PHP read as x-api-key, is not stored', async () => {
    const r = await get('/pub/underscore', [['X_Api_Key', 'xk-underscore-secret-1']]);
    expect(r.status).toBe(200);
    const w = await wake(r.wakeId);
    expect(w.request, 'the wake kept its detail').not.toBeNull();
    expect(JSON.stringify(w.request.headers)).not.toContain('xk-underscore-secret-1');
    expect(await stored()).not.toContain('xk-underscore-secret-1');
  });
});
