import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { ok, route, type Scripted, scripted, sleep } from '../helpers/scripted-origin.js';

// Regression tests from a review of the proxy's client to origins (src/proxy/origin-client.ts): each failed before its fix.
/**
 * docs/proxy.md: "A request sent on a kept connection that the origin closed before
 * answering is sent once more on a new connection when that is safe". The retry takes
 * the pool's next idle connection instead, which the origin may have dropped as well
 * (all of them, after the origin restarts behind a NAT or load balancer).
 */
describe('a GET lost on a kept connection is sent again on a new connection', () => {
  let t: TestGateway;
  let o: Scripted;

  beforeAll(async () => {
    o = await scripted((head, conn, n, s) => {
      const target = head.split(' ')[1] as string;
      // Every kept connection is dead for /drop (unanswered, closed); a new one answers.
      if (target.includes('/drop') && n > 0) return void s.destroy();
      if (target.includes('/slow')) return void setTimeout(() => s.write(ok(`slow ${conn}`)), 100);
      s.write(ok(`own ${target} on ${conn}`));
    });
    t = await startGateway({ routes: [route('o', o.url)] });
  });
  afterAll(async () => {
    await t?.cleanup();
    await o?.close();
  });

  it('two kept connections both dropped: the GET still gets its answer', async () => {
    // Two connections kept idle.
    await Promise.all([fetch(`${t.url}/o/slow1`), fetch(`${t.url}/o/slow2`)].map((p) => p.then((r) => r.text())));
    expect(o.connections).toBe(2);
    await sleep(50);
    const r = await fetch(`${t.url}/o/drop`);
    const text = await r.text();
    expect({ status: r.status, text }).toEqual({ status: 200, text: 'own /o/drop on 2' });
  });
});
