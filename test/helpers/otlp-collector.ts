// A real OTLP collector on loopback and the real export POST, for the export path's tests (from a review, 2026-11-28).
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../../src/config/index.js';
import { tracingDefaults } from '../../src/config/tracing.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import type { Timers } from '../../src/tracing/exporter.js';
import { createTracing, type Tracing } from '../../src/tracing/index.js';
import type { WebhookAttempt } from '../../src/tracing/webhook-spans.js';

/** A collector on 127.0.0.1: `handle(n, req, res, body)` answers the n-th export request as it likes. */
export async function collector(handle: (n: number, req: IncomingMessage, res: ServerResponse, body: Buffer) => void) {
  let seen = 0;
  const headers: IncomingMessage['headers'][] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    headers.push(req.headers);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(++seen, req, res, Buffer.concat(chunks)));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    port,
    seen: () => seen,
    headers,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Timers on a clock of the test's: each one armed is kept with when it is due. */
export function clock() {
  let now = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  let seq = 0;
  const timers: Timers = {
    setTimeout(fn, ms) {
      due.set(++seq, { at: now + ms, fn });
      return seq;
    },
    clearTimeout(h) {
      due.delete(h as number);
    },
  };
  const next = (): number => {
    const [id, t] = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0] ?? [];
    if (id === undefined || t === undefined) throw new Error('no timer armed');
    due.delete(id);
    const after = t.at - now;
    now = t.at;
    t.fn();
    return after;
  };
  return { timers, next, armed: () => due.size, waits: () => [...due.values()].map((t) => t.at - now) };
}

export const until = async (ok: () => boolean | Promise<boolean>, ms = 5000) => {
  const t0 = performance.now();
  while (!(await ok())) {
    if (performance.now() - t0 > ms) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
};

export const attempt = (over: Partial<WebhookAttempt> = {}): WebhookAttempt => ({
  kind: 'webhook',
  deliveryId: 'del_1',
  eventType: 'wake.error',
  attempt: 1,
  url: 'https://hooks.example.com/in',
  payload: '{}',
  startMs: 1_700_000_000_000,
  durationMs: 5,
  status: 200,
  error: null,
  ...over,
});

/** The real tracing part (real POST through undici) against `url`; its log lines and metrics kept. */
export function tracingTo(url: string, over: Partial<typeof tracingDefaults> = {}, timers?: Timers) {
  const metrics = createMetrics({ process: false });
  const lines: string[] = [];
  const tracing: Tracing = createTracing({
    cfg: {
      tracing: { ...tracingDefaults, otlp_url: url, flush_interval_ms: 10, ...over },
      routes: [] as unknown as Config['routes'],
    },
    log: createLogger('debug', (l) => lines.push(l)),
    metrics,
    ...(timers ? { timers } : {}),
  });
  const metric = async (line: string): Promise<number> => {
    const text = await metrics.registry.metrics();
    const found = text.split('\n').find((l) => l.startsWith(`${line} `));
    return found === undefined ? 0 : Number(found.slice(line.length + 1));
  };
  return { tracing, metrics, lines, metric };
}
