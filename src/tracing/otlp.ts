/**
 * OTLP/protobuf for exactly the spans wakegate exports (opentelemetry-proto's
 * trace/v1 and collector/trace/v1): one export request is written field by field
 * into one growing buffer, straight from the span inputs, with no object per span or
 * attribute on the way. The OpenTelemetry project's generic serializer
 * (ProtobufTraceSerializer of @opentelemetry/otlp-transformer) builds an
 * intermediate object per span and attribute and then encodes them with protobufjs:
 * measured at about 20 us per exported request (a SERVER and a CLIENT span), 85% of
 * tracing's cost at 100% sampling (bench/RESULTS.md). It stays our tests' oracle:
 * for random spans, the bytes written here decode, with the project's own generated
 * definitions, to the same message as its bytes do (test/unit/otlp.test.ts).
 *
 * Wire format (protobuf encoding): a field is a varint tag (number << 3 | wire type),
 * then a varint (type 0), 8 bytes (type 1), a varint length and that many bytes
 * (type 2: strings, bytes, messages) or 4 bytes (type 5).
 */

/** OTLP's SpanKind (the API's plus one: 0 is unspecified there). */
export const SERVER = 2;
export const CLIENT = 3;

/** An attribute key with its KeyValue.key field (tag, length, UTF-8) encoded once. */
export interface OtlpKey {
  readonly name: string;
  readonly bytes: Uint8Array;
}

export function otlpKey(name: string): OtlpKey {
  const utf8 = Buffer.from(name, 'utf8');
  return { name, bytes: Buffer.concat([Buffer.from([0x0a]), varintBytes(utf8.length), utf8]) };
}

/** An attribute's value: an integer is an int attribute, any other number a double. */
export type OtlpValue = string | number | boolean;

/**
 * Attributes written together, encoded once: a route's attributes that are the same
 * for every request of one shape (its method, route, protocol, environment, origin).
 * The writer copies their bytes; other sinks are played the list.
 */
export interface OtlpAttrs {
  readonly list: readonly (readonly [OtlpKey, OtlpValue])[];
  /** Encoded as a span's attributes, and as an event's. */
  readonly span: Uint8Array;
  readonly event: Uint8Array;
}

/** Encodes a list of attributes once, for `SpanSink.attrs`. */
export function otlpAttrs(list: readonly (readonly [OtlpKey, OtlpValue])[]): OtlpAttrs {
  const w = new OtlpWriter({ serviceName: '', scopeName: '', scopeVersion: '' });
  return { list, span: w.encodeAttrs(list, T_SPAN_ATTR), event: w.encodeAttrs(list, T_EVENT_ATTR) };
}

/** What a span starts with: its ids, name, kind and times (ms since the epoch, fractional). */
export interface SpanStart {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  /** The parent is another process's span (it came in a traceparent). */
  remoteParent: boolean;
  name: string;
  /** OTLP's SpanKind: SERVER or CLIENT. */
  kind: number;
  startMs: number;
  endMs: number;
}

/**
 * Where span builders (spans.ts, webhook-spans.ts) write a span, in this order:
 * `begin`, its attributes, its events (each `event`, its attributes, `endEvent`), its
 * links, `end`. The writer below encodes; the tests' oracle builds the SDK's span
 * objects from the same calls for the generic serializer.
 */
export interface SpanSink {
  begin(s: SpanStart): void;
  str(key: OtlpKey, v: string): void;
  /** An integer is an int attribute, any other number a double (as the SDK's are). */
  num(key: OtlpKey, v: number): void;
  bool(key: OtlpKey, v: boolean): void;
  /** Several attributes encoded once (otlpAttrs), as if each were written in turn. */
  attrs(a: OtlpAttrs): void;
  event(name: string, timeMs: number): void;
  endEvent(): void;
  /**
   * A link to a span of another trace: its W3C trace flags (01 sampled; default 01) and
   * whether its context came from another process (default false). Written as OTLP's
   * Link.flags: those flags, and "whether it is remote is known" with the answer (as the
   * project's serializer writes a link's context).
   */
  link(traceId: string, spanId: string, traceFlags?: number, remote?: boolean): void;
  /** The status: an error with this message, or unset (''). */
  end(error: string): void;
}

// Tags (field number << 3 | wire type) of the fields written.
const T_SPANS = 0x12; // ScopeSpans.spans (2)
const T_TRACE_ID = 0x0a; // Span.trace_id (1), also Link's
const T_SPAN_ID = 0x12; // Span.span_id (2), also Link's
const T_PARENT = 0x22; // Span.parent_span_id (4)
const T_NAME = 0x2a; // Span.name (5)
const T_KIND = 0x30; // Span.kind (6)
const T_START = 0x39; // Span.start_time_unix_nano (7, fixed64)
const T_END = 0x41; // Span.end_time_unix_nano (8, fixed64)
const T_SPAN_ATTR = 0x4a; // Span.attributes (9)
const T_EVENT = 0x5a; // Span.events (11)
const T_LINK = 0x6a; // Span.links (13)
const T_STATUS = 0x7a; // Span.status (15)
const T_FLAGS_0 = 0x85; // Span.flags (16, fixed32): a two-byte tag
const T_FLAGS_1 = 0x01;
const T_EVENT_TIME = 0x09; // Event.time_unix_nano (1, fixed64)
const T_EVENT_NAME = 0x12; // Event.name (2)
const T_EVENT_ATTR = 0x1a; // Event.attributes (3)
const T_LINK_FLAGS = 0x35; // Link.flags (6, fixed32)
const T_STATUS_MESSAGE = 0x12; // Status.message (2)
const T_STATUS_CODE = 0x18; // Status.code (3)
const STATUS_ERROR = 2;
// KeyValue.value (2) and AnyValue's string (1), bool (2), int (3) and double (4) values.
const T_VALUE = 0x12;
const T_STRING = 0x0a;
const T_BOOL = 0x10;
const T_INT = 0x18;
const T_DOUBLE = 0x21;
/**
 * Span and link flags (OTLP 1.x SpanFlags): the W3C trace flags in the low 8 bits,
 * SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK (0x100: whether the parent, or a link's context,
 * is remote is known) and SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK (0x200: it is).
 */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;
const FLAGS_SAMPLED = HAS_IS_REMOTE | 0x01;
const FLAGS_REMOTE_PARENT = IS_REMOTE | FLAGS_SAMPLED;

/** Bytes of a varint of `v` (0 <= v < 2^32). */
function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

function varintBytes(v: number): Buffer {
  const out: number[] = [];
  while (v > 127) {
    out.push((v & 127) | 128);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}

/** Hex digits' values by character code ('0'-'9', 'a'-'f', 'A'-'F'; ids are checked where they come in). */
const HEX = new Uint8Array(128);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

/** Scratch for a double's 8 bytes. */
const F64 = new Float64Array(1);
const F64_BYTES = new Uint8Array(F64.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Writes one export request: `start`, the spans (SpanSink calls), `finish` (its bytes).
 * Every span shares one Resource (service.name) and one InstrumentationScope
 * (wakegate and its version), so a request is one ResourceSpans of one ScopeSpans.
 * Each finish hands over a buffer of its own (the exporter may keep it for a retry),
 * until `recycle` gives the last one back: the next request is written over it. A new
 * 170 KB buffer a batch (512 spans) cost about 1 us an exported request (fresh pages,
 * and the collections external memory brings on), as much as the POST itself.
 */
export class OtlpWriter implements SpanSink {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;
  /** Where ScopeSpans' content (its scope, then the spans) begins: room is left before it for the headers. */
  private body = 0;
  /** The content start of the span (and event) being written. */
  private spanAt = 0;
  private eventAt = 0;
  private attrTag = T_SPAN_ATTR;
  private flags = FLAGS_SAMPLED;
  /** The next buffer's size: the last request's, so a steady flow allocates once a request. */
  private size = 4096;
  /** The last request's buffer, once given back (recycle): the next one is written over it. */
  private spare: Buffer | null = null;
  /** ResourceSpans.resource (1) encoded, and ScopeSpans.scope (1). */
  private readonly resource: Buffer;
  private readonly scope: Buffer;

  constructor(o: { serviceName: string; scopeName: string; scopeVersion: string }) {
    // Resource { attributes (1): service.name }
    const kv = keyValueString(otlpKey('service.name'), o.serviceName);
    const res = Buffer.concat([Buffer.from([0x0a]), varintBytes(kv.length), kv]);
    this.resource = Buffer.concat([Buffer.from([0x0a]), varintBytes(res.length), res]);
    // InstrumentationScope { name (1), version (2) }
    const parts = [stringField(0x0a, o.scopeName)];
    if (o.scopeVersion !== '') parts.push(stringField(0x12, o.scopeVersion));
    const scope = Buffer.concat(parts);
    this.scope = Buffer.concat([Buffer.from([0x0a]), varintBytes(scope.length), scope]);
  }

  /** Begins an export request. */
  start(): void {
    // Room for ExportTraceServiceRequest.resource_spans' tag and length, the resource,
    // and ScopeSpans' tag and length (varints of at most 5 bytes): written at finish.
    this.body = 12 + this.resource.length;
    const size = Math.max(this.size, this.body + this.scope.length + 256);
    const spare = this.spare;
    this.spare = null;
    this.buf = spare !== null && spare.length >= size ? spare : Buffer.allocUnsafe(size);
    this.buf.set(this.scope, this.body);
    this.pos = this.body + this.scope.length;
  }

  /** The export request's bytes (ExportTraceServiceRequest). */
  finish(): Uint8Array {
    const b = this.buf;
    const end = this.pos;
    // Backwards from the spans: ScopeSpans' length and tag (ResourceSpans.scope_spans, 2),
    // the resource, ResourceSpans' length and tag (ExportTraceServiceRequest.resource_spans, 1).
    let p = this.body - varintSize(end - this.body);
    writeVarint(b, p, end - this.body);
    b[--p] = 0x12;
    p -= this.resource.length;
    b.set(this.resource, p);
    const n = end - p;
    p -= varintSize(n);
    writeVarint(b, p, n);
    b[--p] = 0x0a;
    this.size = end + 64;
    return b.subarray(p, end);
  }

  /** Where the request being written has got to: `rollback` forgets what was written after. */
  mark(): number {
    return this.pos;
  }

  /** The bytes `finish` would return now: the spans written and what frames them. */
  bytes(): number {
    const scope = this.pos - this.body;
    const rs = this.resource.length + 1 + varintSize(scope) + scope;
    return 1 + varintSize(rs) + rs;
  }

  /** No span has been written since `start` (or all were rolled back). */
  empty(): boolean {
    return this.pos === this.body + this.scope.length;
  }

  rollback(mark: number): void {
    this.pos = mark;
    this.attrTag = T_SPAN_ATTR;
  }

  /**
   * The last request's bytes are no longer read by anyone (its export succeeded: the
   * collector took the whole body): the next `start` writes over them.
   */
  recycle(): void {
    this.spare = this.buf;
  }

  begin(s: SpanStart): void {
    this.ensure(64 + 3 * s.name.length + s.traceId.length + s.spanId.length + s.parentSpanId.length);
    this.buf[this.pos++] = T_SPANS;
    this.spanAt = this.open();
    this.id(T_TRACE_ID, s.traceId);
    this.id(T_SPAN_ID, s.spanId);
    if (s.parentSpanId !== '') this.id(T_PARENT, s.parentSpanId);
    this.string(T_NAME, s.name);
    const b = this.buf;
    b[this.pos++] = T_KIND;
    b[this.pos++] = s.kind;
    b[this.pos++] = T_START;
    this.time(s.startMs);
    b[this.pos++] = T_END;
    this.time(s.endMs);
    this.flags = s.parentSpanId !== '' && s.remoteParent ? FLAGS_REMOTE_PARENT : FLAGS_SAMPLED;
    this.attrTag = T_SPAN_ATTR;
  }

  end(error: string): void {
    this.ensure(32 + 3 * error.length);
    const b = this.buf;
    b[this.pos++] = T_STATUS;
    if (error === '') {
      // Status { code: STATUS_CODE_UNSET } (its every field the default).
      b[this.pos++] = 0;
    } else {
      const at = this.open();
      this.string(T_STATUS_MESSAGE, error);
      b[this.pos++] = T_STATUS_CODE;
      b[this.pos++] = STATUS_ERROR;
      this.close(at);
    }
    b[this.pos++] = T_FLAGS_0;
    b[this.pos++] = T_FLAGS_1;
    this.fixed32(this.flags);
    this.close(this.spanAt);
  }

  event(name: string, timeMs: number): void {
    this.ensure(32 + 3 * name.length);
    this.buf[this.pos++] = T_EVENT;
    this.eventAt = this.open();
    this.buf[this.pos++] = T_EVENT_TIME;
    this.time(timeMs);
    this.string(T_EVENT_NAME, name);
    this.attrTag = T_EVENT_ATTR;
  }

  endEvent(): void {
    this.close(this.eventAt);
    this.attrTag = T_SPAN_ATTR;
  }

  link(traceId: string, spanId: string, traceFlags = 1, remote = false): void {
    this.ensure(16 + traceId.length + spanId.length);
    const b = this.buf;
    b[this.pos++] = T_LINK;
    b[this.pos++] = 2 + (traceId.length >> 1) + 2 + (spanId.length >> 1) + 5;
    this.id(T_TRACE_ID, traceId);
    this.id(T_SPAN_ID, spanId);
    b[this.pos++] = T_LINK_FLAGS;
    this.fixed32((traceFlags & 0xff) | HAS_IS_REMOTE | (remote ? IS_REMOTE : 0));
  }

  str(key: OtlpKey, v: string): void {
    const k = key.bytes;
    const n = v.length;
    this.ensure(24 + k.length + 3 * n);
    const b = this.buf;
    // Nearly every attribute: ASCII, and short enough that each length is one byte.
    const kv1 = k.length + 4 + n;
    if (kv1 < 0x80) {
      let p = this.pos;
      b[p++] = this.attrTag;
      b[p++] = kv1;
      for (let i = 0; i < k.length; i++) b[p++] = k[i] as number;
      b[p++] = T_VALUE;
      b[p++] = n + 2;
      b[p++] = T_STRING;
      b[p++] = n;
      let i = 0;
      for (; i < n; i++) {
        const c = v.charCodeAt(i);
        if (c >= 0x80) break;
        b[p + i] = c;
      }
      if (i === n) {
        this.pos = p + n;
        return;
      }
      // Past ASCII: written below, over what was.
    }
    // Sized for one byte per character (ASCII, nearly always); moved if it was not.
    let m = n;
    let any = 1 + varintSize(m) + m;
    let kv = k.length + 1 + varintSize(any) + any;
    let at = this.pos + 1 + varintSize(kv) + k.length + 1 + varintSize(any) + 1 + varintSize(m);
    m = this.utf8(v, at);
    if (m !== n) {
      any = 1 + varintSize(m) + m;
      kv = k.length + 1 + varintSize(any) + any;
      const to = this.pos + 1 + varintSize(kv) + k.length + 1 + varintSize(any) + 1 + varintSize(m);
      if (to !== at) b.copyWithin(to, at, at + m);
      at = to;
    }
    let p = this.pos;
    b[p++] = this.attrTag;
    p = writeVarint(b, p, kv);
    b.set(k, p);
    p += k.length;
    b[p++] = T_VALUE;
    p = writeVarint(b, p, any);
    b[p++] = T_STRING;
    writeVarint(b, p, m);
    this.pos = at + m;
  }

  num(key: OtlpKey, v: number): void {
    const k = key.bytes;
    this.ensure(24 + k.length);
    const b = this.buf;
    if (!Number.isInteger(v)) {
      this.keyValue(k, 10);
      b[this.pos++] = 9;
      b[this.pos++] = T_DOUBLE;
      F64[0] = v;
      if (LITTLE_ENDIAN) b.set(F64_BYTES, this.pos);
      else for (let i = 0; i < 8; i++) b[this.pos + i] = F64_BYTES[7 - i] as number;
      this.pos += 8;
      return;
    }
    // int64, two's complement in a varint (as protobufjs' LongBits.fromNumber, so -0 is 0).
    let lo: number;
    let hi: number;
    if (v >= 0 && v < 0x80000000) {
      lo = v;
      hi = 0;
    } else {
      const neg = v < 0;
      const a = neg ? -v : v;
      lo = a >>> 0;
      hi = ((a - lo) / 4294967296) >>> 0;
      if (neg) {
        hi = ~hi >>> 0;
        lo = ~lo >>> 0;
        if (++lo > 4294967295) {
          lo = 0;
          if (++hi > 4294967295) hi = 0;
        }
      }
    }
    const size = varint64Size(lo, hi);
    this.keyValue(k, 2 + size);
    b[this.pos++] = 1 + size;
    b[this.pos++] = T_INT;
    let p = this.pos;
    while (hi !== 0) {
      b[p++] = (lo & 127) | 128;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    while (lo > 127) {
      b[p++] = (lo & 127) | 128;
      lo >>>= 7;
    }
    b[p++] = lo;
    this.pos = p;
  }

  bool(key: OtlpKey, v: boolean): void {
    const k = key.bytes;
    this.ensure(16 + k.length);
    this.keyValue(k, 3);
    const b = this.buf;
    b[this.pos++] = 2;
    b[this.pos++] = T_BOOL;
    b[this.pos++] = v ? 1 : 0;
  }

  attrs(a: OtlpAttrs): void {
    const bytes = this.attrTag === T_SPAN_ATTR ? a.span : a.event;
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /**
   * A list of attributes' bytes with this attribute tag, for otlpAttrs, on a writer of
   * its own: it drops whatever request this writer was writing.
   */
  encodeAttrs(list: readonly (readonly [OtlpKey, OtlpValue])[], tag: number): Uint8Array {
    this.buf = Buffer.alloc(256);
    this.pos = 0;
    this.attrTag = tag;
    for (const [k, v] of list) {
      if (typeof v === 'string') this.str(k, v);
      else if (typeof v === 'number') this.num(k, v);
      else this.bool(k, v);
    }
    return Uint8Array.prototype.slice.call(this.buf, 0, this.pos);
  }

  /** An attribute's tag, KeyValue's length and key, and the value's tag: `value` bytes (AnyValue's length and it) follow. */
  private keyValue(k: Uint8Array, value: number): void {
    const b = this.buf;
    b[this.pos++] = this.attrTag;
    this.pos = writeVarint(b, this.pos, k.length + 1 + value);
    b.set(k, this.pos);
    this.pos += k.length;
    b[this.pos++] = T_VALUE;
  }

  /** Room for `n` more bytes. */
  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** Leaves two bytes for a length (most spans and events are 128 bytes to 16 KB); returns where the content starts. */
  private open(): number {
    this.pos += 2;
    return this.pos;
  }

  /** Writes the length of what was written since `open`, moving it when its varint is not two bytes. */
  private close(at: number): void {
    const b = this.buf;
    const len = this.pos - at;
    if (len < 0x80) {
      b.copyWithin(at - 1, at, this.pos);
      b[at - 2] = len;
      this.pos--;
    } else if (len < 0x4000) {
      b[at - 2] = (len & 127) | 128;
      b[at - 1] = len >>> 7;
    } else {
      const n = varintSize(len);
      this.ensure(n);
      this.buf.copyWithin(at - 2 + n, at, this.pos);
      writeVarint(this.buf, at - 2, len);
      this.pos += n - 2;
    }
  }

  /** A string field (the caller ensured 16 + 3 * length bytes). */
  private string(tag: number, s: string): void {
    const b = this.buf;
    b[this.pos++] = tag;
    const n = s.length;
    const at = this.pos + varintSize(n);
    const m = this.utf8(s, at);
    const to = this.pos + varintSize(m);
    if (to !== at) b.copyWithin(to, at, at + m);
    writeVarint(b, this.pos, m);
    this.pos = to + m;
  }

  /** A string's UTF-8 at `at`, its byte count returned (room for 3 bytes a character ensured). */
  private utf8(s: string, at: number): number {
    const b = this.buf;
    const n = s.length;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      // Past ASCII: Node's encoder (a lone surrogate becomes U+FFFD, as the WHATWG encoder does).
      if (c >= 0x80) return b.write(s, at, 'utf8');
      b[at + i] = c;
    }
    return n;
  }

  /** An id field: its hex digits as bytes. */
  private id(tag: number, hex: string): void {
    const b = this.buf;
    const n = hex.length >> 1;
    b[this.pos++] = tag;
    b[this.pos++] = n;
    let p = this.pos;
    for (let i = 0; i < 2 * n; i += 2)
      b[p++] = ((HEX[hex.charCodeAt(i) & 127] as number) << 4) | (HEX[hex.charCodeAt(i + 1) & 127] as number);
    this.pos = p;
  }

  /**
   * ms since the epoch as fixed64 nanoseconds: whole seconds and the rest rounded to
   * the nanosecond (the SDK's HrTime), added exactly in two 32-bit halves (the sum
   * is past 2^53, where a double is no longer exact).
   */
  private time(ms: number): void {
    const s = Math.floor(ms / 1000);
    const ns = Math.round((ms - s * 1000) * 1e6);
    // s * 1e9 + ns, with s = sh * 2^16 + sl: every product below 2^53. Remainders by a power
    // of two as x - floor(x / 2^k) * 2^k (exact; a double's % is a call, measured dearer).
    const sh = Math.floor(s / 65536);
    const sl = s - sh * 65536;
    const high = sh * 1e9;
    const highLow = high - Math.floor(high / 65536) * 65536;
    const low = sl * 1e9 + ns + highLow * 65536;
    const carry = Math.floor(low / 4294967296);
    const lo = low - carry * 4294967296;
    const hi = (high - highLow) / 65536 + carry;
    this.fixed32(lo);
    this.fixed32(hi);
  }

  private fixed32(v: number): void {
    const b = this.buf;
    const p = this.pos;
    b[p] = v & 0xff;
    b[p + 1] = (v >>> 8) & 0xff;
    b[p + 2] = (v >>> 16) & 0xff;
    b[p + 3] = (v >>> 24) & 0xff;
    this.pos = p + 4;
  }
}

function writeVarint(b: Uint8Array, p: number, v: number): number {
  while (v > 127) {
    b[p++] = (v & 127) | 128;
    v >>>= 7;
  }
  b[p++] = v;
  return p;
}

function varint64Size(lo: number, hi: number): number {
  if (hi === 0) return varintSize(lo);
  // Past 32 bits: 5 bytes hold 35 bits, each further byte 7 more.
  let n = 5;
  for (let h = hi >>> 3; h !== 0; h >>>= 7) n++;
  return n;
}

/** A string field, encoded apart (the resource and the scope, once). */
function stringField(tag: number, s: string): Buffer {
  const utf8 = Buffer.from(s, 'utf8');
  return Buffer.concat([Buffer.from([tag]), varintBytes(utf8.length), utf8]);
}

/** A KeyValue's content with a string value, encoded apart. */
function keyValueString(key: OtlpKey, v: string): Buffer {
  const any = stringField(T_STRING, v);
  return Buffer.concat([key.bytes, Buffer.from([T_VALUE]), varintBytes(any.length), any]);
}
