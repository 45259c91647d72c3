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

/**
 * Every redacted value of a wake's request, in the order the request holds them.
 * `bodyText`: a body kept as base64 (sent compressed), as the text it decodes to
 * (base64BodyMarkers), so the values inside it are asked for too, as the replay API
 * fills them there.
 */
export function redactedValues(w: WakeDetail, bodyText: string | null = null): Redacted[] {
  const out: Redacted[] = [];
  const r = w.request;
  if (!r) return out;
  params(r.query ?? '', 'query', out);
  const body = r.body_encoding === 'utf8' ? r.body : r.body_encoding === 'base64' ? bodyText : null;
  if (body && MARKER.test(body)) {
    const type = r.headers?.find(([k]) => k.toLowerCase() === 'content-type')?.[1] ?? '';
    if (type.includes('application/x-www-form-urlencoded')) params(body, 'body', out);
    else {
      try {
        json(JSON.parse(body), '$', out);
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

/** Each byte as a printf octal escape (`\015`); POSIX printf, so any sh. */
const escapes = (bytes: Iterable<number>) => [...bytes].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
/** Each UTF-8 byte of `s` as a printf octal escape. */
const octal = (s: string) => escapes(new TextEncoder().encode(s));

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
function word(text: string, vars: Map<string, string>, q: (s: string) => string = quote): string {
  let out = '';
  let at = 0;
  for (const m of text.matchAll(MARKERS)) {
    const name = vars.get(`[redacted:${m[1] ?? m[2]}]`);
    if (!name) continue;
    if (m.index > at) out += q(text.slice(at, m.index));
    out += `"$${name}"`;
    at = m.index + m[0].length;
  }
  if (at < text.length || out === '') out += q(text.slice(at));
  return out;
}

/**
 * Text whose characters are bytes (U+0000-U+00FF, latin1) as shell text of exactly
 * those bytes: printable ASCII single-quoted, every other byte written by
 * `"$(printf '\ooo')"` (as quote writes controls), so the copied text holds only ASCII
 * and the shell passes the bytes themselves. NUL is left out, as quote does.
 */
function quoteBytes(s: string): string {
  let out = '';
  for (const m of s.matchAll(/([\x20-\x7e\n]+)|([^\x20-\x7e\n]+)/g)) {
    if (m[1] !== undefined) out += single(m[1]);
    else {
      const kept = [...(m[2] as string).replace(/\0/g, '')].map((c) => c.charCodeAt(0));
      if (kept.length) out += `"$(printf '${escapes(kept)}')"`;
    }
  }
  return out || "''";
}

/**
 * Quoting for a header line. The API gives header values as Node reads them, one
 * character per byte (latin1: `café` sent as UTF-8 arrives as `cafÃ©`); the command
 * must send those bytes, as a replay does, not their characters re-encoded as UTF-8.
 * Bytes that are UTF-8 text are written as that text (readable, and its UTF-8 is
 * those very bytes); other bytes one by one (quoteBytes). A line holding a character
 * past U+00FF came from no wire: it is written as text, as quote writes any text.
 */
function headerQuoting(line: string): (s: string) => string {
  return /[\u0100-\uffff]/.test(line) ? quote : latin1Quote;
}

/** Text whose characters are bytes (see headerQuoting), quoted to send exactly those bytes. */
function latin1Quote(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: plain ASCII is its own bytes
  if (/^[\x00-\x7f]*$/.test(s)) return quote(s);
  try {
    return quote(
      new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Uint8Array.from(s, (c) => c.charCodeAt(0))),
    );
  } catch {
    return quoteBytes(s);
  }
}

/** The bytes of a body kept as base64. */
const base64Bytes = (b64: string): Uint8Array<ArrayBuffer> => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

/**
 * A printf format that writes exactly `bytes` (NUL too), single-quoted: printable
 * ASCII as itself but for `'`, `\` and `%`, every other byte as `\ooo`; a `-` first
 * is escaped too, so printf cannot take the format for an option.
 */
function printfOf(bytes: Uint8Array): string {
  let f = '';
  bytes.forEach((b, i) => {
    const plain = b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c && b !== 0x25 && !(i === 0 && b === 0x2d);
    f += plain ? String.fromCharCode(b) : escapes([b]);
  });
  return `'${f}'`;
}

/** A redaction marker as the replay API looks for one (plain, or percent-encoded once or more). */
const ANY_MARKER = /(?:\[|%(?:25)*5b)redacted(?::|%(?:25)*3a)[0-9a-f]{12}(?:\]|%(?:25)*5d)/i;

/**
 * Why Copy as curl is not offered for a wake, or null: the request it would send is
 * not the one captured. These are the replay API's own refusals (409, POST
 * /v2/wakes/{wake_id}/replay): the path cut at 2,048 characters, or a request body
 * not captured whole (cut at capture.detail.max_body_bytes, not kept, or kept only as
 * its size and SHA-256). Said of the wake ("its path was cut …"), for the page's note.
 */
export function notCopyable(w: WakeDetail): string | null {
  if (w.path_truncated) return 'its path was cut at 2,048 characters: only the start of it was kept';
  const r = w.request;
  if (!r || w.request_bytes <= 0) return null;
  if (r.body_encoding === 'omitted') return 'its request body was kept only as its size and SHA-256, not its bytes';
  if (r.body === null) return 'its request body was not kept (its route keeps no bodies)';
  if (r.body_truncated) {
    const kept = (
      r.body_encoding === 'base64' ? base64Bytes(r.body).length : new TextEncoder().encode(r.body).length
    ).toLocaleString('en');
    return `its request body was cut at capture.detail.max_body_bytes: only the first ${kept} of ${(
      r.body_bytes ?? w.request_bytes
    ).toLocaleString('en')} bytes were kept`;
  }
  return null;
}

/** Codings the browser can read (DecompressionStream), by Content-Encoding. */
const READABLE: Record<string, CompressionFormat[]> = {
  gzip: ['gzip'],
  'x-gzip': ['gzip'],
  // HTTP's deflate is zlib's format; some clients send it raw.
  deflate: ['deflate', 'deflate-raw'],
};

async function inflate(bytes: Uint8Array<ArrayBuffer>, format: CompressionFormat): Promise<Uint8Array<ArrayBuffer>> {
  const s = new Blob([bytes]).stream().pipeThrough(new DecompressionStream(format));
  return new Uint8Array(await new Response(s).arrayBuffer());
}

/**
 * For a body kept as base64 (sent compressed, or bytes that are not UTF-8 text): whether
 * it holds a redaction marker, which a command would send as if it were the value
 * (`'marker'`); `'unread'` when its coding is one the browser cannot read; else `'none'`.
 * Markers are looked for as the replay API does: in the bytes decoded, read as latin1
 * with NULs left out (a UTF-16 body's).
 */
export async function base64BodyMarkers(w: WakeDetail): Promise<Base64Body> {
  const r = w.request;
  if (!r?.body || r.body_encoding !== 'base64') return NONE;
  let bytes = base64Bytes(r.body);
  const coding = (r.headers?.find(([k]) => k.toLowerCase() === 'content-encoding')?.[1] ?? '').trim().toLowerCase();
  if (coding && coding !== 'identity') {
    const formats = READABLE[coding];
    if (!formats) return UNREAD;
    let read: Uint8Array<ArrayBuffer> | null = null;
    for (const f of formats) {
      try {
        read = await inflate(bytes, f);
        break;
      } catch {
        // Not this format: the next one, if any.
      }
    }
    if (!read) return UNREAD;
    bytes = read;
  }
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  if (!ANY_MARKER.test(text.replace(/\0/g, ''))) return NONE;
  return { markers: 'marker', text: new TextDecoder().decode(bytes) };
}

/** What base64BodyMarkers found: with markers, the body's bytes decoded as UTF-8 text (the replay API reads them so). */
export interface Base64Body {
  markers: 'none' | 'marker' | 'unread';
  text: string | null;
}
const NONE: Base64Body = { markers: 'none', text: null };
const UNREAD: Base64Body = { markers: 'unread', text: null };

/**
 * A curl command for the captured request, safe to paste into a POSIX shell whatever
 * the request held: every value from the request is quoted (the method too: over
 * HTTP/2 it may be any token, `|` and `&` among them), and no control character is
 * written as itself. A redacted value is never written as if it were the value: it
 * becomes a shell variable (`"$PASSWORD"`), and a comment above the command names each
 * variable and where it goes. Header values are sent as the bytes the client sent
 * (headerQuoting); a body kept as base64 is piped in by printf, byte for byte. A wake
 * whose request was not kept whole gets no command (notCopyable), and the page checks
 * a base64 body for markers first (base64BodyMarkers): `unread` names a coding it
 * could not read, which a comment line then states.
 */
export function curlOf(w: WakeDetail, base: string, o: { unread?: string } = {}): string {
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
    const line = `${k}: ${v}`;
    parts.push('-H', word(line, vars, headerQuoting(line)));
    nul ||= k.includes('\0') || v.includes('\0');
  }
  // Bytes kept as base64 (a compressed body, or one that is not UTF-8 text) are written
  // by printf, NUL too, and piped to curl as they are.
  let pipe = '';
  if (w.request?.body && w.request.body_encoding === 'base64') {
    pipe = `printf ${printfOf(base64Bytes(w.request.body))} | `;
    parts.push('--data-binary', '@-');
  } else if (w.request?.body && w.request.body_encoding === 'utf8') {
    parts.push('--data-raw', word(w.request.body, vars));
    nul ||= w.request.body.includes('\0');
  }
  const lines: string[] = [];
  if (notes.length) lines.push(`# Redacted values: set ${notes.join(', ')} before running this.`);
  if (nul) lines.push('# The request held NUL characters, which no shell argument can: they are left out.');
  if (o.unread)
    lines.push(
      `# The body is sent as captured, ${commentName(o.unread)}-compressed: the console cannot read that coding, so a redacted value in it would be sent as its marker.`,
    );
  lines.push(pipe + parts.join(' '));
  return lines.join('\n');
}
