import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

/*
 * A delivery's outcome that is only in the write-ahead log at a stop (storage down then) is in
 * storage before the restarted gateway resumes its deliveries: the delivered delivery is not
 * sent again (docs/webhooks.md: an attempt is never counted twice).
 */
describe('a restart after a stop while storage was down', () => {
  let t: TestGateway;
  let rx: Receiver;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const values = { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0 } };

  beforeAll(async () => {
    rx = await startReceiver(clock);
    t = await startGateway(values, { clock, spoolRetryMs: 100 });
  });
  afterAll(async () => {
    await t.cleanup();
    await rx.close();
  });

  it('does not send again a delivery whose delivered outcome was only in the log', async () => {
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
    await t.gw.dispatcher.idle(); // attempt 1 (503) stored: failed, retry in 5 s

    const client = t.gw.store.client;
    const realInsert = client.insert.bind(client);
    let down = true;
    client.insert = ((p: Parameters<typeof client.insert>[0]) =>
      down ? Promise.reject(new Error('storage down (injected)')) : realInsert(p)) as typeof client.insert;
    clock.advance(5000);
    await rx.waitFor(2); // attempt 2 delivered; its outcome only in the log
    await t.gw.dispatcher.idle();
    await t.gw.stop(); // storage still down: the outcome stays in the log
    down = false;

    clock.advance(3_600_000);
    const dir = t.dir;
    t = await startGateway(values, { clock, spoolRetryMs: 100, dir, admin: t.admin });
    const read = async () =>
      (await (await fetch(`${t.url}/v2/webhooks/deliveries?endpoint_id=${ep.id}`, { headers: bearer(t.admin) })).json())
        .data;
    await until(async () => (await read())[0]?.status === 'delivered', 10_000, 'the logged outcome stored');
    expect((await read())[0]).toMatchObject({ status: 'delivered', attempt: 2, response_status: 200 });
    await new Promise((r) => setTimeout(r, 500));
    expect(rx.got.length, 'sends in all (the delivered one not sent again)').toBe(2);
  });
});
