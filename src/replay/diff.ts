import { createHash } from 'node:crypto';
import { omittedInfo } from '../capture/budget.js';
import { codingOf } from '../capture/codings.js';
import type { StoredBody, WakeDiff } from '../capture/detail-types.js';
import { type ExactValue, JsonNumber, parseExact, plainOf, sameExact } from './json-exact.js';

/**
 * Response headers never compared: the gateway's own (it adds them to every
 * answer) and those that change on every answer by nature.
 */
const NOT_COMPARED = new Set([
  'x-wake-id',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit',
  'ratelimit-policy',
  'retry-after',
  'date',
  'content-length',
  'etag',
  'set-cookie',
  'x-request-id',
  'age',
  'connection',
  'keep-alive',
  'transfer-encoding',
]);

/** One side of the comparison: what the origin answered. */
export interface Answer {
  status: number;
  headers: [string, string][] | null;
  body: StoredBody | null;
}

const MAX_DIFFS = 200;
const MAX_DECODED = 16 * 1024 * 1024;

function headerMap(h: [string, string][] | null): Map<string, string> {
  const m = new Map<string, string>();
  for (const [k, v] of h ?? []) {
    const n = k.toLowerCase();
    m.set(n, m.has(n) ? `${m.get(n)}, ${v}` : v);
  }
  return m;
}

/** The body's bytes, decompressed when it was sent compressed and kept whole. */
function bytesOf(b: StoredBody, encoding: string | undefined): Buffer {
  const raw = Buffer.from(b.body, b.encoding === 'base64' ? 'base64' : 'utf8');
  const coding = codingOf(encoding);
  if (b.truncated || !coding) return raw;
  try {
    return coding.decode(raw, MAX_DECODED);
  } catch {
    // Compared as sent.
    return raw;
  }
}

const pathOf = (base: string, key: string | number): string =>
  typeof key === 'number'
    ? `${base}[${key}]`
    : /^[A-Za-z_$][\w$]*$/.test(key)
      ? `${base}.${key}`
      : `${base}[${JSON.stringify(key)}]`;

/**
 * Compares two JSON values by JSON path, skipping ignored paths and field names.
 * Numbers compare by exact value (replay/json-exact.ts): past 2^53 too, and `1`
 * equals `1.0`. What differs is given as plain JSON data (`plainOf`).
 */
function jsonDiff(
  a: ExactValue,
  b: ExactValue,
  path: string,
  key: string | number | null,
  ignore: Set<string>,
  out: WakeDiff['body'],
  ignored: Set<string>,
): void {
  if (out.length >= MAX_DIFFS) return;
  if (ignore.has(path) || (typeof key === 'string' && ignore.has(key))) {
    if (!sameExact(a, b)) ignored.add(path);
    return;
  }
  const isObj = (v: unknown) => v !== null && typeof v === 'object' && !(v instanceof JsonNumber);
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length) out.push({ path: pathOf(path, i), before: undefined, after: plainOf(b[i]) });
      else if (i >= b.length) out.push({ path: pathOf(path, i), before: plainOf(a[i]), after: undefined });
      else jsonDiff(a[i] as ExactValue, b[i] as ExactValue, pathOf(path, i), i, ignore, out, ignored);
    }
    return;
  }
  if (isObj(a) && isObj(b) && !Array.isArray(a) && !Array.isArray(b)) {
    const ao = a as { [k: string]: ExactValue };
    const bo = b as { [k: string]: ExactValue };
    for (const k of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
      const p = pathOf(path, k);
      if (!Object.hasOwn(bo, k)) {
        if (ignore.has(p) || ignore.has(k)) ignored.add(p);
        else out.push({ path: p, before: plainOf(ao[k]), after: undefined });
      } else if (!Object.hasOwn(ao, k)) {
        if (ignore.has(p) || ignore.has(k)) ignored.add(p);
        else out.push({ path: p, before: undefined, after: plainOf(bo[k]) });
      } else jsonDiff(ao[k] as ExactValue, bo[k] as ExactValue, p, k, ignore, out, ignored);
    }
    return;
  }
  if (!sameExact(a, b)) out.push({ path, before: plainOf(a), after: plainOf(b) });
}

const sentHash = (b: StoredBody): string =>
  b.encoding === 'omitted'
    ? (omittedInfo(b.body)?.sha256 ?? '')
    : createHash('sha256')
        .update(Buffer.from(b.body, b.encoding === 'base64' ? 'base64' : 'utf8'))
        .digest('hex');

const truncatedMark = (b: StoredBody) => (b.truncated ? { truncated: true } : {});

const summary = (buf: Buffer, b: StoredBody) => ({
  bytes: b.bytes,
  sha256: createHash('sha256').update(buf).digest('hex'),
  ...truncatedMark(b),
});

/**
 * How the replay's answer differs from the original's: the status, the headers the
 * origin set (less the gateway's own and the ones that always change), and the body
 * (JSON value by value by JSON path such as `$.data[0].id`; anything else by size
 * and SHA-256). `ignore` names JSON paths or field names to skip (exact case), or
 * header names (any case); what differed there is listed in `ignored`.
 */
export function diffAnswers(before: Answer, after: Answer, ignoreList: readonly string[] = []): WakeDiff {
  const ignore = new Set(ignoreList);
  /** Header names are case-insensitive: `ignore: ["X-Version"]` skips `x-version`. */
  const ignoreHeaders = new Set(ignoreList.map((n) => n.toLowerCase()));
  const ignored = new Set<string>();
  const status = before.status === after.status ? null : { before: before.status, after: after.status };
  const hb = headerMap(before.headers);
  const ha = headerMap(after.headers);
  const headers: WakeDiff['headers'] = [];
  for (const name of new Set([...hb.keys(), ...ha.keys()])) {
    if (NOT_COMPARED.has(name)) continue;
    if (hb.get(name) === ha.get(name)) continue;
    if (ignoreHeaders.has(name)) {
      ignored.add(name);
      continue;
    }
    headers.push({ name, before: hb.get(name) ?? null, after: ha.get(name) ?? null });
  }
  const body: WakeDiff['body'] = [];
  if (before.body && after.body && (before.body.encoding === 'omitted' || after.body.encoding === 'omitted')) {
    // A body kept only as size and hash is compared by them (the hash of the bytes as sent).
    // A hash of a body kept only in part covers that part: past it, the answers may differ.
    const cut = before.body.truncated || after.body.truncated;
    const a = { bytes: before.body.bytes, sha256: sentHash(before.body), ...truncatedMark(before.body) };
    const b = { bytes: after.body.bytes, sha256: sentHash(after.body), ...truncatedMark(after.body) };
    if ((cut || a.bytes !== b.bytes || a.sha256 !== b.sha256) && !ignore.has('$'))
      body.push({ path: '$', before: a, after: b });
  } else if (before.body && after.body) {
    const ba = bytesOf(before.body, hb.get('content-encoding'));
    const aa = bytesOf(after.body, ha.get('content-encoding'));
    let done = false;
    const json = (hb.get('content-type') ?? '').includes('json') && (ha.get('content-type') ?? '').includes('json');
    if (json && !before.body.truncated && !after.body.truncated) {
      try {
        const found: WakeDiff['body'] = [];
        const skipped = new Set<string>();
        jsonDiff(parseExact(ba.toString('utf8')), parseExact(aa.toString('utf8')), '$', null, ignore, found, skipped);
        body.push(...found);
        for (const p of skipped) ignored.add(p);
        done = true;
      } catch {
        // Not JSON after all (or nested past the stack): compared by size and hash below.
      }
    }
    // An answer kept only in part (past capture.detail.max_body_bytes) may differ where it was
    // not kept: never called the same. The entry shows both kept parts, each marked truncated.
    const cut = before.body.truncated || after.body.truncated;
    if (!done && (cut || before.body.bytes !== after.body.bytes || !ba.equals(aa)) && !ignore.has('$')) {
      body.push({ path: '$', before: summary(ba, before.body), after: summary(aa, after.body) });
    }
  } else if ((before.body === null) !== (after.body === null)) {
    body.push({
      path: '$',
      before: before.body ? before.body.bytes : null,
      after: after.body ? after.body.bytes : null,
    });
  }
  return {
    identical: status === null && headers.length === 0 && body.length === 0,
    status,
    headers,
    body,
    ignored: [...ignored],
  };
}
