import { randomBytes } from 'node:crypto';
import type { TracingConfig } from '../config/tracing.js';

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

/** Each UTF-16 code unit's value as a lowercase hex digit (the spec's HEXDIGLC), else -1: upper case is invalid. */
const HEX = new Int8Array(65536).fill(-1);
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = i;

/**
 * Reads a `traceparent` into `x` (trace id and parent id) and returns its flags, or
 * -1 when it is invalid (then `x` is untouched and the header is ignored). Version
 * `ff` is invalid; version 00 is exactly 55 characters; a later version may carry
 * more after a `-` (spec §3.2.4: read what version 00 defines). All-zero ids are
 * invalid. One pass over the characters, no parse of numbers (measured in
 * bench/tracing.mjs: this is most of the request thread's cost).
 */
export function readTraceparent(v: string, x: Pick<TraceFields, 'traceId' | 'parentSpanId'>): number {
  const n = v.length;
  if (n < 55 || v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return -1;
  const v0 = HEX[v.charCodeAt(0)] as number;
  const v1 = HEX[v.charCodeAt(1)] as number;
  if ((v0 | v1) < 0 || (v0 === 15 && v1 === 15)) return -1;
  if (v0 === 0 && v1 === 0 ? n !== 55 : n > 55 && v.charCodeAt(55) !== 45) return -1;
  let bad = 0;
  let trace = 0;
  let parent = 0;
  for (let i = 3; i < 35; i++) {
    const h = HEX[v.charCodeAt(i)] as number;
    bad |= h;
    trace |= h;
  }
  for (let i = 36; i < 52; i++) {
    const h = HEX[v.charCodeAt(i)] as number;
    bad |= h;
    parent |= h;
  }
  const f0 = HEX[v.charCodeAt(53)] as number;
  const f1 = HEX[v.charCodeAt(54)] as number;
  // A negative digit anywhere is a character that is not lowercase hex; 0 is an all-zero id.
  if ((bad | f0 | f1) < 0 || trace === 0 || parent === 0) return -1;
  x.traceId = v.slice(3, 35);
  x.parentSpanId = v.slice(36, 52);
  return (f0 << 4) | f1;
}

/** A valid `traceparent` as [traceId, parentId, flags], or null (ignored). */
export function parseTraceparent(v: string): [traceId: string, parentId: string, flags: number] | null {
  const x = { traceId: '', parentSpanId: '' };
  const flags = readTraceparent(v, x);
  return flags < 0 ? null : [x.traceId, x.parentSpanId, flags];
}

/** 2^56: the trace id's rightmost 7 bytes (14 hex digits, random in Trace Context Level 2) range below it. */
const RANDOM_SPAN = 2 ** 56;

/**
 * The rejection threshold of a sample ratio p, as 14 hex digits: T = 2^56 - round(p * 2^56),
 * exactly (the OpenTelemetry Collector's pkg/sampling ProbabilityToThreshold, full precision).
 * A trace is kept when its randomness R (the trace id's last 14 hex digits) is at least T
 * (OpenTelemetry's consistent probability sampling, specification/trace/tracestate-probability-sampling.md,
 * "If rv >= th, keep the span"). p = 1 is T = 0 (every id); p = 0 is T = 2^56, written 'g'
 * (above every 14 hex digits as text: no id). Made once per TraceStart, never per request.
 */
export function rejectionThreshold(ratio: number): string {
  // ratio * 2^56 is exact (a power of two), and its rounding an integer BigInt takes exactly.
  // (Config keeps the ratio in [0, 1]; anything else, NaN included, is clamped to it.)
  const p = Number.isNaN(ratio) ? 0 : Math.min(1, Math.max(0, ratio));
  const kept = BigInt(Math.round(p * RANDOM_SPAN));
  const t = (1n << 56n) - kept;
  return t === 1n << 56n ? 'g' : t.toString(16).padStart(14, '0');
}

/** What the request thread needs of `tracing` (config). */
export interface TraceStartOptions {
  /** Spans are exported (tracing.otlp_url is set): ids are minted for requests that bring none. */
  enabled: boolean;
  sampleRatio: number;
  /** Whose sampled flag is followed (tracing.follow_sampled); 'always' when not given. */
  follow?: TracingConfig['follow_sampled'];
  /** With 'trusted': whether the client's address is a trusted proxy's (server.trusted_proxies). */
  trusted?: ((ip: string) => boolean) | undefined;
}

/** The connection a request came on (its peer's address read only when a trusted flag must be checked). */
export interface Peer {
  readonly remoteAddress?: string | undefined;
}

/** Trace flags passed on when not recording, by their two defined bits (sampled 01, random 02). */
const PASSED_FLAGS = ['00', '01', '02', '03'];

const RV = /^[0-9a-f]{14}$/;

/**
 * The explicit randomness of OpenTelemetry's consistent sampling, `rv` in the `ot` member
 * of a caller's tracestate (`ot=th:8;rv:<14 lowercase hex digits>`), which stands for the
 * trace id's when present; null when there is none, or it is not 14 hex digits.
 */
export function explicitRandomness(tracestate: string | string[] | undefined): string | null {
  if (tracestate === undefined) return null;
  const all = typeof tracestate === 'string' ? tracestate : tracestate.join(',');
  if (!all.includes('ot=')) return null;
  for (const member of all.split(',')) {
    const m = member.trim();
    if (!m.startsWith('ot=')) continue;
    for (const field of m.slice(3).split(';')) {
      if (field.startsWith('rv:')) {
        const rv = field.slice(3);
        return RV.test(rv) ? rv : null;
      }
    }
    return null;
  }
  return null;
}

/**
 * Starts a request's part in its trace. Head sampling is decided from the trace id
 * alone, by OpenTelemetry's consistent probability rule on the id's random rightmost
 * 56 bits (R >= T, see rejectionThreshold): every gateway and thread, and an OpenTelemetry
 * sampler or Collector at the same ratio, decides alike for a trace, and a higher ratio
 * keeps every trace a lower one keeps. A caller that says it sampled the trace (flag 01)
 * is followed.
 */
export class TraceStart {
  private readonly pool = new HexPool();
  private readonly enabled: boolean;
  /** The rejection threshold as 14 hex digits: a trace id's last 14 at or above it (compared as text, the same order) is sampled. */
  private readonly threshold: string;
  /** Its first 4 digits as a number: most ids are decided on their first 4 random digits alone. */
  private readonly high: number;
  private readonly follow: TracingConfig['follow_sampled'];
  private readonly trusted: (ip: string) => boolean;
  private readonly ratio: number;

  constructor(o: TraceStartOptions) {
    this.enabled = o.enabled;
    this.follow = o.follow ?? 'always';
    this.trusted = o.trusted ?? (() => false);
    this.threshold = rejectionThreshold(o.sampleRatio);
    this.high = this.threshold === 'g' ? 0x10000 : Number.parseInt(this.threshold.slice(0, 4), 16);
    this.ratio = o.sampleRatio;
  }

  /**
   * Fills `x`'s trace fields from the request's `traceparent` header (or mints them).
   * `peer`: the client's connection, whose address decides whether its sampled flag is
   * followed with `follow: 'trusted'` (none: not followed then).
   */
  begin(
    x: TraceFields,
    traceparent: string | string[] | undefined,
    peer?: Peer,
    tracestate?: string | string[] | undefined,
  ): void {
    const flags = typeof traceparent === 'string' ? readTraceparent(traceparent, x) : -1;
    if (flags < 0) {
      if (!this.enabled) return; // Off, and no (valid) trace came: nothing is minted or sent.
      // All zeros is invalid (a 2^-128 chance, checked all the same).
      let id = this.pool.take(32);
      while (id === ZERO_TRACE) id = this.pool.take(32);
      x.traceId = id;
    }
    let span = this.pool.take(16);
    while (span === ZERO_SPAN) span = this.pool.take(16);
    x.spanId = span;
    if (this.enabled) {
      x.traceSampled =
        flags < 0
          ? this.sampled(x.traceId)
          : this.follows(peer)
            ? (flags & 1) === 1 || this.sampledTrace(x.traceId, tracestate)
            : // A caller whose decision is not followed does not choose its trace id's
              // randomness either (an id ending in f's was sampled at any ratio): a draw of the
              // gateway's own decides, request by request.
              Math.random() < this.ratio;
      // Level 2's random flag (02) passes as it came.
      x.traceFlags = PASSED_FLAGS[(x.traceSampled ? 1 : 0) | (flags > 0 ? flags & 2 : 0)] as string;
    } else {
      // Not recording: the caller's decision passes through (sampled, and Level 2's random
      // bit), the bits W3C reserves as zero ("vendors MUST set those to zero"): the header
      // sent is version 00 with the gateway's span, whatever version came.
      x.traceFlags = PASSED_FLAGS[flags & 3] as string;
    }
  }

  /** A caller's sampled flag is followed (asked only when it set one). */
  private follows(peer: Peer | undefined): boolean {
    if (this.follow === 'always') return true;
    if (this.follow === 'never' || peer === undefined) return false;
    return this.trusted(peer.remoteAddress ?? '');
  }

  /** A caller's trace by its randomness: an explicit `rv` of its tracestate, else its id's. */
  private sampledTrace(id: string, tracestate: string | string[] | undefined): boolean {
    const rv = explicitRandomness(tracestate);
    return rv === null ? this.sampled(id) : this.sampled(rv, 0);
  }

  /**
   * 14 hex digits from `at` (a trace id's digits 18..31, or an explicit rv's) at or above
   * the threshold: the first 4 read by table, the rest compared only on a tie.
   */
  private sampled(id: string, at = 18): boolean {
    const h =
      ((HEX[id.charCodeAt(at)] as number) << 12) |
      ((HEX[id.charCodeAt(at + 1)] as number) << 8) |
      ((HEX[id.charCodeAt(at + 2)] as number) << 4) |
      (HEX[id.charCodeAt(at + 3)] as number);
    if (h !== this.high) return h > this.high;
    return id.slice(at, at + 14) >= this.threshold;
  }
}

/** The request thread's TraceStart of a config: ids minted only when spans are exported. */
export function traceStart(
  cfg: { tracing: Pick<TracingConfig, 'otlp_url' | 'sample_ratio' | 'follow_sampled'> },
  trusted?: (ip: string) => boolean,
): TraceStart {
  return new TraceStart({
    enabled: cfg.tracing.otlp_url !== null,
    sampleRatio: cfg.tracing.sample_ratio,
    follow: cfg.tracing.follow_sampled,
    trusted,
  });
}

/** The `traceparent` the origin receives: the request's trace, the gateway's span as the parent. */
export function traceparentOf(x: TraceFields): string | null {
  return x.traceId === '' ? null : `00-${x.traceId}-${x.spanId}-${x.traceFlags}`;
}
