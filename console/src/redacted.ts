import type { WakeDetail } from './api';

/**
 * Where a captured request holds redaction markers, named as the replay API's `set`
 * names them: a query parameter or form field by its name, a JSON value by its path
 * (`$.card.cvc`), a header by its name. Body and query values must be given for a
 * replay; a header is left out unless given.
 */
export interface Redacted {
  name: string;
  where: 'query' | 'body' | 'header';
  /** The marker as stored, so equal values (equal markers) are asked for once. */
  marker: string;
}

export const MARKER = /\[redacted:[0-9a-f]{12}\]/;
/** A value that is a marker whole: only those can be given in `set` (a marker inside text cannot). */
const WHOLE = /^\[redacted:[0-9a-f]{12}\]$/;
/** A marker as written in text: plain, or percent-encoded as in a query or a form. */
const MARKERS = /\[redacted:([0-9a-f]{12})\]|%5[Bb]redacted%3[Aa]([0-9a-f]{12})%5[Dd]/g;

const pathOf = (base: string, key: string): string =>
  /^[A-Za-z_$][\w$]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;

function params(text: string, where: 'query' | 'body', out: Redacted[]): void {
  for (const [name, value] of new URLSearchParams(text.replace(/^\?/, ''))) {
    if (WHOLE.test(value)) out.push({ name, where, marker: value });
  }
}

function json(v: unknown, path: string, out: Redacted[]): void {
  if (typeof v === 'string') {
    if (WHOLE.test(v)) out.push({ name: path, where: 'body', marker: v });
  } else if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) json(v[i], `${path}[${i}]`, out);
  } else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) json(x, pathOf(path, k), out);
}

/** Every redacted value of a wake's request, in the order the request holds them. */
export function redactedValues(w: WakeDetail): Redacted[] {
  const out: Redacted[] = [];
  const r = w.request;
  if (!r) return out;
  params(r.query ?? '', 'query', out);
  if (r.body && r.body_encoding === 'utf8' && MARKER.test(r.body)) {
    const type = r.headers?.find(([k]) => k.toLowerCase() === 'content-type')?.[1] ?? '';
    if (type.includes('application/x-www-form-urlencoded')) params(r.body, 'body', out);
    else {
      try {
        json(JSON.parse(r.body), '$', out);
      } catch {
        // Not JSON: the replay API names what it cannot fill in its answer.
      }
    }
  }
  for (const [k, v] of r.headers ?? []) {
    const m = MARKER.exec(v);
    if (m) out.push({ name: k.toLowerCase(), where: 'header', marker: m[0] });
  }
  return out;
}

/** A shell variable name for a field: `$.card.cvc` → CVC, `x-api-key` → X_API_KEY; unique among `taken`. */
export function variableFor(name: string, taken: Set<string>): string {
  const last =
    name
      .replace(/\[\d+\]$/g, '')
      .split(/[.[\]"]+/)
      .filter(Boolean)
      .pop() ?? 'VALUE';
  let base =
    last
      .replace(/[^A-Za-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .toUpperCase() || 'VALUE';
  if (/^\d/.test(base)) base = `V_${base}`;
  let v = base;
  for (let i = 2; taken.has(v); i++) v = `${base}_${i}`;
  taken.add(v);
  return v;
}

/**
 * Characters a shell reads literally inside single quotes but a terminal does not when
 * the text is pasted: C0 controls but newline (CR ends the line, ^U and ^W erase what
 * came before, tab completes), DEL (erases a character) and C1 controls (CSI and the
 * like). A newline stays: inside quotes it only continues the word, pasted or not.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above
const CONTROLS = /[\x00-\x09\x0b-\x1f\x7f-\x9f]+/g;

/** POSIX single quotes: every character literal, a `'` closed, escaped and reopened. */
const single = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Each UTF-8 byte of `s` as a printf octal escape (`\015`); POSIX printf, so any sh. */
const octal = (s: string) =>
  [...new TextEncoder().encode(s)].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');

/**
 * `s` as shell text of exactly those characters: single-quoted, and any control
 * character written as `"$(printf '\ooo')"` so the copied text holds none (a paste
 * cannot act on it). NUL is left out: no shell argument can hold it (curlOf says so).
 */
function quote(s: string): string {
  if (!CONTROL.test(s)) return single(s);
  let out = '';
  let at = 0;
  for (const m of s.matchAll(CONTROLS)) {
    if (m.index > at) out += single(s.slice(at, m.index));
    const kept = m[0].replace(/\0/g, '');
    out += kept ? `"$(printf '${octal(kept)}')"` : '';
    at = m.index + m[0].length;
  }
  if (at < s.length) out += single(s.slice(at));
  return out || "''";
}

/**
 * A name in the comment line: as it is when it is printable ASCII, else as a JSON
 * string with every control, format and line-separator character escaped, so the
 * comment stays one line that a shell or a terminal reads as nothing but a comment.
 */
export function commentName(name: string): string {
  if (/^[\x20-\x7e]+$/.test(name)) return name;
  return JSON.stringify(name).replace(
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu,
    (c) => `\\u{${(c.codePointAt(0) as number).toString(16)}}`,
  );
}

/**
 * One shell word for `text`, each redaction marker in it replaced by `"$VAR"` (the
 * variable `vars` gives that marker), the rest quoted.
 */
function word(text: string, vars: Map<string, string>): string {
  let out = '';
  let at = 0;
  for (const m of text.matchAll(MARKERS)) {
    const name = vars.get(`[redacted:${m[1] ?? m[2]}]`);
    if (!name) continue;
    if (m.index > at) out += quote(text.slice(at, m.index));
    out += `"$${name}"`;
    at = m.index + m[0].length;
  }
  if (at < text.length || out === '') out += quote(text.slice(at));
  return out;
}

/**
 * A curl command for the captured request, safe to paste into a POSIX shell whatever
 * the request held: every value from the request is quoted (the method too: over
 * HTTP/2 it may be any token, `|` and `&` among them), and no control character is
 * written as itself. A redacted value is never written as if it were the value: it
 * becomes a shell variable (`"$PASSWORD"`), and a comment above the command names each
 * variable and where it goes.
 */
export function curlOf(w: WakeDetail, base: string): string {
  const vars = new Map<string, string>();
  const taken = new Set<string>();
  const notes: string[] = [];
  for (const r of redactedValues(w)) {
    if (vars.has(r.marker)) continue;
    const v = variableFor(r.name, taken);
    vars.set(r.marker, v);
    notes.push(`${v} (${r.where} ${commentName(r.name)})`);
  }
  const method = /^[A-Za-z0-9_-]+$/.test(w.method) ? w.method : quote(w.method);
  const url = `${base}${w.path}${w.request?.query ?? ''}`;
  const parts = ['curl', '-g', '-X', method, word(url, vars)];
  let nul = w.method.includes('\0') || url.includes('\0');
  for (const [k, v] of w.request?.headers ?? []) {
    if (/^(host|content-length|connection)$/i.test(k)) continue;
    parts.push('-H', word(`${k}: ${v}`, vars));
    nul ||= k.includes('\0') || v.includes('\0');
  }
  if (w.request?.body && w.request.body_encoding === 'utf8') {
    parts.push('--data-raw', word(w.request.body, vars));
    nul ||= w.request.body.includes('\0');
  }
  const lines: string[] = [];
  if (notes.length) lines.push(`# Redacted values: set ${notes.join(', ')} before running this.`);
  if (nul) lines.push('# The request held NUL characters, which no shell argument can: they are left out.');
  lines.push(parts.join(' '));
  return lines.join('\n');
}
