import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/receiver.js';

// Regression tests from a review of webhook delivery (2026-11-28).

/*
 * Review (webhooks): hostile or unusual receivers, through the real gateway and real
 * receivers on loopback. The attempt timeout is shortened (1.5 s) so nothing waits long.
 */

const TIMEOUT_MS = 1500;

interface RawReceiver {
  url: string;
  close: () => Promise<void>;
  /** Bytes of response body written to the gateway before it hung up. */
  written: () => number;
  requests: () => number;
}

/** A receiver whose answer `answer` writes by hand (it sees the request once its body is read). */
async function rawReceiver(answer: (res: ServerResponse, count: (n: number) => void) => void): Promise<RawReceiver> {
  let written = 0;
  let requests = 0;
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      requests++;
      answer(res, (n) => {
        written += n;
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    written: () => written,
    requests: () => requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('the webhook sender against hostile receivers', () => {
  let t: TestGateway;
  const receivers: RawReceiver[] = [];

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: read loosely
    return { status: r.status, body: (await r.json()) as any };
  };

  /** Registers `url`, sends it a test event, and waits for that delivery's first attempt to be stored. */
  const firstAttempt = async (url: string) => {
    const ep = await api('POST', '/v2/webhooks/endpoints', { url, events: ['key.rotated'] });
    expect(ep.status).toBe(201);
    const sent = await api('POST', `/v2/webhooks/endpoints/${ep.body.id}/test`);
    expect(sent.status).toBe(201);
    const id = sent.body.id as string;
    let d: Record<string, unknown> = {};
    await until(
      async () => {
        d = (await api('GET', `/v2/webhooks/deliveries/${id}`)).body;
        return (d.attempt as number) >= 1;
      },
      TIMEOUT_MS + 8000,
      'the first attempt stored',
    );
    return d;
  };

  beforeAll(async () => {
    t = await startGateway({
      webhooks: {
        allow_insecure_http: true,
        allow_private_networks: true,
        timeout_ms: TIMEOUT_MS,
        jitter: 0,
        // One retry an hour away: only the first attempt is under test.
        retry_schedule_s: [3600],
      },
    });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t.cleanup();
  });

  // SPEC: "response in 2xx within 10 s -> delivered". DESIGN: "2xx within timeout_ms is delivered".
  it('a receiver that answers 200 at once and then never ends its body: the 200 is recorded, not "no answer"', async () => {
    const rx = await rawReceiver((res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
      res.write('ok');
      // ...and the body never ends.
    });
    receivers.push(rx);
    const d = await firstAttempt(rx.url);
    expect(rx.requests()).toBe(1);
    // The receiver answered 200 well within the timeout: the attempt is delivered, its status 200.
    expect({ status: d.status, response_status: d.response_status }).toEqual({
      status: 'delivered',
      response_status: 200,
    });
  });

  it('a receiver that answers 200 and streams an endless body: the gateway reads no more than it keeps (20 KB), not everything for the whole timeout', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const rx = await rawReceiver((res, count) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let open = true;
      res.on('close', () => {
        open = false;
      });
      const pump = () => {
        while (open) {
          count(chunk.length);
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    receivers.push(rx);
    await firstAttempt(rx.url);
    await until(() => rx.written() > 0, 2000, 'the receiver wrote');
    // Kernel socket buffers hold a few MB at most: anything past that was read by the gateway,
    // which keeps only 20 KB of it. A hostile receiver costs the control thread this much reading
    // (and CPU) per attempt, four attempts at once per endpoint.
    expect(rx.written()).toBeLessThan(16 * 1024 * 1024);
  });

  // DESIGN: "A stored receiver response body is capped (20 KB)."
  it('a receiver body of 20 KB of bytes that are not UTF-8 is stored within 20 KB, not tripled', async () => {
    const rx = await rawReceiver((res) => {
      res.writeHead(500, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(20 * 1024, 0xff));
    });
    receivers.push(rx);
    const d = await firstAttempt(rx.url);
    expect(d.response_status).toBe(500);
    const attempts = d.attempts as { response_body: string }[];
    expect(Buffer.byteLength(String(d.response_body))).toBeLessThanOrEqual(20 * 1024);
    expect(Buffer.byteLength(String(attempts[0]?.response_body))).toBeLessThanOrEqual(20 * 1024);
  });
});
