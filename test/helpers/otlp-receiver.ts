import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
// The OpenTelemetry project's own generated definitions (protobufjs): what a collector decodes with.
import root from '@opentelemetry/otlp-transformer/build/src/generated/root.js';

// Its declaration types the root loosely (protobufjs' Root); the generated namespaces are there at run time.
// biome-ignore lint/suspicious/noExplicitAny: the generated message class, reached by its proto path
const Request = (root as any).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest as {
  decode(b: Uint8Array): unknown;
};

/** A decoded span, its ids as lowercase hex and its attributes as a plain record. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 2 SERVER, 3 CLIENT. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  links: { traceId: string; spanId: string }[];
  status: { code: number; message: string };
  /** The resource's attributes (service.name). */
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Each export request's headers. */
  requests: IncomingMessage['headers'][];
  /** Resolves once `n` spans have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const hex = (b: Uint8Array | null | undefined): string => (b ? Buffer.from(b).toString('hex') : '');

type KeyValue = { key: string; value: Record<string, unknown> };
function attrs(list: KeyValue[] | null | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list ?? []) {
    const v = kv.value;
    if (v.stringValue != null) out[kv.key] = v.stringValue as string;
    else if (v.intValue != null) out[kv.key] = Number(v.intValue);
    else if (v.doubleValue != null) out[kv.key] = v.doubleValue as number;
    else if (v.boolValue != null) out[kv.key] = v.boolValue as boolean;
  }
  return out;
}

const nanos = (v: unknown): bigint => BigInt(String(v));

/** Decodes one OTLP/HTTP protobuf export request into spans. */
export function decodeSpans(body: Uint8Array): ReceivedSpan[] {
  // biome-ignore lint/suspicious/noExplicitAny: protobufjs' decoded message, read field by field
  const req = Request.decode(body) as any;
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name,
          kind: s.kind,
          startNs: nanos(s.startTimeUnixNano),
          endNs: nanos(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          events: (s.events ?? []).map((e: { name: string; attributes: KeyValue[] }) => ({
            name: e.name,
            attributes: attrs(e.attributes),
          })),
          links: (s.links ?? []).map((l: { traceId: Uint8Array; spanId: Uint8Array }) => ({
            traceId: hex(l.traceId),
            spanId: hex(l.spanId),
          })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource,
        });
  }
  return out;
}

/**
 * An OTLP/HTTP traces receiver on 127.0.0.1: decodes each export request with the
 * generated definitions and keeps its spans. `answer` picks the status (default 200);
 * `hang` never answers (a collector stuck).
 */
export async function startReceiver(o: { answer?: () => number; hang?: boolean } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: IncomingMessage['headers'][] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push(req.headers);
      if (o.hang) return;
      const status = o.answer?.() ?? 200;
      if (status === 200) spans.push(...decodeSpans(Buffer.concat(chunks)));
      res.writeHead(status, { 'content-type': 'application/x-protobuf' });
      res.end();
      for (const w of waiters.splice(0)) {
        if (spans.length >= w.n) w.resolve();
        else waiters.push(w);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    requests,
    waitFor(n, timeoutMs = 10_000) {
      if (spans.length >= n) return Promise.resolve(spans);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`${spans.length} of ${n} spans within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(t);
            resolve(spans);
          },
        });
      });
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
