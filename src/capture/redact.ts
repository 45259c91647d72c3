import { isUtf8 } from 'node:buffer';
import { createHmac } from 'node:crypto';
import type { CapturedBody } from '../store/detail-types.js';
import { type Coding, codingOf } from './codings.js';

/** A gateway key anywhere in a value (svc_live_ / svc_test_ and its base62 secret). */
const GATEWAY_KEY = /svc_(?:live|test)_[0-9A-Za-z]{20,128}/g;

/**
 * Redaction before anything is stored. Named headers, JSON fields of the named
 * names at any depth, form fields and query parameters, and any gateway key
 * wherever it appears, are replaced by `[redacted:<12 hex>]`: an HMAC of the value
 * under the instance's key, so equal values stay equal (diffs still see a change)
 * and nothing can be recovered.
 */
export class Redactor {
  private readonly headerNames: Set<string>;
  private readonly fieldNames: Set<string>;
  private readonly fieldRe: RegExp | null;
  /** Whether a text names any redacted field as a JSON key as written (most bodies do not). */
  private readonly anyField: RegExp | null;
  /**
   * A JSON escape of a character some field name or a gateway key has: a key written
   * with it may be that name, a string written with it may be a gateway key.
   */
  private readonly spelled: RegExp;
  /**
   * Every field name is ASCII, so a body can be searched as latin1 text (a plain copy
   * of its bytes, where a UTF-8 decode would check them); else it is decoded first.
   */
  private readonly asciiFields: boolean;
  /** `name=`, `name[` and `name]` of each field, to see whether a plain query string names one at all. */
  private readonly queryNames: string[];

  constructor(
    private readonly key: Buffer,
    headers: readonly string[],
    fields: readonly string[],
  ) {
    this.headerNames = new Set(headers.map((h) => h.toLowerCase()));
    this.fieldNames = new Set(fields);
    const names = fields.map((f) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
    // For a JSON body cut short (not parseable): "name": "string" or "name": number.
    this.fieldRe = names ? new RegExp(`("(?:${names})"\\s*:\\s*)("(?:[^"\\\\]|\\\\.)*"?|-?\\d[\\d.eE+-]*)`, 'g') : null;
    // An escape that could spell a character of a named key ("pass\u0077ord" is "password") or of a gateway key.
    this.spelled = new RegExp(nameEscapes([...fields, KEY_CHARS]));
    this.anyField = names ? new RegExp(`"(?:${names})"\\s*:`) : null;
    this.asciiFields = fields.every((f) => /^[\x20-\x7e]*$/.test(f));
    this.queryNames = fields.flatMap((f) => [`${f}=`, `${f}[`, `${f}]`]);
  }

  /** Recent markers: the same Authorization or cookie arrives again and again, and an HMAC costs microseconds. */
  private readonly recent = new Map<string, string>();

  marker(value: string): string {
    let m = this.recent.get(value);
    if (m !== undefined) return m;
    m = `[redacted:${createHmac('sha256', this.key).update(value).digest('hex').slice(0, 12)}]`;
    if (value.length <= 512) {
      if (this.recent.size >= 4096) this.recent.clear();
      this.recent.set(value, m);
    }
    return m;
  }

  private scrubKeys(s: string): string {
    return s.includes('svc_') ? s.replace(GATEWAY_KEY, (k) => this.marker(k)) : s;
  }

  isRedactedHeader(name: string): boolean {
    return this.headerNames.has(name.toLowerCase());
  }

  /** Header pairs with named headers (and any gateway key) replaced. */
  headers(raw: readonly string[]): [string, string][] {
    const out: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const value = raw[i + 1] as string;
      out.push([name, this.headerNames.has(name.toLowerCase()) ? this.marker(value) : this.scrubKeys(value)]);
    }
    return out;
  }

  /** Whether a plain (unescaped) query string names any redacted field as a parameter. */
  private namesAny(q: string): boolean {
    for (const n of this.queryNames) if (q.indexOf(n) !== -1) return true;
    return false;
  }

  /**
   * Whether a parameter's (decoded) name is a named field: the name itself, or one
   * of its bracketed parts (`user[password]`, `a[b][token]`, as Rails and PHP nest).
   */
  private namedParam(name: string): boolean {
    if (this.fieldNames.has(name)) return true;
    const open = name.indexOf('[');
    if (open === -1) return false;
    if (this.fieldNames.has(name.slice(0, open))) return true;
    for (const m of name.slice(open).matchAll(BRACKETED)) if (this.fieldNames.has(m[1] as string)) return true;
    return false;
  }

  /** A query string (with its `?`, or '') with named parameters replaced. */
  query(q: string): string {
    if (q.length <= 1) return q;
    // Names need decoding only when the query holds an escape or a plus.
    const plain = q.indexOf('%') === -1 && q.indexOf('+') === -1;
    if (plain && !q.includes('svc_') && !this.namesAny(q)) return q;
    const parts = q.slice(1).split('&');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as string;
      const eq = p.indexOf('=');
      const name = eq === -1 ? p : p.slice(0, eq);
      let decoded = name;
      if (!plain) {
        try {
          decoded = decodeURIComponent(name.replace(/\+/g, ' '));
        } catch {
          // Left as sent.
        }
      }
      if (eq !== -1 && this.namedParam(decoded))
        parts[i] = `${name}=${encodeURIComponent(this.marker(p.slice(eq + 1)))}`;
      else parts[i] = this.scrubKeys(p);
    }
    return `?${parts.join('&')}`;
  }

  private walk(v: unknown): unknown {
    if (Array.isArray(v)) return v.map((x) => this.walk(x));
    if (v !== null && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        o[k] = this.fieldNames.has(k) && (x === null || typeof x !== 'object') ? this.marker(String(x)) : this.walk(x);
      }
      return o;
    }
    return typeof v === 'string' ? this.scrubKeys(v) : v;
  }

  /** A JSON string literal (perhaps cut short) whose escapes spell a gateway key, with the key replaced; else as written. */
  private escapedKey(literal: string, inner: string, close: string): string {
    if (inner.indexOf('\\') === -1) return literal;
    const text = jsonUnescape(inner);
    if (!text.includes('svc_')) return literal;
    const scrubbed = this.scrubKeys(text);
    if (scrubbed === text) return literal;
    const out = JSON.stringify(scrubbed);
    return close === '' ? out.slice(0, -1) : out;
  }

  /**
   * Whether JSON text may hold a named field: a named key as written, or escapes
   * that could spell one or a gateway key (only text with a backslash is searched
   * for those). Such text is parsed, so every key and value is read as JSON reads it.
   */
  private namesAnyField(text: string): boolean {
    return this.anyField?.test(text) === true || this.holdsSpelling(text);
  }

  /** Whether text holds an escape that could spell a named field's or a gateway key's character. */
  private holdsSpelling(text: string): boolean {
    return text.indexOf('\\') !== -1 && this.spelled.test(text);
  }

  /**
   * A captured body, redacted by its content type. Bodies that hold nothing to
   * redact (most) stay the bytes they arrived as: they are searched, not decoded.
   */
  body(sent: Buffer, total: number, contentType: string | undefined, contentEncoding?: string): CapturedBody {
    const truncated = total > sent.length;
    const coding = codingOf(contentEncoding);
    if (coding !== null) return this.encoded(sent, total, truncated, contentType, coding);
    const ct = (contentType ?? '').toLowerCase();
    const buf = ct.includes('multipart/form-data') ? this.multipart(sent, contentType as string) : sent;
    const bytes = truncated ? trimPartialUtf8(buf) : buf;
    if (!isUtf8(bytes)) {
      // Bytes, kept as base64; a gateway key among them is replaced all the same.
      const kept = buf.indexOf(SVC) === -1 ? buf : Buffer.from(this.scrubKeys(buf.toString('latin1')), 'latin1');
      return { data: Buffer.from(kept.toString('base64'), 'latin1'), bytes: total, truncated, encoding: 'base64' };
    }
    const formType = ct.includes('application/x-www-form-urlencoded');
    // One regex over the body as text (a Buffer search per name was ten times slower).
    // Any text but a form is searched for JSON's named keys, whatever its type: clients
    // send JSON as text/plain (sendBeacon, a fetch of a string) or untyped, and pages
    // carry it (an HTML page's embedded state).
    const searched = formType ? '' : bytes.toString(this.asciiFields ? 'latin1' : 'utf8');
    const json = !formType && this.namesAnyField(searched);
    // A form sent as text/plain or untyped: its named fields are found as a form's.
    const form = formType || (!json && (ct === '' || ct.startsWith('text/plain')) && searched.indexOf('=') !== -1);
    if (!json && !form && bytes.indexOf(SVC) === -1) return { data: bytes, bytes: total, truncated, encoding: 'utf8' };
    let text = bytes.toString('utf8');
    if (json) {
      let done = false;
      if (!truncated) {
        try {
          text = JSON.stringify(this.walk(JSON.parse(text)));
          done = true;
        } catch {
          // Not JSON after all (or text around it): the patterns below still find the named fields.
        }
      }
      if (!done) {
        const escaped = this.holdsSpelling(text);
        if (this.fieldRe) {
          const mark = (head: string, v: string) => `${head}"${this.marker(v.replace(/^"|"$/g, ''))}"`;
          text = escaped
            ? // Keys may be written with escapes: every key is read as JSON reads it.
              text.replace(KEY_VALUE, (m, head: string, key: string, v: string) =>
                this.fieldNames.has(jsonUnescape(key)) ? mark(head, v) : m,
              )
            : text.replace(this.fieldRe, (_m, head: string, v: string) => mark(head, v));
        }
        // A gateway key may be written with escapes too: strings holding escapes are read as JSON reads them.
        if (escaped)
          text = text.replace(JSON_STRING, (m, inner: string, close: string) => this.escapedKey(m, inner, close));
      }
    } else if (form) {
      text = this.query(`?${text}`).slice(1);
    }
    return { data: Buffer.from(this.scrubKeys(text)), bytes: total, truncated, encoding: 'utf8' };
  }

  /**
   * A multipart/form-data body with the content of each named field's part replaced
   * (the part's name as `namedParam` reads it); the same Buffer when none is named.
   * Worked on as latin1 text, so the bytes of other parts (files) stay as they are.
   */
  private multipart(buf: Buffer, contentType: string): Buffer {
    const b = BOUNDARY.exec(contentType);
    if (b === null) return buf;
    const delimiter = `--${b[1] ?? b[2]}`;
    const text = buf.toString('latin1');
    let at = text.indexOf(delimiter);
    if (at === -1) return buf;
    let out = text.slice(0, at);
    let changed = false;
    for (;;) {
      const next = text.indexOf(`\r\n${delimiter}`, at + delimiter.length);
      // A part runs to the next delimiter, or to the end of a body cut short.
      const part = text.slice(at, next === -1 ? text.length : next);
      const sep = part.indexOf('\r\n\r\n');
      const disposition = sep === -1 ? null : DISPOSITION.exec(part.slice(0, sep));
      const name = disposition === null ? null : PART_NAME.exec(disposition[0]);
      if (name !== null && this.namedParam(partName(name[1] ?? name[2] ?? ''))) {
        out += `${part.slice(0, sep + 4)}${this.marker(part.slice(sep + 4))}`;
        changed = true;
      } else out += part;
      if (next === -1) break;
      out += '\r\n';
      at = next + 2;
    }
    return changed ? Buffer.from(out, 'latin1') : buf;
  }

  /**
   * A body sent compressed (Content-Encoding), redacted inside: decoded, redacted by
   * its content type, and kept as sent when nothing was replaced, else compressed
   * again the same way. A body that cannot be read (cut short, an unknown coding,
   * corrupt, or past MAX_DECODED once decoded) is not kept at all, since it may hold
   * what must be redacted.
   */
  private encoded(
    buf: Buffer,
    total: number,
    truncated: boolean,
    contentType: string | undefined,
    coding: Coding | undefined,
  ): CapturedBody {
    const base64 = (b: Buffer): CapturedBody => ({
      data: Buffer.from(b.toString('base64'), 'latin1'),
      bytes: total,
      truncated: false,
      encoding: 'base64',
    });
    const unreadable: CapturedBody = { data: EMPTY, bytes: total, truncated: true, encoding: 'base64' };
    if (truncated || coding === undefined) return unreadable;
    let plain: Buffer;
    try {
      plain = coding.decode(buf, MAX_DECODED);
    } catch {
      return unreadable;
    }
    const inner = this.body(plain, plain.length, contentType);
    if (inner.data === plain || (inner.encoding === 'base64' && plain.indexOf(SVC) === -1)) return base64(buf);
    const redacted = inner.encoding === 'base64' ? Buffer.from(inner.data.toString('latin1'), 'base64') : inner.data;
    return base64(coding.encode(redacted));
  }
}

/** A compressed body larger than this once decoded is not kept (a bound on the work, and on a zip bomb). */
const MAX_DECODED = 1 << 20;
const EMPTY = Buffer.alloc(0);

const SVC = Buffer.from('svc_');

/** A multipart body's boundary, from its Content-Type (quoted or not). */
const BOUNDARY = /boundary\s*=\s*(?:"([^"]+)"|([^\s;]+))/i;
const DISPOSITION = /content-disposition:[^\r\n]*/i;
/** A part's field name in its Content-Disposition (`name`, not `filename`). */
const PART_NAME = /\bname\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))/i;
/** A part's name as sent: browsers percent-encode quotes and line breaks, older senders escape with backslashes. */
const partName = (raw: string): string =>
  raw.replace(/\\(.)/g, '$1').replace(/%22/gi, '"').replace(/%0d/gi, '\r').replace(/%0a/gi, '\n');

/** The characters of a gateway key (svc_live_ / svc_test_ and base62). */
const KEY_CHARS = 'svc_livetsABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** The parts of a nested parameter name after its first: `[b]` and `[c]` of `a[b][c]`. */
const BRACKETED = /\[([^\]]*)\]/g;

/** Any key and its value (a string, perhaps cut short, or a number) in JSON text. */
const KEY_VALUE = /("((?:[^"\\]|\\.)*)"\s*:\s*)("(?:[^"\\]|\\.)*"?|-?\d[\d.eE+-]*)/g;

/** A JSON string literal (perhaps cut short): its text, and its closing quote ('' when cut off). */
const JSON_STRING = /"((?:[^"\\]|\\.)*)("?)/g;

const UNESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
/**
 * A JSON string's text as JSON reads it, its escapes undone; lenient, so a string
 * cut short (or not quite valid) is read as far as it can be: an escape cut off at
 * the end is dropped, and an unknown one stands for its character.
 */
function jsonUnescape(raw: string): string {
  if (raw.indexOf('\\') === -1) return raw;
  return raw.replace(
    /\\(?:u([0-9a-fA-F]{4})|u[0-9a-fA-F]{0,3}$|(.)|$)/g,
    (_m, hex: string | undefined, c: string | undefined) =>
      hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : c === undefined ? '' : (UNESCAPES[c] ?? c),
  );
}

/** JSON's one-letter escapes, by the character they stand for (as a regex character class holds them). */
const SHORT_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\\\',
  '/': '/',
  '\b': 'b',
  '\f': 'f',
  '\n': 'n',
  '\r': 'r',
  '\t': 't',
};

/**
 * A pattern of the JSON escapes that stand for a character of some field name:
 * `\uXXXX` of each (hex digits in either case) and the one-letter escapes. Escapes
 * of other characters (non-ASCII text, a Go encoder's `\u003c`) do not match.
 */
function nameEscapes(fields: readonly string[]): string {
  const codes = new Set<string>();
  const short = new Set<string>();
  for (const f of fields)
    for (let i = 0; i < f.length; i++) {
      const c = f.charAt(i);
      codes.add(
        f
          .charCodeAt(i)
          .toString(16)
          .padStart(4, '0')
          .replace(/[a-f]/g, (h) => `[${h}${h.toUpperCase()}]`),
      );
      const e = SHORT_ESCAPES[c];
      if (e !== undefined) short.add(e);
    }
  const alts = [`u(?:${[...codes].join('|')})`];
  if (short.size > 0) alts.push(`[${[...short].join('')}]`);
  return `\\\\(?:${alts.join('|')})`;
}

/** Drops an incomplete UTF-8 sequence at the end of a body cut short. */
function trimPartialUtf8(buf: Buffer): Buffer {
  let end = buf.length;
  for (let i = 1; i <= 3 && end - i >= 0; i++) {
    const b = buf[end - i] as number;
    if ((b & 0xc0) === 0x80) continue;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (need > i) end -= i;
    break;
  }
  return buf.subarray(0, end);
}
