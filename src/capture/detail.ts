import { type Refillable, refill } from '../ratelimit/buckets.js';
import { budgetFor } from './budget.js';
import type { CapturedDetail } from './detail-types.js';
import type { BodyOptions, FreshValues, Redactor } from './redact.js';

/** What a route keeps of its exchanges (capture.detail, narrowed or widened per route). */
export interface DetailSettings {
  headers: boolean;
  bodies: boolean;
  maxBodyBytes: number;
  /** How many of the route's exchanges, and bytes of their bodies, a second keep their detail. */
  rate: DetailRate;
  /** How a body is read: its budget, and whether bodies the redactor cannot read are kept. */
  body: BodyOptions;
}

/** A route's detail settings, its bodies' budget made from max_body_bytes. */
export const detailSettings = (s: Omit<DetailSettings, 'body'> & { keepOpaque: boolean }): DetailSettings => ({
  headers: s.headers,
  bodies: s.bodies,
  maxBodyBytes: s.maxBodyBytes,
  rate: s.rate,
  body: { budget: budgetFor(s.maxBodyBytes), keepOpaque: s.keepOpaque },
});

/** A bucket holding a second's worth of `perSecond`, full from the start. */
const bucket = (perSecond: number): Refillable => ({
  tokens: perSecond,
  t: 0,
  p: { rate: perSecond / 1000, burst: perSecond },
});

/**
 * At most `perSecond` exchanges a second, and `bytesPerSecond` bytes of their bodies,
 * keep their detail (0: no limit), so what detail costs (redaction, the log, the
 * engine's inserts and merges, the disk) is bounded whatever the traffic. Failed
 * exchanges (status 400 and up, or no answer) draw from buckets of their own: a flood
 * of successes never crowds out the failures one replays, nor the other way round.
 * Each bucket holds a second's worth. Bytes may go into debt by one exchange (a body
 * larger than a second's worth is kept once the bucket is full), and nothing more is
 * kept until it is paid back.
 */
export class DetailRate {
  private readonly ok: { exchanges: Refillable; bytes: Refillable };
  private readonly failed: { exchanges: Refillable; bytes: Refillable };

  constructor(
    readonly perSecond: number,
    readonly bytesPerSecond = 0,
  ) {
    this.ok = { exchanges: bucket(perSecond), bytes: bucket(bytesPerSecond) };
    this.failed = { exchanges: bucket(perSecond), bytes: bucket(bytesPerSecond) };
  }

  /**
   * Whether an exchange that ended at `now` (ms) with `status`, having kept `bytes`
   * of its bodies, keeps its detail; takes its share of the buckets if so.
   */
  take(now: number, status: number, bytes: number): boolean {
    const n = this.perSecond;
    const nb = this.bytesPerSecond;
    if (n === 0 && nb === 0) return true;
    const b = status === 0 || status >= 400 ? this.failed : this.ok;
    refill(b.exchanges, now);
    refill(b.bytes, now);
    if ((n !== 0 && b.exchanges.tokens < 1) || (nb !== 0 && b.bytes.tokens <= 0)) return false;
    if (n !== 0) b.exchanges.tokens -= 1;
    if (nb !== 0) b.bytes.tokens -= bytes;
    return true;
  }
}

/**
 * The first `max` bytes of a body, copied as it streams past (never the whole body
 * before it is forwarded), and the count of all of it.
 */
export class BodyTap {
  private chunks: Buffer[] = [];
  kept = 0;
  total = 0;
  /** The body ended before its sender said it would (its client or origin went): stored as cut. */
  short = false;

  constructor(readonly max: number) {}

  add(c: Buffer): void {
    this.total += c.length;
    if (this.kept >= this.max) return;
    const room = this.max - this.kept;
    const part = c.length <= room ? c : c.subarray(0, room);
    this.chunks.push(part);
    this.kept += part.length;
  }

  /** What was kept, in one Buffer: the chunk itself when there was one (no copy), else a compact copy. */
  take(): Buffer {
    const b = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.kept);
    this.chunks = [];
    return b;
  }
}

/** What the proxy gathers of one exchange while it streams; turned into a WakeDetail at the end. */
export interface DetailTap {
  settings: DetailSettings;
  /** The request's query string with its `?` ('' for none). */
  query: string;
  /** The request's raw headers (Node's rawHeaders: name, value, ...). */
  reqHeaders: readonly string[];
  /** The origin's response headers, once they came. */
  resHeaders: readonly string[] | null;
  req: BodyTap | null;
  res: BodyTap | null;
}

export function newTap(settings: DetailSettings, query: string, reqHeaders: readonly string[]): DetailTap {
  return {
    settings,
    query,
    reqHeaders,
    resHeaders: null,
    req: settings.bodies ? new BodyTap(settings.maxBodyBytes) : null,
    res: settings.bodies ? new BodyTap(settings.maxBodyBytes) : null,
  };
}

/** A header's value from raw headers (`name` in lower case); only names of its length are lowered. */
const headerValue = (raw: readonly string[] | null, name: string): string | undefined => {
  if (!raw) return undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i] as string;
    if (n.length === name.length && n.toLowerCase() === name) return raw[i + 1];
  }
  return undefined;
};

/**
 * A list header's value from raw headers: every line of it joined (RFC 9110 §5.3), as an
 * origin or client reads `Content-Encoding: gzip` and `Content-Encoding: gzip` on two lines:
 * one coding applied twice, never only the first.
 */
const headerList = (raw: readonly string[] | null, name: string): string | undefined => {
  let out: string | undefined;
  if (!raw) return out;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i] as string;
    if (n.length === name.length && n.toLowerCase() === name)
      out = out === undefined ? (raw[i + 1] as string) : `${out}, ${raw[i + 1]}`;
  }
  return out;
};

/** How a replay's wake is marked: its request and its response apart, and values of its own (replay/salts.ts). */
export interface DetailSalts {
  request: string;
  response: string;
  fresh: FreshValues | null;
}

/**
 * Redacts what the tap gathered. Runs once the exchange has ended, off the forwarding
 * path. `salt` salts the markers: the wake's id, or for a replay its DetailSalts.
 */
export function buildDetail(t: DetailTap, r: Redactor, salt: string | DetailSalts): CapturedDetail {
  const s = t.settings;
  const split = typeof salt === 'string' ? null : salt;
  r.forWake(split ? split.request : (salt as string), split?.fresh ?? null);
  // A body is redacted by its own headers' content type and coding.
  const body = (tap: BodyTap, headers: readonly string[]) =>
    r.body(
      tap.take(),
      tap.total,
      headerValue(headers, 'content-type'),
      headerList(headers, 'content-encoding'),
      s.body,
      tap.short,
    );
  const query = r.query(t.query);
  const request_headers = s.headers ? r.headers(t.reqHeaders) : null;
  const request_body = t.req ? body(t.req, t.reqHeaders) : null;
  if (split) r.forWake(split.response, split.fresh);
  return {
    query,
    request_headers,
    response_headers: s.headers && t.resHeaders ? r.headers(t.resHeaders) : null,
    request_body,
    response_body: t.res && t.resHeaders ? body(t.res, t.resHeaders) : null,
    diff: null,
  };
}

/** Rough bytes a detail holds in memory (for the buffer budget). */
export function detailSize(d: CapturedDetail): number {
  let n = d.query.length + (d.request_body?.data.length ?? 0) + (d.response_body?.data.length ?? 0);
  for (const h of [d.request_headers, d.response_headers]) if (h) for (const [k, v] of h) n += k.length + v.length + 8;
  return n + 200;
}

/**
 * Detail waiting in memory to be written is bounded: past the budget a wake keeps
 * only its summary (counted), so a burst of large bodies cannot exhaust memory.
 */
export class DetailBudget {
  used = 0;
  constructor(private readonly max: number) {}
  take(n: number): boolean {
    if (this.used + n > this.max) return false;
    this.used += n;
    return true;
  }
  give(n: number): void {
    this.used = Math.max(0, this.used - n);
  }
}
