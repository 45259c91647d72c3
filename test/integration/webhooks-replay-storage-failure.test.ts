import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { DeliveryRecord } from '../../src/webhooks/records.js';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { type Receiver, startReceiver, until } from '../helpers/receiver.js';

// Regression tests from a review of webhook delivery (2026-11-28).

/*
 * Review (webhooks): POST /v2/webhooks/deliveries/{id}/replay of a FAILED delivery first ends
 * the original's own retries (supersede), then stores the replay. docs/webhooks.md: "A replay
 * that cannot be queued (503, below) changes nothing." When storing the replay fails (the
 * storage refuses one insert: a ClickHouse server restarting, TOO_MANY_PARTS, a timeout), the
 * call answers 500, the replay does not exist, and the original has already been told it was
 * superseded: the event is never sent again.
 *
 * Real gateway and receiver on loopback; the one failed insert is injected on the gateway's
 * own deliveries table (only the insert of the replay's row fails; reads and the outcomes
 * written after it succeed).
 */

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

describe('a replay whose row cannot be stored', () => {
  const clock = new ManualClock(T0);
  let t: TestGateway;
  let rx: Receiver;

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    return { status: r.status, body: (await r.json()) as any };
  };

  beforeAll(async () => {
    rx = await startReceiver(clock);
    // The first attempt fails (500); every later one is delivered.
    rx.answer = (_req, res, n) => {
      res.statusCode = n === 1 ? 500 : 200;
      res.end(n === 1 ? 'down' : 'ok');
    };
    t = await startGateway(
      { webhooks: { allow_insecure_http: true, allow_private_networks: true, jitter: 0, timeout_ms: 2000 } },
      { clock },
    );
  });
  afterAll(async () => {
    await t.cleanup();
    await rx.close();
  });

  it('a replay answered 500 (its row not stored) leaves the failed original retrying: the event still reaches the receiver', async () => {
    const ep = await api('POST', '/v2/webhooks/endpoints', { url: `${rx.url}/hook`, events: ['key.rotated'] });
    expect(ep.status).toBe(201);
    const sent = await api('POST', `/v2/webhooks/endpoints/${ep.body.id}/test`);
    expect(sent.status).toBe(201);
    const id = sent.body.id as string;
    await until(
      async () => (await api('GET', `/v2/webhooks/deliveries/${id}`)).body.status === 'failed',
      5000,
      'the first attempt failed',
    );
    expect(rx.got).toHaveLength(1);

    // The next insert of a replay's row fails once.
    const table = t.gw.deliveries;
    const put = table.put.bind(table);
    let failOnce = true;
    table.put = async (rows: readonly DeliveryRecord[]) => {
      if (failOnce && rows.some((r) => r.is_replay)) {
        failOnce = false;
        throw new Error('Code: 252. DB::Exception: Too many parts (simulated insert failure)');
      }
      return put(rows);
    };

    const replay = await api('POST', `/v2/webhooks/deliveries/${id}/replay`);
    expect(failOnce).toBe(false);
    expect(replay.status).not.toBe(201);

    // Storage answers again; the original's retry (5 s after its first attempt) falls due.
    await new Promise((r) => setTimeout(r, 300));
    clock.advance(6000);
    await until(() => rx.got.length >= 2, 4000, 'the event sent again').catch(() => {});
    // Its outcome is written after the receiver answered.
    await until(
      async () => (await api('GET', `/v2/webhooks/deliveries/${id}`)).body.status !== 'failed',
      4000,
      'the retry recorded',
    ).catch(() => {});
    const original = (await api('GET', `/v2/webhooks/deliveries/${id}`)).body;
    // A note naming a replay must name one that exists.
    const named = /superseded by the replay (dlv_\w+)/.exec(String(original.response_body))?.[1];
    const namedStatus = named ? (await api('GET', `/v2/webhooks/deliveries/${named}`)).status : null;
    expect({
      received: rx.got.length,
      original_status: original.status,
      note: original.response_body,
      named_replay_status: namedStatus,
    }).toEqual({
      received: 2,
      original_status: 'delivered',
      note: 'ok',
      named_replay_status: null,
    });
  });
});
