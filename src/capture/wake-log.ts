import { bodyFrom, type CapturedBody, type CapturedDetail, type StoredBody } from './detail-types.js';
import type { Wake } from './wake.js';

/**
 * How a wake is written to the write-ahead log: one TabSeparated line, its table
 * row, then what the table does not hold (refused, whether it has detail), then its
 * detail's cells. A sealed segment is inserted as it is into the log table, whose
 * columns are these fields (store/schema.ts's WAKE_LOG_COLUMNS; a test pins that
 * the two agree); store/wake-log-table.ts says how.
 */

/** A log line as parts, in order (newline included): text as strings, bytes as Buffers. */
export type LineParts = readonly (string | Buffer)[];

/** A line's parts as one Buffer (off the hot path: rewrites, and inserts without the file). */
export const joinParts = (parts: LineParts): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));

/** Every field of a log line, in order. */
export const LOG_FIELDS: readonly string[] = [
  'id',
  'environment',
  'captured_at',
  'method',
  'path',
  'route',
  'status',
  'latency_ms',
  'consumer',
  'key_id',
  'region',
  'request_bytes',
  'response_bytes',
  'client_ip',
  'user_agent',
  'retention_days',
  'path_truncated',
  'replay_of',
  'protocol',
  'tls_subject',
  'tls_fingerprint',
  'trace_id',
  'span_id',
  'refused',
  'has_detail',
  // The detail's 12 cells.
  'query',
  'request_headers',
  'response_headers',
  'request_body',
  'request_body_bytes',
  'request_body_state',
  'request_body_encoding',
  'response_body',
  'response_body_bytes',
  'response_body_state',
  'response_body_encoding',
  'diff',
];
const FIELD_COUNT = LOG_FIELDS.length;
const at = (name: string): number => LOG_FIELDS.indexOf(name);
const HAS_DETAIL = at('has_detail');
const DETAIL_AT = at('query');
/** The fields a line had before the protocol, certificate and trace fields (migration 16): read, then rewritten. */
const ADDED_AT = at('protocol');
const ADDED = at('refused') - ADDED_AT;
const FIELD_COUNT_15 = FIELD_COUNT - ADDED;
const HTTP1 = 'http/1.1';
const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;

const TSV_SPECIAL_ALL = /[\\\t\n\r\0]/g;
const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };
/** Whether a string holds a character TabSeparated escapes. */
function tsvSpecial(s: string): boolean {
  if (s.length > 64) {
    // indexOf of one character is a fast native scan; a character class regex is not.
    return (
      s.indexOf('\\') !== -1 ||
      s.indexOf('\t') !== -1 ||
      s.indexOf('\n') !== -1 ||
      s.indexOf('\r') !== -1 ||
      s.indexOf('\0') !== -1
    );
  }
  // A short string (most of a wake's) is looked at once, character by character.
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 92 || (c < 14 && (c === 9 || c === 10 || c === 13 || c === 0))) return true;
  }
  return false;
}

/** A TabSeparated value: backslash, tab, newline, CR and NUL escaped; everything else as it is. */
export const tsvEscape = (s: string): string =>
  tsvSpecial(s) ? s.replace(TSV_SPECIAL_ALL, (c) => TSV_ESCAPES[c] as string) : s;

const TSV_UNESCAPES: Record<string, string> = { '\\': '\\', t: '\t', n: '\n', r: '\r', '0': '\0' };
const tsvUnescape = (s: string): string =>
  s.indexOf('\\') === -1 ? s : s.replace(/\\(.)/g, (_m, c: string) => TSV_UNESCAPES[c] ?? c);

/** The text of the last second formatted: wakes arrive in order, so most share it. */
let lastSecond = Number.NaN;
let lastSecondText = '';
/** DateTime64(3, 'UTC') as text: 2026-11-22 10:00:00.123 (the date formatted once a second). */
const tsvTime = (ms: number): string => {
  const t = Math.floor(ms);
  const second = Math.floor(t / 1000);
  if (second !== lastSecond) {
    lastSecond = second;
    lastSecondText = new Date(second * 1000).toISOString().slice(0, 19).replace('T', ' ');
  }
  const milli = t - second * 1000;
  return `${lastSecondText}.${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}`;
};
const fromTsvTime = (s: string): number => Date.parse(`${s.replace(' ', 'T')}Z`);

const json = (v: unknown): string => (v === null || v === undefined ? '' : JSON.stringify(v));

/** Characters a JSON string must escape (and lone surrogates, which JSON.stringify escapes too). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what JSON escapes.
const JSON_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
/**
 * A JSON string as a TabSeparated value. JSON escapes every control character, so
 * of the characters TabSeparated escapes only the backslashes of JSON's own
 * escapes can occur, and only when JSON.stringify had something to escape.
 */
const jsonStringTsv = (s: string): string =>
  JSON_ESCAPE.test(s) ? JSON.stringify(s).replace(BACKSLASHES, '\\\\') : `"${s}"`;
const BACKSLASHES = /\\/g;
/**
 * Header pairs as JSON.stringify writes them, escaped as a TabSeparated value,
 * without JSON.stringify's general machinery or a second pass to escape them.
 */
export function pairsTsv(h: readonly (readonly [string, string])[] | null): string {
  if (h === null) return '';
  let out = '[';
  for (let i = 0; i < h.length; i++) {
    const p = h[i] as readonly [string, string];
    out += `${i === 0 ? '' : ','}[${jsonStringTsv(p[0])},${jsonStringTsv(p[1])}]`;
  }
  return `${out}]`;
}
const parseJson = <T>(v: string | undefined): T | null => (v ? (JSON.parse(v) as T) : null);

const SPECIAL_BYTES = [0x5c, 0x09, 0x0a, 0x0d, 0x00];
/**
 * TabSeparated escaping of bytes: a native scan for each special byte (most bodies
 * have none and go as they are); otherwise escaped as latin1 text, which keeps
 * every byte of a UTF-8 sequence as it is (none of them is special).
 */
export function tsvEscapeBytes(b: Buffer): Buffer {
  for (const c of SPECIAL_BYTES) {
    if (b.indexOf(c) !== -1)
      return Buffer.from(
        b.toString('latin1').replace(TSV_SPECIAL_ALL, (x) => TSV_ESCAPES[x] as string),
        'latin1',
      );
  }
  return b;
}

/** A body's cells after its bytes: bytes, state (-1 none kept, 0 whole, 1 cut), encoding. */
const bodyTail = (b: CapturedBody | null): string =>
  b === null ? '\t0\t-1\t' : `\t${b.bytes}\t${b.truncated ? 1 : 0}\t${b.encoding}`;

const captured = (b: StoredBody | null): CapturedBody | null =>
  b === null ? null : { data: Buffer.from(b.body), bytes: b.bytes, truncated: b.truncated, encoding: b.encoding };

/** The detail's cells when there is none (numbers that parse, bodies marked as not kept). */
const NO_DETAIL = `\t\t\t${bodyTail(null)}\t${bodyTail(null)}\t`;

/**
 * Marks the name of a wake log segment this version wrote, inserted through the log
 * table; one without it (an earlier version's, left by a crash) is inserted one
 * table at a time (store/wake-log-table.ts's segmentInserts), under the tokens its
 * first insert may already have used.
 */
export const LOG_SEGMENT_TAG = 'l';

/**
 * The log's codec for wakes; `retentionDays` fills a wake recorded without its
 * retention; `onShed` hears of each detail let go once its line is queued.
 */
export const wakeLogCodec = (
  retentionDays: (environment: string) => number,
  onShed: (d: CapturedDetail) => void = () => {},
) => ({
  /** The tag of segments written in this format (inserted through the log table). */
  segmentTag: LOG_SEGMENT_TAG,

  shed(w: Wake): void {
    if (!w.detail) return;
    onShed(w.detail);
    w.detail = undefined;
    w.detail_in_log = true;
  },

  /**
   * A wake without detail as a string; with detail, the line's parts (newline
   * included): text as strings, the bodies as the captured bytes themselves, never
   * copied here (the log makes the text bytes with the lines around it, at once).
   */
  encode(w: Wake): string | LineParts {
    const d = w.detail;
    // The trace ids are written as they are: lowercase hex whatever their source (minted,
    // read from a valid traceparent by tracing/context.ts, or read back here by decode,
    // which keeps only ids of that form), so there is nothing to escape and no scan of 48
    // characters a wake (a profile at 100% sampling put 2.5 us of the log line there).
    const head =
      `${tsvEscape(w.id)}\t${tsvEscape(w.environment)}\t${tsvTime(w.captured_at)}\t${tsvEscape(w.method)}\t` +
      `${tsvEscape(w.path)}\t${tsvEscape(w.route)}\t${w.status}\t${w.latency_ms}\t${tsvEscape(w.consumer)}\t` +
      `${tsvEscape(w.key_id)}\t${tsvEscape(w.region)}\t${w.request_bytes}\t${w.response_bytes}\t` +
      `${tsvEscape(w.client_ip)}\t${tsvEscape(w.user_agent)}\t${w.retention_days ?? retentionDays(w.environment)}\t` +
      `${w.path_truncated ? 1 : 0}\t${tsvEscape(w.replay_of ?? '')}\t${tsvEscape(w.protocol ?? HTTP1)}\t` +
      `${w.tls_subject === undefined ? '' : tsvEscape(w.tls_subject)}\t${tsvEscape(w.tls_fingerprint ?? '')}\t` +
      `${w.trace_id ?? ''}\t${w.span_id ?? ''}\t${w.refused ? 1 : 0}\t${d ? 1 : 0}\t`;
    if (!d) return head + NO_DETAIL;
    // Strings between the bodies are joined, so a bodyless request makes one part fewer.
    const parts: (string | Buffer)[] = [];
    let text = `${head}${tsvEscape(d.query)}\t${pairsTsv(d.request_headers)}\t${pairsTsv(d.response_headers)}\t`;
    if (d.request_body && d.request_body.data.length > 0) {
      parts.push(text, tsvEscapeBytes(d.request_body.data));
      text = '';
    }
    text += `${bodyTail(d.request_body)}\t`;
    if (d.response_body && d.response_body.data.length > 0) {
      parts.push(text, tsvEscapeBytes(d.response_body.data));
      text = '';
    }
    parts.push(`${text}${bodyTail(d.response_body)}\t${tsvEscape(json(d.diff))}\n`);
    return parts;
  },

  decode(line: string): Wake {
    if (line.startsWith('[')) return legacyDecode(line);
    const c = line.split('\t');
    // A line of the format before migration 16 has none of its fields: they are empty.
    if (c.length === FIELD_COUNT_15) c.splice(ADDED_AT, 0, HTTP1, '', '', '', '');
    if (c.length !== FIELD_COUNT) throw new Error(`a wake log line has ${c.length} fields, not ${FIELD_COUNT}`);
    const s = (i: number) => tsvUnescape(c[i] as string);
    const n = (i: number) => {
      const v = Number(c[i]);
      if (!Number.isFinite(v)) throw new Error('a wake log line has a malformed number');
      return v;
    };
    const time = fromTsvTime(c[2] as string);
    if (!Number.isFinite(time)) throw new Error('a wake log line has a malformed time');
    const w: Wake = {
      id: s(0),
      environment: s(1),
      captured_at: time,
      method: s(3),
      path: s(4),
      route: s(5),
      status: n(6),
      latency_ms: n(7),
      consumer: s(8),
      key_id: s(9),
      region: s(10),
      request_bytes: n(11),
      response_bytes: n(12),
      client_ip: s(13),
      user_agent: s(14),
      retention_days: n(15),
      path_truncated: c[16] === '1',
      refused: c[ADDED_AT + ADDED] === '1',
    };
    const replayOf = s(17);
    if (replayOf) w.replay_of = replayOf;
    const protocol = s(ADDED_AT);
    if (protocol !== HTTP1 && protocol !== '') w.protocol = protocol;
    const fingerprint = s(ADDED_AT + 2);
    if (fingerprint) {
      w.tls_subject = s(ADDED_AT + 1);
      w.tls_fingerprint = fingerprint;
    }
    const traceId = c[ADDED_AT + 3] ?? '';
    const spanId = c[ADDED_AT + 4] ?? '';
    // Only ids of their one form come back (encode writes them unescaped).
    if (TRACE_ID.test(traceId) && SPAN_ID.test(spanId)) {
      w.trace_id = traceId;
      w.span_id = spanId;
    }
    if (c[HAS_DETAIL] === '1') w.detail = detailFrom(c.slice(DETAIL_AT).map(tsvUnescape));
    return w;
  },

  /** False for a line an earlier version wrote (its segment is rewritten before it is inserted). */
  isCurrent: (line: string): boolean => !line.startsWith('[') && fieldCount(line) === FIELD_COUNT,
});

/** A detail from its 12 cells (LOG_FIELDS from query on), unescaped: read back from the log, both formats. */
function detailFrom(c: readonly string[]): CapturedDetail {
  return {
    query: c[0] ?? '',
    request_headers: parseJson(c[1]),
    response_headers: parseJson(c[2]),
    request_body: captured(bodyFrom(c[3] ?? '', c[4] ?? 0, c[5] ?? -1, c[6] ?? '')),
    response_body: captured(bodyFrom(c[7] ?? '', c[8] ?? 0, c[9] ?? -1, c[10] ?? '')),
    diff: parseJson(c[11]),
  };
}

/**
 * A line of the first log format (a JSON row array, then a tab, the refused flag
 * and the detail's cells): segments an earlier version left are still read.
 */
function legacyDecode(line: string): Wake {
  const tab = line.indexOf('\t');
  const r = JSON.parse(tab === -1 ? line : line.slice(0, tab)) as unknown[];
  const rest = tab === -1 ? '' : line.slice(tab + 1);
  const w: Wake = {
    id: r[0] as string,
    environment: r[1] as string,
    captured_at: r[2] as number,
    method: r[3] as string,
    path: r[4] as string,
    route: r[5] as string,
    status: r[6] as number,
    latency_ms: r[7] as number,
    consumer: r[8] as string,
    key_id: r[9] as string,
    region: r[10] as string,
    request_bytes: r[11] as number,
    response_bytes: r[12] as number,
    client_ip: r[13] as string,
    user_agent: r[14] as string,
    retention_days: r[15] as number,
    path_truncated: r[16] === 1,
  };
  if (r[17]) w.replay_of = r[17] as string;
  if (rest !== '') {
    w.refused = rest[0] === '1';
    if (rest.length > 1) w.detail = detailFrom(rest.slice(2).split('\t').map(tsvUnescape));
  }
  return w;
}

/** The fields of a line (its tabs, plus one): read only when a segment is read back after a stop. */
function fieldCount(line: string): number {
  let n = 1;
  for (let i = line.indexOf('\t'); i !== -1; i = line.indexOf('\t', i + 1)) n++;
  return n;
}
