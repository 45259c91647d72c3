import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
// The OpenTelemetry project's own generated definitions (protobufjs), as the receiver decodes with.
import root from '@opentelemetry/otlp-transformer/build/src/generated/root.js';
import type { OtlpAttrs, OtlpKey, SpanSink, SpanStart } from '../../src/tracing/otlp.js';

/**
 * The oracle of tracing/otlp.ts: a SpanSink that makes, of the same calls, span
 * objects shaped like the OpenTelemetry SDK's ReadableSpan, for the project's generic
 * serializer (ProtobufTraceSerializer) to encode.
 */

type Attr = string | number | boolean;
type HrTime = [seconds: number, nanos: number];
interface SdkSpan {
  name: string;
  kind: number;
  spanContext(): { traceId: string; spanId: string; traceFlags: number };
  parentSpanContext: { traceId: string; spanId: string; traceFlags: number; isRemote: boolean } | undefined;
  startTime: HrTime;
  endTime: HrTime;
  duration: HrTime;
  ended: true;
  attributes: Record<string, Attr>;
  droppedAttributesCount: 0;
  events: { name: string; time: HrTime; attributes: Record<string, Attr> }[];
  droppedEventsCount: 0;
  links: {
    context: { traceId: string; spanId: string; traceFlags: number; isRemote: boolean };
    attributes: Record<string, Attr>;
  }[];
  droppedLinksCount: 0;
  status: { code: number; message?: string };
  resource: { attributes: Record<string, Attr> };
  instrumentationScope: { name: string; version: string };
}

/** ms since the epoch as the SDK's HrTime (whole seconds, the rest in nanoseconds). */
const hr = (ms: number): HrTime => {
  const s = Math.floor(ms / 1000);
  return [s, Math.round((ms - s * 1000) * 1e6)];
};

export class SdkSpans implements SpanSink {
  readonly spans: SdkSpan[] = [];
  private current: Record<string, Attr> = {};
  private readonly resource: { attributes: Record<string, Attr> };
  private readonly scope: { name: string; version: string };

  constructor(o: { serviceName: string; scopeName: string; scopeVersion: string }) {
    this.resource = { attributes: { 'service.name': o.serviceName } };
    this.scope = { name: o.scopeName, version: o.scopeVersion };
  }

  private get last(): SdkSpan {
    return this.spans[this.spans.length - 1] as SdkSpan;
  }

  begin(s: SpanStart): void {
    const ctx = { traceId: s.traceId, spanId: s.spanId, traceFlags: 1 };
    const attributes: Record<string, Attr> = {};
    this.current = attributes;
    this.spans.push({
      name: s.name,
      // The API's SpanKind: OTLP's minus one.
      kind: s.kind - 1,
      spanContext: () => ctx,
      parentSpanContext:
        s.parentSpanId === ''
          ? undefined
          : { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: 1, isRemote: s.remoteParent },
      startTime: hr(s.startMs),
      endTime: hr(s.endMs),
      duration: hr(s.endMs - s.startMs),
      ended: true,
      attributes,
      droppedAttributesCount: 0,
      events: [],
      droppedEventsCount: 0,
      links: [],
      droppedLinksCount: 0,
      status: { code: 0 },
      resource: this.resource,
      instrumentationScope: this.scope,
    });
  }

  str(key: OtlpKey, v: string): void {
    this.current[key.name] = v;
  }

  num(key: OtlpKey, v: number): void {
    this.current[key.name] = v;
  }

  bool(key: OtlpKey, v: boolean): void {
    this.current[key.name] = v;
  }

  attrs(a: OtlpAttrs): void {
    for (const [k, v] of a.list) this.current[k.name] = v;
  }

  event(name: string, timeMs: number): void {
    const attributes: Record<string, Attr> = {};
    this.last.events.push({ name, time: hr(timeMs), attributes });
    this.current = attributes;
  }

  endEvent(): void {
    this.current = this.last.attributes;
  }

  link(traceId: string, spanId: string, traceFlags = 1, remote = false): void {
    this.last.links.push({ context: { traceId, spanId, traceFlags, isRemote: remote }, attributes: {} });
  }

  end(error: string): void {
    this.last.status = error === '' ? { code: 0 } : { code: 2, message: error };
  }

  /** The generic serializer's export request. */
  serialize(): Uint8Array {
    // biome-ignore lint/suspicious/noExplicitAny: our objects have every field of the SDK's ReadableSpan it reads
    const body = ProtobufTraceSerializer.serializeRequest(this.spans as any);
    if (body === undefined) throw new Error('the serializer returned nothing');
    return body;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the generated message class, reached by its proto path
const Request = (root as any).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest as {
  decode(b: Uint8Array): unknown;
  toObject(m: unknown, o: Record<string, unknown>): unknown;
};

/**
 * An export request decoded with the generated definitions, as a plain object to
 * compare: every field with its value (proto3: an absent field reads as its
 * default), 64-bit numbers as decimal strings, bytes as base64, and which member of
 * a oneof (AnyValue's) is set.
 */
export function decodeRequest(body: Uint8Array): unknown {
  return Request.toObject(Request.decode(body), {
    longs: String,
    bytes: String,
    defaults: true,
    arrays: true,
    objects: true,
    oneofs: true,
  });
}
