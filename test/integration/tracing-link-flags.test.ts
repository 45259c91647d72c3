import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Receiver, startReceiver as startHooks } from '../helpers/receiver.js';

// The flags of a webhook attempt's link to the wake that raised its event, as a collector
// decodes them (the OpenTelemetry project's generated definitions, flags included),
// through the real gateway, a real webhook receiver and a real OTLP/HTTP receiver.

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** OTLP's SpanFlags (trace/v1/trace.proto): the W3C trace flags, and whether the context is remote is known, and true. */
const SAMPLED = 0x01;
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

interface RawSpan {
  traceId: string;
  spanId: string;
  kind: number;
  flags: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string; flags: number }[];
}

/** An OTLP/HTTP receiver that keeps each span with its flags and its links' flags. */
async function rawReceiver() {
  const spans: RawSpan[] = [];
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const m = Request.toObject(Request.decode(Buffer.concat(chunks)), { longs: Number, defaults: true });
      for (const rs of m.resourceSpans)
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              kind: s.kind,
              flags: s.flags,
              attributes: Object.fromEntries(
                s.attributes.map((a: { key: string; value: Record<string, unknown> }) => [
                  a.key,
                  a.value.stringValue ?? a.value.intValue,
                ]),
              ),
              links: s.links.map((l: { traceId: Uint8Array; spanId: Uint8Array; flags: number }) => ({
                traceId: hex(l.traceId),
                spanId: hex(l.spanId),
                flags: l.flags,
              })),
            });
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    spans,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('tracing: the flags of a webhook attempt’s link to its wake', () => {
  let origin: TestServer;
  let receiver: Awaited<ReturnType<typeof rawReceiver>>;
  let hooks: Receiver;
  let t: TestGateway;
  const seen: string[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      seen.push(String(req.headers.traceparent));
      res.writeHead(503);
      res.end('down');
    });
    receiver = await rawReceiver();
    hooks = await startHooks();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      webhooks: { allow_insecure_http: true, allow_private_networks: true },
      // Not head-sampled: the wake's spans are exported because it failed (decided at its end).
      tracing: { otlp_url: receiver.url, sample_ratio: 0, always_sample: ['errors'], flush_interval_ms: 20 },
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await receiver.close();
    await hooks.close();
    await origin.close();
  });

  it('never says sampled for a wake whose trace was not: no trace flags known, a remote context', async () => {
    const reg = await call(t.url, t.admin, 'POST', '/v2/webhooks/endpoints', {
      url: hooks.url,
      events: ['wake.error'],
      environment: 'production',
    });
    expect(reg.status).toBe(201);
    const trace = 'f1'.repeat(16);
    const r = await fetch(`${t.url}/open/fail`, { headers: { traceparent: `00-${trace}-00f067aa0ba902b7-00` } });
    expect(r.status).toBe(503);
    await r.arrayBuffer();
    // What the wake's trace had: the origin was told "not sampled".
    expect(seen.at(-1)).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-00$`));
    await hooks.waitFor(1, 15_000);
    let hook: RawSpan | undefined;
    for (let i = 0; i < 400 && hook === undefined; i++) {
      await new Promise((res) => setTimeout(res, 25));
      hook = receiver.spans.find((s) => s.attributes['wakegate.event_type'] === 'wake.error');
    }
    const wake = receiver.spans.find((s) => s.traceId === trace && s.kind === 2);
    expect(wake).toBeDefined();
    expect(hook?.links).toHaveLength(1);
    const link = hook?.links[0];
    expect(link?.traceId).toBe(trace);
    expect(link?.spanId).toBe(wake?.spanId);
    // Not sampled (the payload carries no flags: the bit is not claimed), and said to be a
    // context from elsewhere (it came back through the event's payload, as an extracted one does).
    expect((link?.flags ?? -1) & SAMPLED).toBe(0);
    expect(link?.flags).toBe(HAS_IS_REMOTE | IS_REMOTE);
  });
});
