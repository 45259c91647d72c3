import { codingOf } from '../capture/codings.js';
import type { WakeDetail } from '../capture/detail-types.js';
import { editJson, formDecode, holdsGatewayKey, stringText } from '../capture/text.js';

/**
 * A redaction marker somewhere in a text, as stored (`[redacted:<12 hex>]`) or
 * percent-encoded (as the redactor writes it in a query or form), once or more (a URL in
 * a URL's query: `%255B`): what must not be sent.
 */
const MARKER = /(?:\[|%(?:25)*5b)redacted(?::|%(?:25)*3a)[0-9a-f]{12}(?:\]|%(?:25)*5d)/i;
/** A value that is a marker and nothing else: what `set` may fill. */
const WHOLE_MARKER = /^\[redacted:[0-9a-f]{12}\]$/;
/** What a header value sent to an origin may not hold. */
const HEADER_UNSAFE = /[\0\r\n]/;

/** What a replay sends: the query, body and headers, with redacted values supplied by the caller. */
export interface Filled {
  query: string;
  body: Buffer | null;
  /** Captured request headers to send (redacted ones only when `set` gave them). */
  headers: [string, string][];
}

/** Why a replay cannot be sent as asked. */
export type FillRefusal =
  /** A `set` name or value is not acceptable (400 `set.<name>`). */
  | { kind: 'set'; name: string; message: string }
  /** Redacted values that `set` must supply (409, param `set`). */
  | { kind: 'missing'; names: string[] }
  /** Redacted values no `set` name can reach (inside a string, a body neither JSON nor a form): 409. */
  | { kind: 'unreachable'; where: string[] };

export type FillResult = { ok: true; filled: Filled; values: string[] } | { ok: false; refusal: FillRefusal };

/**
 * A captured request made ready to send again. A redaction marker is never sent to an
 * origin as if it were the value, and `set` fills redacted values only: each name it
 * gives must be one that holds a marker, whole, in the captured request (a query
 * parameter or form field by decoded name, a JSON value by JSON path `$.card.cvc`, or
 * a redacted header by name, in any case), and its value a JSON scalar; `$`, a whole
 * object, a field that was not redacted, or a value that is an object or array, is
 * refused.
 * Everything else is sent as captured. `values` are the texts `set` put in the
 * request: the replay's own wake marks them with a fresh salt (replay/salts.ts).
 */
export function fillRedacted(
  d: WakeDetail,
  set: Readonly<Record<string, unknown>>,
  isRedactedHeader: (name: string) => boolean,
): FillResult {
  for (const [name, v] of Object.entries(set)) {
    if (name === '$')
      return refuse(name, 'set fills redacted values only, not the whole body ($): name each redacted value');
    if (v !== null && typeof v === 'object')
      return refuse(name, `the value of ${JSON.stringify(name)} is a JSON scalar (a string, number, boolean or null)`);
    // A gateway key never reaches an origin, in any spelling: sent, the proxy refuses it (400).
    if (typeof v === 'string' && holdsGatewayKey(v))
      return refuse(name, `the value of ${JSON.stringify(name)} holds a gateway key, which never reaches an origin`);
    // Text that UTF-8 cannot carry (a lone surrogate) is no value a request could hold.
    if (typeof v === 'string' && !(v as unknown as { isWellFormed(): boolean }).isWellFormed())
      return refuse(
        name,
        `the value of ${JSON.stringify(name)} is not well-formed Unicode (it holds a lone surrogate)`,
      );
    // A marker copied from the wake is not the value it stands for (never sent as if it were).
    if (typeof v === 'string' && MARKER.test(v))
      return refuse(
        name,
        `the value of ${JSON.stringify(name)} holds a redaction marker ([redacted:...]), which is never sent as if it were the value: give the value itself`,
      );
  }
  const used = new Set<string>();
  const missing: string[] = [];
  const unreachable: string[] = [];
  const values: string[] = [];
  /** The value `set` gives `name` (marking it used), or undefined. */
  const given = (name: string): unknown => {
    if (!Object.hasOwn(set, name)) return undefined;
    used.add(name);
    const v = set[name];
    values.push(typeof v === 'string' ? v : JSON.stringify(v));
    return v;
  };
  /** The same, as text (a string as it is, anything else as JSON). */
  const take = (name: string): string | undefined => {
    const v = given(name);
    return v === undefined ? undefined : typeof v === 'string' ? v : JSON.stringify(v);
  };
  const slot: Slots = { take, given, missing, unreachable };

  const query = fillParams(d.query.replace(/^\?/, ''), slot, 'query');
  let body: Buffer | null = null;
  const b = d.request_body;
  if (b && b.bytes > 0) {
    const headerOf = (n: string) => d.request_headers?.find(([k]) => k.toLowerCase() === n)?.[1];
    const raw = Buffer.from(b.body, b.encoding === 'base64' ? 'base64' : 'utf8');
    const coding = codingOf(headerOf('content-encoding'));
    const plain = coding ? coding.decode(raw, 64 << 20) : raw;
    const text = plain.toString('utf8');
    if (!MARKER.test(text)) {
      // A marker in a wide encoding (UTF-16, UTF-32) or among bytes kept as base64: no name reaches it.
      if (MARKER.test(withoutNuls(plain))) unreachable.push('the body (not UTF-8 text)');
      body = raw;
    } else {
      const ct = (headerOf('content-type') ?? '').toLowerCase();
      // As the redactor read it: a form by its type, or text that is not JSON: untyped or
      // text/plain, or of one line whatever its type (a form sent as application/json).
      const form =
        ct.includes('application/x-www-form-urlencoded') ||
        (text.includes('=') &&
          (ct === '' || ct.startsWith('text/plain') || !text.trimEnd().includes('\n')) &&
          !isJson(text));
      // A leading byte order mark is no part of a form's first name (as the redactor reads it): kept, and put back.
      const bom = form && text.startsWith('\ufeff') ? '\ufeff' : '';
      const out = form ? bom + fillParams(text.slice(bom.length), slot, 'body') : fillJson(text, slot);
      body = coding ? coding.encode(Buffer.from(out)) : Buffer.from(out);
    }
  }
  const headers: [string, string][] = [];
  /** The names `set` gives each header by, lower-cased: header names are case-insensitive. */
  const byHeader = new Map<string, string[]>();
  for (const n of Object.keys(set)) {
    const l = n.toLowerCase();
    byHeader.set(l, [...(byHeader.get(l) ?? []), n]);
  }
  for (const [k, v] of d.request_headers ?? []) {
    if (MARKER.test(v) || isRedactedHeader(k)) {
      const names = byHeader.get(k.toLowerCase()) ?? [];
      if (names.length > 1)
        return refuse(
          names[1] as string,
          `${JSON.stringify(names[0])} and ${JSON.stringify(names[1])} name the same header (header names are case-insensitive): give it once`,
        );
      const name = names[0] ?? k.toLowerCase();
      const value = take(name);
      if (value === undefined) continue;
      if (HEADER_UNSAFE.test(value)) return refuse(name, 'a header value may not hold CR, LF or NUL');
      headers.push([k, value]);
      continue;
    }
    headers.push([k, v]);
  }
  const unknown = Object.keys(set).find((k) => !used.has(k));
  if (unknown !== undefined) {
    return refuse(
      unknown,
      `${JSON.stringify(unknown)} names no redacted value of this request: set fills only values that hold a redaction marker (a query parameter, a form field, a JSON path such as $.card.cvc, or a redacted header), not a whole object or a field that was not redacted`,
    );
  }
  if (unreachable.length > 0) return { ok: false, refusal: { kind: 'unreachable', where: unreachable } };
  if (missing.length > 0) return { ok: false, refusal: { kind: 'missing', names: missing } };
  return { ok: true, filled: { query: query === '' ? '' : `?${query}`, body, headers }, values };
}

const refuse = (name: string, message: string): FillResult => ({
  ok: false,
  refusal: { kind: 'set', name, message },
});

interface Slots {
  take: (n: string) => string | undefined;
  given: (n: string) => unknown;
  missing: string[];
  unreachable: string[];
}

/** Bytes as Latin-1 text without NULs: ASCII in UTF-16 or UTF-32, either byte order, reads as ASCII. */
function withoutNuls(b: Buffer): string {
  return b.indexOf(0) === -1 ? b.toString('latin1') : b.toString('latin1').replaceAll('\0', '');
}

/** Parameters (`a=1&b=2`, `;` too) with each one that is a marker taken from `set` by its decoded name. */
function fillParams(text: string, s: Slots, where: string): string {
  if (text === '' || !/redacted/.test(formDecode(text))) return text;
  const parts = text.split(/([&;])/);
  for (let i = 0; i < parts.length; i += 2) {
    const p = parts[i] as string;
    const eq = p.indexOf('=');
    const name = formDecode(eq === -1 ? p : p.slice(0, eq));
    const value = eq === -1 ? '' : formDecode(p.slice(eq + 1));
    if (!MARKER.test(value)) {
      if (MARKER.test(name)) s.unreachable.push(`a ${where} parameter's name`);
      continue;
    }
    if (!WHOLE_MARKER.test(value)) {
      s.unreachable.push(`inside the ${where} parameter ${JSON.stringify(name)}`);
      continue;
    }
    const v = s.take(name);
    if (v === undefined) s.missing.push(name);
    else parts[i] = `${p.slice(0, eq)}=${encodeURIComponent(v)}`;
  }
  return parts.join('');
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * JSON text with every value that is a marker taken from `set` by its JSON path, filled
 * where it stands: every other byte is sent as captured (numbers past 2^53, spacing,
 * duplicate keys). A body not JSON is unreachable.
 */
function fillJson(text: string, s: Slots): string {
  if (!isJson(text)) {
    s.unreachable.push('the body (neither JSON nor a form)');
    return text;
  }
  return editJson(
    text,
    {
      whole: () => false,
      replace: (raw) => raw,
      key: (key, path) => {
        if (MARKER.test(key)) s.unreachable.push(`a key of ${path}`);
      },
      string: (raw, path) => {
        const v = stringText(raw);
        if (!MARKER.test(v)) return undefined;
        if (!WHOLE_MARKER.test(v)) {
          s.unreachable.push(`inside the string at ${path}`);
          return undefined;
        }
        const value = s.given(path);
        if (value === undefined) {
          // A duplicate key names its path once.
          if (!s.missing.includes(path)) s.missing.push(path);
          return undefined;
        }
        return JSON.stringify(value);
      },
    },
    true,
  );
}
