// Regression tests from a review of the OTLP export path (2026-11-28): an https collector that takes the connection and never finishes the TLS handshake.

import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { attempt, tracingTo, until } from '../helpers/otlp-collector.js';
import { get, routes, traceOrigin } from '../helpers/tracing.js';

/*
 * docs/tracing.md: "each request abandoned after export_timeout_ms", and "At a stop, what is in
 * flight and what waits get 2 s together ... when the collector does not answer what was in
 * flight within the 2 s, it is abandoned". Both rest on the AbortSignal given to undici.request.
 * But while undici is still connecting (here: TCP accepted, TLS handshake never answered: a
 * stuck TLS-terminating load balancer, or a black-holed address for a plain connect) the abort
 * does not end the POST: it ends only at undici's own connect timeout (10 s,
 * UND_ERR_CONNECT_TIMEOUT). So export_timeout_ms is not honoured, and a stop waits for that
 * connect timeout instead of its 2 s.
 */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A TCP listener that accepts and never says a word: an https:// URL to it never completes its handshake. */
async function silentTls() {
  const socks = new Set<net.Socket>();
  const s = net.createServer((c) => {
    socks.add(c);
    c.on('error', () => {});
    c.on('close', () => socks.delete(c));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const c of socks) c.destroy();
        s.close(() => r());
      }),
  );
  return { url: `https://127.0.0.1:${(s.address() as AddressInfo).port}/v1/traces`, connections: () => socks.size };
}

describe('a collector whose TLS handshake never completes', () => {
  it('an export is abandoned after export_timeout_ms (300 ms), not undici’s 10 s connect timeout', async () => {
    const c = await silentTls();
    const t = tracingTo(c.url, { max_retries: 0, export_timeout_ms: 300 });
    cleanups.push(() => t.tracing.close());
    const t0 = performance.now();
    t.tracing.webhook(attempt());
    const done = await until(
      async () => (await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')) >= 1,
      4000,
    );
    const ms = Math.round(performance.now() - t0);
    // 300 ms of timeout plus the 10 ms flush: 4 s is a generous bound.
    expect(done, `the export was still pending after ${ms} ms (export_timeout_ms: 300)`).toBe(true);
  }, 20_000);

  it('the gateway’s stop does not wait for the connect: it ends within its grace and the 2 s of the last export', async () => {
    const c = await silentTls();
    const origin = await traceOrigin();
    cleanups.push(() => origin.close());
    const g = await startGateway({
      routes: routes(origin.url),
      tracing: { otlp_url: c.url, sample_ratio: 1, flush_interval_ms: 10, export_timeout_ms: 30_000 },
    });
    cleanups.push(() => g.cleanup());
    expect((await get(`${g.url}/open/x`)).status).toBe(200);
    // The export is connecting (the handshake hangs).
    expect(await until(() => c.connections() > 0, 3000)).toBe(true);
    const t0 = performance.now();
    await g.stop(); // a 2 s grace (test helper), idle here
    const ms = performance.now() - t0;
    // Idle drain (~250 ms) + 2 s for the export in flight, plus slack for the store's close.
    expect(ms, 'ms the stop took').toBeLessThan(4000);
  }, 30_000);
});
