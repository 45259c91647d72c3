import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OriginPool } from '../../src/proxy/origin-client.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { route, type Scripted, scripted, sleep } from '../helpers/scripted-origin.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function settle(t: TestGateway): Promise<number> {
  await t.gw.batcher.flush();
  for (let i = 0; i < 6; i++) {
    gc();
    await sleep(30);
  }
  return process.memoryUsage().heapUsed;
}

// Regression tests from a review of the proxy's client to origins (src/proxy/origin-client.ts): each failed before its fix.
/**
 * Every origin connection has its own llhttp parser (`new P()`), and none is ever
 * `close()`d. Node's HTTPParser binding is not weak: an unclosed parser is never
 * collected, and with it everything its callbacks reach (the OriginConnection, its
 * socket, its last request head). undici did not leak a connection it closed.
 */
describe('connections the origin client closes are collected', () => {
  let t: TestGateway;
  let closing: Scripted;
  let kept: Scripted;

  beforeAll(async () => {
    // An origin that closes every connection after its answer (Connection: close), as many do.
    closing = await scripted((_h, _c, _n, s) => {
      s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    });
    // The control: the same answer on a kept connection.
    kept = await scripted((_h, _c, _n, s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    t = await startGateway({ routes: [route('closing', closing.url), route('kept', kept.url)] });
  });
  afterAll(async () => {
    await t?.cleanup();
    await closing?.close();
    await kept?.close();
  });

  const run = async (n: number, pad: string, name = 'closing') => {
    for (let i = 0; i < n; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          const r = await fetch(`${t.url}/${name}/x`, { headers: { 'x-pad': pad } });
          expect(r.status).toBe(200);
          await r.text();
        }),
      );
    }
  };

  it('closed origin connections are garbage collected (FinalizationRegistry)', async () => {
    let closed = 0;
    let collected = 0;
    const reg = new FinalizationRegistry(() => {
      collected++;
    });
    const gone = OriginPool.prototype.gone;
    OriginPool.prototype.gone = function (this: OriginPool, c) {
      closed++;
      reg.register(c, null);
      return gone.call(this, c);
    };
    try {
      await run(300, 'p');
      await sleep(200);
      await settle(t);
    } finally {
      OriginPool.prototype.gone = gone;
    }
    expect(closed).toBeGreaterThanOrEqual(300);
    // Nearly all of them should be collectable once closed.
    expect(collected).toBeGreaterThan(closed / 2);
  });

  it('heap does not grow with the number of closed origin connections', async () => {
    // A request head of ~16 KiB: each connection keeps its last one.
    const pad = 'x'.repeat(16_000);
    await run(50, pad, 'kept');
    await run(50, pad, 'closing');
    // A leak keeps every closed connection's head (16 KiB): it shows in every attempt. The
    // heap of a loaded host moves by some hundreds of KiB between two readings (batches,
    // the store's buffers): an attempt that shows growth is tried again, up to three.
    const attempts: number[] = [];
    for (let i = 0; i < 3; i++) {
      await sleep(200);
      const start = await settle(t);
      await run(400, pad, 'kept');
      await sleep(200);
      const mid = await settle(t);
      await run(400, pad, 'closing');
      await sleep(200);
      const end = await settle(t);
      const keptPerRequest = (mid - start) / 400;
      const closingPerRequest = (end - mid) / 400;
      attempts.push(closingPerRequest - keptPerRequest);
      if (closingPerRequest - keptPerRequest < 2048) break;
    }
    // 400 requests, each on a connection now closed, keep no more than 2 KiB each beyond what kept ones do.
    expect(
      Math.min(...attempts),
      `per request, each attempt: ${attempts.map((a) => a.toFixed(0)).join(', ')}`,
    ).toBeLessThan(2048);
  });
});
