import { randomBytes } from 'node:crypto';

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) on the request thread:
 * an incoming `traceparent` read, ids minted, the origin's `traceparent` written.
 * Nothing of the OpenTelemetry SDK is imported here (nor by anything a request
 * thread runs): spans are built on the control thread, from the finished wake.
 */

/** What the request thread writes of a request's trace context (fields of its Exchange). */
export interface TraceFields {
  /** 32 lowercase hex digits, '' when the request takes part in no trace. */
  traceId: string;
  /** The gateway's span: 16 hex digits ('' with no trace). */
  spanId: string;
  /** The caller's span (its valid `traceparent`), '' when the gateway started the trace. */
  parentSpanId: string;
  /** The trace-flags sent on (2 hex digits): '01' when this request's spans are exported. */
  traceFlags: string;
  /** Head sampling chose the request (its spans are exported whatever its outcome). */
  traceSampled: boolean;
}

const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';
/** Ids are cut from a hex string of this many random bytes, refilled when used up (one crypto call per ~680 requests). */
const POOL_BYTES = 16_384;

/** Random hex digits, drawn from a pre-filled pool: no crypto call per id. */
export class HexPool {
  private hex = '';
  private pos = 0;

  constructor(private readonly bytes = POOL_BYTES) {}

  take(n: number): string {
    if (this.pos + n > this.hex.length) {
      this.hex = randomBytes(this.bytes).toString('hex');
      this.pos = 0;
    }
    const s = this.hex.slice(this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
}

/** True for 0-9 a-f (the spec's HEXDIGLC: upper case is invalid). */
function isHex(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * A valid `traceparent` as [traceId, parentId, flags], or null (ignored). Version
 * `ff` is invalid; version 00 is exactly 55 characters; a later version may carry
 * more after a `-` (spec §3.2.4: parse what version 00 defines). All-zero ids are invalid.
 */
export function parseTraceparent(v: string): [traceId: string, parentId: string, flags: number] | null {
  if (v.length < 55) return null;
  if (v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return null;
  if (!isHex(v, 0, 2) || (v.charCodeAt(0) === 102 && v.charCodeAt(1) === 102)) return null;
  const v00 = v.charCodeAt(0) === 48 && v.charCodeAt(1) === 48;
  if (v00 ? v.length !== 55 : v.length > 55 && v.charCodeAt(55) !== 45) return null;
  if (!isHex(v, 3, 35) || !isHex(v, 36, 52) || !isHex(v, 53, 55)) return null;
  const traceId = v.slice(3, 35);
  const parentId = v.slice(36, 52);
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  return [traceId, parentId, Number.parseInt(v.slice(53, 55), 16)];
}

/** 2^56: the trace id's rightmost 7 bytes (random, Trace Context Level 2) read as a fraction of it. */
const RANDOM_SPAN = 2 ** 56;

/** What the request thread needs of `tracing` (config). */
export interface TraceStartOptions {
  /** Spans are exported (tracing.otlp_url is set): ids are minted for requests that bring none. */
  enabled: boolean;
  sampleRatio: number;
}

/**
 * Starts a request's part in its trace. Head sampling is decided from the trace id
 * alone (as OpenTelemetry's TraceIdRatioBased does, on the id's random rightmost 56
 * bits), so every gateway and thread decides alike for a trace; a caller that says
 * it sampled the trace (flag 01) is followed.
 */
export class TraceStart {
  private readonly pool = new HexPool();
  private readonly enabled: boolean;
  private readonly threshold: number;

  constructor(o: TraceStartOptions) {
    this.enabled = o.enabled;
    this.threshold = o.sampleRatio * RANDOM_SPAN;
  }

  /** Fills `x`'s trace fields from the request's `traceparent` header (or mints them). */
  begin(x: TraceFields, traceparent: string | string[] | undefined): void {
    const got = typeof traceparent === 'string' ? parseTraceparent(traceparent) : null;
    let flags = 0;
    if (got !== null) {
      x.traceId = got[0];
      x.parentSpanId = got[1];
      flags = got[2];
    } else if (this.enabled) {
      let id = this.pool.take(32);
      while (id === ZERO_TRACE) id = this.pool.take(32);
      x.traceId = id;
    } else return; // Off, and no trace came: nothing is minted or sent.
    let span = this.pool.take(16);
    while (span === ZERO_SPAN) span = this.pool.take(16);
    x.spanId = span;
    if (this.enabled) {
      x.traceSampled = (flags & 1) === 1 || this.sampled(x.traceId);
      x.traceFlags = x.traceSampled ? '01' : '00';
    } else {
      // Not recording: the caller's decision passes through unchanged.
      x.traceFlags = flags === 1 ? '01' : flags === 0 ? '00' : (flags & 0xff).toString(16).padStart(2, '0');
    }
  }

  private sampled(traceId: string): boolean {
    if (this.threshold <= 0) return false;
    if (this.threshold >= RANDOM_SPAN) return true;
    return Number.parseInt(traceId.slice(18), 16) < this.threshold;
  }
}

/** The request thread's TraceStart of a config: ids minted only when spans are exported. */
export function traceStart(cfg: { tracing: { otlp_url: string | null; sample_ratio: number } }): TraceStart {
  return new TraceStart({ enabled: cfg.tracing.otlp_url !== null, sampleRatio: cfg.tracing.sample_ratio });
}

/** The `traceparent` the origin receives: the request's trace, the gateway's span as the parent. */
export function traceparentOf(x: TraceFields): string | null {
  return x.traceId === '' ? null : `00-${x.traceId}-${x.spanId}-${x.traceFlags}`;
}
