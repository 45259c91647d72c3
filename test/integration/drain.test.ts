import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Issue #26, item 10: a stop under load resets no request the gateway had accepted. */
describe('draining on stop', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      // A little work at the origin, so requests are in flight when the stop comes.
      setTimeout(() => res.end('ok'), 2);
    });
    t = await startGateway({ routes: [{ name: 'o', prefix: '/', auth: 'none', origins: { production: origin.url } }] });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a keep-alive load across a stop: every accepted request is answered, none reset', async () => {
    const pool = new Pool(t.url, { connections: 16, pipelining: 1, keepAliveTimeout: 30_000 });
    const outcomes = { ok: 0, closeHeader: 0, refused: 0, reset: [] as string[] };
    let stopping = false;
    const worker = async () => {
      // Each worker keeps its connections busy until the gateway refuses new ones.
      for (let i = 0; i < 2000; i++) {
        try {
          const r = await pool.request({ path: `/x/${i}`, method: 'GET' });
          await r.body.text();
          if (r.statusCode === 200) outcomes.ok++;
          if (r.headers.connection === 'close') outcomes.closeHeader++;
        } catch (e) {
          const code = (e as { code?: string }).code ?? String(e);
          // A new connection after the listener closed is refused: never accepted, so never reset.
          if (code === 'ECONNREFUSED') {
            outcomes.refused++;
            if (stopping) return;
          } else outcomes.reset.push(code);
        }
        if (stopping && outcomes.refused > 0) return;
      }
    };
    const load = Promise.all(Array.from({ length: 16 }, worker));
    await new Promise((r) => setTimeout(r, 300));
    stopping = true;
    const t0 = Date.now();
    await t.gw.stop(5000);
    const took = Date.now() - t0;
    await load;
    await pool.close();
    expect(outcomes.reset).toEqual([]);
    expect(outcomes.ok).toBeGreaterThan(50);
    // Requests that came during the drain were served with Connection: close.
    expect(outcomes.closeHeader).toBeGreaterThan(0);
    // The drain did not wait out its whole grace period.
    expect(took).toBeLessThan(5000);
  });
});
