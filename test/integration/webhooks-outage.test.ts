import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

describe('webhook delivery state through a storage outage', () => {
  let t: TestGateway;
  let rx: Receiver;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));

  beforeAll(async () => {
    rx = await startReceiver(clock);
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0 } },
      { clock, spoolRetryMs: 100 },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await rx.close();
  });

  it('keeps an outcome it cannot write in the log, and records it once storage answers', async () => {
    rx.answer = (_q, res, n) => {
      res.writeHead(n === 1 ? 503 : 200);
      res.end();
    };
    const ep = await (
      await fetch(`${t.url}/v2/webhooks/endpoints`, {
        method: 'POST',
        headers: { ...bearer(t.admin), 'content-type': 'application/json' },
        body: JSON.stringify({ url: rx.url, events: ['key.rotated'] }),
      })
    ).json();
    t.gw.events.emit('key.rotated', 'production', { x: 1 });
    await t.gw.events.flush();
    await rx.waitFor(1);
    await t.gw.dispatcher.idle();
    const deliveries = async () =>
      (await (await fetch(`${t.url}/v2/webhooks/deliveries?endpoint_id=${ep.id}`, { headers: bearer(t.admin) })).json())
        .data;
    expect((await deliveries())[0]).toMatchObject({ status: 'failed', attempt: 1 });

    const client = t.gw.store.client;
    const realInsert = client.insert.bind(client);
    let down = true;
    client.insert = ((p: Parameters<typeof client.insert>[0]) =>
      down ? Promise.reject(new Error('storage down (injected)')) : realInsert(p)) as typeof client.insert;
    clock.advance(5000);
    await rx.waitFor(2);
    await t.gw.dispatcher.idle();
    const spooled = readdirSync(join(t.dir, 'wal', 'deliveries')).filter((f) => f.endsWith('.wal'));
    expect(spooled.length).toBeGreaterThan(0);
    expect((await deliveries())[0]).toMatchObject({ status: 'failed', attempt: 1 });
    down = false;
    await until(async () => (await deliveries())[0]?.status === 'delivered', 10_000, 'outcome replayed from the spool');
    expect((await deliveries())[0]).toMatchObject({ status: 'delivered', attempt: 2, response_status: 200 });
    await until(
      () => readdirSync(join(t.dir, 'wal', 'deliveries')).filter((f) => f.endsWith('.wal')).length === 0,
      5000,
      'the log to let go of acknowledged segments',
    );
    // Nothing was sent again.
    clock.advance(3_600_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(rx.got.length).toBe(2);
  });
});
