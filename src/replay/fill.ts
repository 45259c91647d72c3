import { codingOf } from '../capture/codings.js';
import type { WakeDetail } from '../capture/detail-types.js';
import { formDecode } from '../capture/text.js';

/** A redaction marker, as stored (`[redacted:<12 hex>]`). */
const MARKER = /\[redacted:[0-9a-f]{12}\]/;

/** What a replay sends: the query, body and headers, with redacted values supplied by the caller. */
export interface Filled {
  query: string;
  body: Buffer | null;
  /** Captured request headers to send (redacted ones only when `set` gave them). */
  headers: [string, string][];
}

/**
 * A captured request made ready to send again. A redaction marker is never sent to an
 * origin as if it were the value: every query parameter, form field or JSON value
 * (by JSON path, `$.card.number`) that holds one must be given in `set`, else the
 * result names them in `missing`. A body with markers the path form cannot reach (not
 * JSON or a form) is named `$` and given whole. Redacted headers are left out unless
 * `set` gives them by name. `unknown` names `set` keys that match nothing.
 */
export function fillRedacted(
  d: WakeDetail,
  set: Readonly<Record<string, unknown>>,
  isRedactedHeader: (name: string) => boolean,
): { filled: Filled; missing: string[]; unknown: string[] } {
  const used = new Set<string>();
  const missing: string[] = [];
  /** The value `set` gives `name` (marking it used), or undefined. */
  const given = (name: string): unknown => {
    if (!Object.hasOwn(set, name)) return undefined;
    used.add(name);
    return set[name];
  };
  /** The same, as text (a string as it is, anything else as JSON). */
  const take = (name: string): string | undefined => {
    const v = given(name);
    return v === undefined ? undefined : typeof v === 'string' ? v : JSON.stringify(v);
  };

  const query = fillParams(d.query.replace(/^\?/, ''), take, missing);
  let body: Buffer | null = null;
  const b = d.request_body;
  if (b && b.bytes > 0) {
    const headerOf = (n: string) => d.request_headers?.find(([k]) => k.toLowerCase() === n)?.[1];
    const raw = Buffer.from(b.body, b.encoding === 'base64' ? 'base64' : 'utf8');
    const coding = codingOf(headerOf('content-encoding'));
    const plain = coding ? coding.decode(raw, 64 << 20) : raw;
    const text = plain.toString('utf8');
    if (!MARKER.test(text)) body = raw;
    else {
      const whole = take('$');
      let out: string;
      if (whole !== undefined) out = whole;
      else if ((headerOf('content-type') ?? '').includes('application/x-www-form-urlencoded'))
        out = fillParams(text, take, missing);
      else out = fillJson(text, given, missing);
      body = coding ? coding.encode(Buffer.from(out)) : Buffer.from(out);
    }
  }
  const headers: [string, string][] = [];
  for (const [k, v] of d.request_headers ?? []) {
    if (MARKER.test(v) || isRedactedHeader(k)) {
      const given = take(k) ?? take(k.toLowerCase());
      if (given !== undefined) headers.push([k, given]);
      continue;
    }
    headers.push([k, v]);
  }
  const unknown = Object.keys(set).filter((k) => !used.has(k));
  return { filled: { query: query === '' ? '' : `?${query}`, body, headers }, missing, unknown };
}

/** Parameters (`a=1&b=2`, `;` too) with each one holding a marker taken from `set` by its decoded name. */
function fillParams(text: string, take: (n: string) => string | undefined, missing: string[]): string {
  if (text === '' || !/redacted/.test(formDecode(text))) return text;
  const parts = text.split(/([&;])/);
  for (let i = 0; i < parts.length; i += 2) {
    const p = parts[i] as string;
    const eq = p.indexOf('=');
    if (eq === -1) continue;
    const name = formDecode(p.slice(0, eq));
    if (!MARKER.test(formDecode(p.slice(eq + 1)))) continue;
    const v = take(name);
    if (v === undefined) missing.push(name);
    else parts[i] = `${p.slice(0, eq)}=${encodeURIComponent(v)}`;
  }
  return parts.join('');
}

/** JSON text with every value holding a marker taken from `set` by its JSON path; not JSON: the body is `$`. */
function fillJson(text: string, given: (n: string) => unknown, missing: string[]): string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    missing.push('$');
    return text;
  }
  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') {
      if (!MARKER.test(v)) return v;
      const value = given(path);
      if (value === undefined) missing.push(path);
      return value === undefined ? v : value;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`));
    if (v !== null && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, pathOf(path, k))]));
    return v;
  };
  return JSON.stringify(walk(doc, '$'));
}

const pathOf = (base: string, key: string): string =>
  /^[A-Za-z_$][\w$]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
