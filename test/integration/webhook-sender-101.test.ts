import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { sendAttempt } from '../../src/webhooks/sender.js';
import { dispatcherHarness, endpoint } from '../helpers/webhook-fakes.js';

/*
 * A receiver that answers a delivery with `101 Switching Protocols` (Upgrade + Connection: upgrade).
 * Node's client takes it for an upgrade and closes the socket with neither a 'response' nor an
 * 'error' on the request; the attempt used to hang for good, holding its concurrency slot (a
 * few such endpoints stopped delivery for everyone). It is a failed attempt, at once.
 */
let server: net.Server;
let port = 0;
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('data', () => {
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

const HUNG = Symbol('hung');
const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<typeof HUNG>((r) => setTimeout(() => r(HUNG), ms))]);

describe('a webhook receiver answering 101', () => {
  it('sendAttempt settles (as a failed attempt) within its timeout', async () => {
    const ep = endpoint('we_up', { url: `http://127.0.0.1:${port}/hook` });
    const d = pendingDelivery(
      {
        environment: 'production',
        endpoint_id: ep.id,
        event_id: 'evt_x',
        event_type: 'wake.error',
        payload: '{}',
        max_attempts: 8,
      },
      Date.now(),
    );
    const out = await within(
      sendAttempt(d, ep, { attempt: 1, timeoutMs: 300, allowPrivate: true, allowInsecure: true, nowMs: Date.now() }),
      3000,
    );
    expect(out, 'attempt never settled (timeout 300 ms, waited 3 s)').not.toBe(HUNG);
    expect(out).toMatchObject({ ok: false, status: 101, error: 'the endpoint answered with an upgrade' });
  });

  it('the dispatcher records the attempt and frees its concurrency slot', async () => {
    const ep = endpoint('ep_a', { url: `http://127.0.0.1:${port}/hook` });
    const h = dispatcherHarness({
      endpoints: [ep],
      respond: (d, n) =>
        sendAttempt(d, ep, { attempt: n, timeoutMs: 300, allowPrivate: true, allowInsecure: true, nowMs: Date.now() }),
    });
    const ds = [h.delivery(), h.delivery(), h.delivery(), h.delivery(), h.delivery()];
    await h.dispatcher.add(ds);
    await new Promise((r) => setTimeout(r, 2000));
    h.dispatcher.tick();
    // Five deliveries, max_per_endpoint 4: after 2 s (timeouts of 300 ms) all five must have been tried.
    expect(h.sent.length, 'attempts started').toBe(5);
    expect(ds.map((d) => h.rows.get(d.id).status)).toEqual(['failed', 'failed', 'failed', 'failed', 'failed']);
  });
});
