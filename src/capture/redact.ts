import { isUtf8 } from 'node:buffer';
import { createHmac } from 'node:crypto';
import { type BodyBudget, budgetFor, OverBudget, omittedBody, Work } from './budget.js';
import { type Coding, codingOf } from './codings.js';
import type { CapturedBody } from './detail-types.js';
import { FieldNames } from './field-names.js';
import { KEY, maySpellKey, replaceCutKey, replaceKeys } from './key-spelling.js';
import { hasLines, type LineRedaction, lineTyped, propertiesTyped, redactLines } from './line-formats.js';
import { boundaryOf, eachPart } from './multipart.js';
import {
  basicCredentials,
  editJson,
  formDecode,
  holdsGatewayKey,
  type JsonEditor,
  jsonUnescape,
  nameEscapes,
  opaqueReason,
  stringText,
  trimPartialUtf8,
  valueEnd,
} from './text.js';
import { decodeWide, encodeWide, type Wide, wideOf } from './wide.js';

/** How one body is read: its budget, and whether a body the redactor cannot read is kept all the same. */
export interface BodyOptions {
  budget: BodyBudget;
  /** `capture.detail.opaque_bodies: keep`: XML, base64 and binary bodies kept (gateway keys still replaced). */
  keepOpaque: boolean;
}

const DEFAULT_OPTIONS: BodyOptions = { budget: budgetFor(32_768), keepOpaque: false };
/** Multipart bodies nested in a part are read down to this depth. */
const MAX_MULTIPART_DEPTH = 4;

/** Values a wake marks with a salt of their own (as they appear in the exchange: raw, encoded, escaped). */
export interface FreshValues {
  salt: string;
  values: ReadonlySet<string>;
}

/**
 * Redaction before anything is stored. Named headers, named fields (JSON at any
 * depth, forms, queries, multipart parts; in any casing and with any separators;
 * inside JSON that is itself a string, a form value or a query value), and any
 * gateway key wherever it appears, are replaced by `[redacted:<12 hex>]`: an HMAC
 * of the value under the instance's key and the wake's own salt, so equal values
 * within a wake (and a replay and the wake it replays, which share the salt) stay
 * equal, while equal values in unrelated wakes get unrelated markers: nobody can
 * build a dictionary by sending guesses. Reading a body has a budget (budget.ts).
 */
/** Content types whose bodies are read as text for named fields even when they are not UTF-8 (opaque_bodies: keep). */
const TEXT_TYPED = /^$|^text\/|json|x-www-form-urlencoded|xml|yaml|toml|properties/;

export class Redactor {
  private readonly headerNames: Set<string>;
  private readonly fields: FieldNames;
  /** An escape that could spell a character of some field name or of a gateway key. */
  private readonly spelled: RegExp;
  /** A form-encoded spelling of a field name may be in a text (encodedNameChars). */
  private readonly encodedName: RegExp;
  private salt = '';
  /** Values marked with a salt of their own (a replay's `set` values: its own id). */
  private fresh: FreshValues | null = null;
  /** Markers made for these salts: the same value often stands several times in one wake. */
  private readonly recent = new Map<string, string>();
  /** The budget of the body being read (null outside one: a fresh budget per call). */
  private work: Work | null = null;

  constructor(
    private readonly key: Buffer,
    headers: readonly string[],
    fields: readonly string[],
  ) {
    this.headerNames = new Set(headers.map(headerName));
    this.fields = new FieldNames(fields);
    this.spelled = new RegExp(nameEscapes([...fields, ...fields.map((f) => f.toUpperCase()), KEY_CHARS]));
    this.encodedName = encodedNameChars(fields);
  }

  /**
   * Markers from here on are salted with `salt`: the wake's id, or for a replay the
   * id of the wake it replays (so the two diff equal for equal values). `fresh`
   * names values salted apart: what a replay's caller supplied in `set`, marked with
   * the replay's own id, so no replay tells whether a guess equals the original.
   */
  forWake(salt: string, fresh: FreshValues | null = null): this {
    if (salt !== this.salt || fresh !== this.fresh) {
      this.salt = salt;
      this.fresh = fresh;
      this.recent.clear();
    }
    return this;
  }

  marker(value: string): string {
    let m = this.recent.get(value);
    if (m !== undefined) return m;
    this.work?.marker();
    const salt = this.fresh?.values.has(value) ? this.fresh.salt : this.salt;
    const h = createHmac('sha256', this.key).update(salt).update('\0').update(value);
    m = `[redacted:${h.digest('hex').slice(0, 12)}]`;
    if (value.length <= 512 && this.recent.size < 1024) this.recent.set(value, m);
    return m;
  }

  /**
   * Any gateway key in text, in any spelling an application decodes (key-spelling.ts),
   * replaced by a marker; text holding one nested too deep to cut out is one marker whole.
   */
  scrubKeys(s: string, cut = false): string {
    const out = replaceKeys(s, this.keyMarker, this.keyMarker);
    // Text cut short (max_body_bytes) keeps no start of a key at its end either.
    return cut ? replaceCutKey(out, this.keyMarker) : out;
  }
  private readonly keyMarker = (k: string): string => this.marker(k);

  /** Whether a header is named, its name read as servers read it: any case, `_` as `-` (nginx, CGI/PHP, Django, Rack). */
  isRedactedHeader(name: string): boolean {
    return this.headerNames.has(headerName(name));
  }

  /**
   * Header pairs with named headers (and any gateway key, in a name or a value,
   * HTTP Basic credentials' base64 included) replaced.
   */
  headers(raw: readonly string[]): [string, string][] {
    const out: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const value = raw[i + 1] as string;
      // A gateway key used as a field's name is kept out of storage as one in its value is.
      out.push([
        this.scrubKeys(name),
        this.isRedactedHeader(name) ? this.marker(value) : this.scrubKeys(this.basicKey(value)),
      ]);
    }
    return out;
  }

  /**
   * A value of HTTP Basic credentials that hold a gateway key (`curl -u svc_live_…:`;
   * the origin decodes the base64, RFC 7617) with the credentials replaced by the
   * key's marker (as scrubKeys marks it; the credentials' whole text when the key
   * cannot be cut out); any other value as it is.
   */
  private basicKey(value: string): string {
    const credentials = basicCredentials(value);
    if (credentials === null || !holdsGatewayKey(credentials)) return value;
    const plain = KEY.exec(credentials);
    return `${value.slice(0, 6)}${this.marker(plain === null ? credentials : plain[0])}`;
  }

  /**
   * A query string (with its `?`, or '') with named parameters replaced; `&` and `;`
   * both separate (as some servers read them). Past its budget the whole query is one marker.
   */
  query(q: string): string {
    if (q.length <= 1) return q;
    const plain = q.indexOf('%') === -1 && q.indexOf('+') === -1 && q.indexOf('\\') === -1;
    if (plain && !maySpellKey(q) && !this.fields.mentions(q)) return q;
    const own = this.work === null;
    if (own) this.work = new Work(DEFAULT_OPTIONS.budget);
    try {
      return `?${this.params(q.slice(1), 0)}`;
    } catch (e) {
      if (e instanceof OverBudget) return `?${encodeURIComponent(this.marker(q))}`;
      throw e;
    } finally {
      if (own) this.work = null;
    }
  }

  /** Form or query parameters: a named one's value replaced; JSON in a value followed. */
  private params(text: string, depth: number): string {
    const w = this.work as Work;
    const parts = text.split(PARAM_SEPARATORS);
    for (let i = 0; i < parts.length; i += 2) {
      const p = parts[i] as string;
      if (p === '') continue;
      w.match();
      const eq = p.indexOf('=');
      const name = eq === -1 ? p : p.slice(0, eq);
      const value = eq === -1 ? '' : p.slice(eq + 1);
      // A form's leading byte order mark is no part of its first name (body-parser strips it).
      if (eq !== -1 && this.fields.has(i === 0 ? withoutBom(formDecode(name)) : formDecode(name))) {
        parts[i] = `${name}=${encodeURIComponent(this.marker(value))}`;
        continue;
      }
      const decoded = value.indexOf('%') === -1 && value.indexOf('+') === -1 ? value : formDecode(value);
      const inner = this.nested(decoded, depth + 1);
      if (inner !== decoded) parts[i] = `${this.scrubKeys(name)}=${encodeURIComponent(inner)}`;
      else parts[i] = this.scrubKeys(p);
    }
    return parts.join('');
  }

  /**
   * A value that may itself be a document an application parses again: JSON (an SNS
   * `Message`, Slack's `payload=`, `{"request_body":"{\"password\":…}"}`), with its
   * named fields replaced; GraphQL literals (`login(password: "…")`) likewise. Else
   * the value with any gateway key replaced.
   */
  private nested(v: string, depth: number): string {
    if (v.length < 2 || !(this.fields.mentions(v) || this.escapedMention(v) || this.encodedMention(v)))
      return this.scrubKeys(v);
    const c = v.charCodeAt(firstNonSpace(v));
    if (c === 123 || c === 91) {
      const w = this.work as Work;
      w.match();
      w.depth(depth);
      return parses(v) ? this.json(v, depth) : this.jsonText(v);
    }
    // A URL's query or a form in a string (`"next":"https://…?token=…"`): its named parameters.
    const params = paramsAt(v);
    if (params !== -1) {
      (this.work as Work).depth(depth);
      return this.scrubKeys(v.slice(0, params) + this.params(v.slice(params), depth + 1));
    }
    // A document of lines in a string (`"config":"password: x\nuser: y"`).
    if (v.indexOf('\n') !== -1 && hasLines(v)) v = redactLines(v, this.lineRedaction);
    return this.scrubKeys(v.replace(this.graphqlArgs, (m, head: string, lit: string) => this.namedArg(m, head, lit)));
  }

  /**
   * Whether text may name a field with a JSON escape of one of its characters
   * (`pass\\u0077ord`, read as `password` once parsed): a cheap look for a backslash first.
   */
  private escapedMention(s: string): boolean {
    return s.indexOf('\\') !== -1 && this.spelled.test(s);
  }

  /**
   * Whether text names a field once form-decoded (`pass%77ord`, `card+number` read as
   * `card number`): a cheap look for a `%` or `+` first; decoded only when it holds one.
   */
  private encodedMention(s: string): boolean {
    if (s.indexOf('%') === -1 && s.indexOf('+') === -1) return false;
    // Decoded only when a character of a name is encoded, or a space between letters is
    // (`%77`, `card+number`): not for `+00:00` or `img%20.png`, most text that holds one.
    return this.encodedName.test(s) && this.fields.mentions(formRead(s));
  }

  /** Named values in line formats (line-formats.ts): a name is named whole, or by a part (`DB_PASSWORD`, `db.password`). */
  private readonly lineRedaction: LineRedaction = {
    named: (name) => this.fields.has(name) || this.fields.hasPart(name),
    mark: (v) => this.marker(v),
    count: () => (this.work as Work).match(),
  };

  /**
   * A GraphQL argument `name: "literal"` (or a bare number or word). A name starts where no
   * name character stands before it (not at every `-` inside a run, as `\b` would: each of
   * those starts read to the run's end and back, quadratic in a value like `a-a-a-…`).
   */
  private readonly graphqlArgs = /((?<![\w-])([A-Za-z_][\w-]*)\s*:\s*)("(?:[^"\\]|\\.)*"|-?[\w.]+)/g;
  private namedArg(m: string, head: string, lit: string): string {
    (this.work as Work).match();
    const name = head.replace(/\s*:\s*$/, '');
    return this.fields.has(name) ? `${head}"${this.marker(lit.replace(/^"|"$/g, ''))}"` : m;
  }

  /**
   * A JSON document (one JSON.parse accepts) with the value of each named member
   * replaced by one marker whatever its type (a string, number, literal, array or
   * object; every duplicate of the key), and strings that hold documents followed.
   * Values are replaced where they stand: every other byte is kept as sent (numbers
   * past 2^53, spacing, key order), so a replay re-sends what was sent.
   */
  private json(text: string, depth: number): string {
    return editJson(text, this.jsonEditor, false, depth);
  }
  private readonly jsonEditor: JsonEditor = {
    whole: (key) => this.fields.has(key),
    replace: (raw) => `"${this.marker(markedText(raw))}"`,
    string: (raw, _path, depth) => {
      const t = stringText(raw);
      const next = this.nested(t, depth + 1);
      return next === t ? undefined : JSON.stringify(next);
    },
    enter: (depth) => (this.work as Work).depth(depth),
  };

  /**
   * JSON text that does not parse (cut short, or JSON among other text): named keys
   * and their values found by pattern, keys written with escapes read as JSON reads
   * them, and gateway keys written with escapes found too.
   */
  private jsonText(text: string): string {
    const w = this.work as Work;
    const escaped = text.indexOf('\\') !== -1 && this.spelled.test(text);
    // A named key's value replaced whatever its type: an object or array through its
    // matching bracket (or to the cut), so nothing inside it is kept.
    const kv = new RegExp(KEY_VALUE);
    let out = '';
    let last = 0;
    for (let m = kv.exec(text); m !== null; m = kv.exec(text)) {
      const head = m[1] as string;
      let key = m[2] as string;
      if (key.indexOf('\\') !== -1) {
        w.match();
        key = jsonUnescape(key);
      }
      if (!this.fields.has(key)) continue;
      const start = m.index + head.length;
      const end = m[3] === '{' || m[3] === '[' ? valueEnd(text, start) : kv.lastIndex;
      out += `${text.slice(last, start)}"${this.marker(markedText(text.slice(start, end)))}"`;
      last = kv.lastIndex = end;
    }
    if (last !== 0) out += text.slice(last);
    else out = text;
    if (escaped) {
      out = out.replace(JSON_STRING, (m, inner: string, close: string) => {
        if (inner.indexOf('\\') === -1) return m;
        w.match();
        const t = jsonUnescape(inner);
        if (!maySpellKey(t)) return m;
        const scrubbed = this.scrubKeys(t, close === '');
        if (scrubbed === t) return m;
        const s = JSON.stringify(scrubbed);
        return close === '' ? s.slice(0, -1) : s;
      });
    }
    // Strings holding a URL's query, a form, lines (`"next":"https://…?token=…"`) or an
    // escaped JSON document (`"data":"{\"password\":…}"`): their named values.
    if (this.fields.mentions(out) || escaped || this.encodedMention(out)) {
      out = out.replace(JSON_STRING, (m, inner: string, close: string) => {
        const plain = this.fields.mentions(inner);
        const spelled = !plain && (this.escapedMention(inner) || this.encodedMention(inner));
        if (!plain && !spelled) return m;
        if (inner.indexOf('=') === -1 && inner.indexOf('\\n') === -1 && !spelled && !this.fields.keyed(inner)) return m;
        w.match();
        const t = jsonUnescape(inner);
        const next = this.nested(t, 1);
        if (next === t) return m;
        const s = JSON.stringify(next);
        return close === '' ? s.slice(0, -1) : s;
      });
    }
    return out;
  }

  /**
   * A captured body, redacted by its content type. Bodies that hold nothing to
   * redact (most) stay the bytes they arrived as: they are searched, not decoded.
   * A body over its budget, or one the redactor cannot read (unless kept by
   * `opaque_bodies: keep`), is kept as its size and SHA-256 only, with the reason.
   * `short`: the body ended before its sender said it would (a client gone mid-body,
   * an origin broken off): cut, whatever was kept of it.
   */
  body(
    sent: Buffer,
    total: number,
    contentType: string | undefined,
    contentEncoding?: string,
    o: BodyOptions = DEFAULT_OPTIONS,
    short = false,
  ): CapturedBody {
    const truncated = short || total > sent.length;
    this.work = new Work(o.budget);
    try {
      const coding = codingOf(contentEncoding);
      if (coding === null) return this.plain(sent, total, truncated, contentType, o);
      return this.encoded(sent, total, truncated, contentType, coding, o);
    } catch (e) {
      if (e instanceof OverBudget) return omittedBody(sent, total, truncated, e.reason);
      // A stack too deep for JSON.parse or the walk: over budget all the same.
      if (e instanceof RangeError) return omittedBody(sent, total, truncated, 'nested too deeply');
      throw e;
    } finally {
      this.work = null;
    }
  }

  private plain(
    sent: Buffer,
    total: number,
    truncated: boolean,
    contentType: string | undefined,
    o: BodyOptions,
  ): CapturedBody {
    const ct = (contentType ?? '').toLowerCase();
    let buf = sent;
    if (ct.includes('multipart/form-data')) {
      const b = boundaryOf(contentType as string);
      if (b !== null) buf = this.multipart(sent, b);
    }
    // UTF-16 and UTF-32 (a mark, a declared charset, or the NULs of ASCII in them): read decoded.
    const wide = wideOf(buf, ct);
    if (wide !== null) return this.wide(buf, total, truncated, ct, wide);
    const bytes = truncated ? trimPartialUtf8(buf) : buf;
    const utf8 = isUtf8(bytes);
    if (!o.keepOpaque) {
      const why = opaqueReason(bytes, ct, utf8);
      if (why !== null) return omittedBody(sent, total, truncated, why);
    }
    if (!utf8) {
      // Bytes kept (opaque_bodies: keep) as base64; a gateway key among them is replaced all the
      // same. A body of a text type (a form, JSON, text, untyped) has its named fields redacted
      // too, read as Latin-1 (one byte, one character; ASCII as ASCII): one stray byte (a Latin-1
      // name) makes it no UTF-8, but the servers that take it still read its fields.
      const latin = buf.toString('latin1');
      const read = TEXT_TYPED.test(ct) ? this.text(Buffer.from(latin, 'utf8'), ct, truncated) : null;
      const kept = Buffer.from(read ?? this.scrubKeys(latin, truncated), 'latin1');
      return { data: Buffer.from(kept.toString('base64'), 'latin1'), bytes: total, truncated, encoding: 'base64' };
    }
    const text = this.text(bytes, ct, truncated);
    return { data: text === null ? bytes : Buffer.from(text), bytes: total, truncated, encoding: 'utf8' };
  }

  /** A UTF-16 or UTF-32 body (wide.ts): read as text, kept as base64 of its bytes (in its own encoding). */
  private wide(bytes: Buffer, total: number, truncated: boolean, ct: string, w: Wide): CapturedBody {
    const decoded = decodeWide(bytes, w);
    const bom = decoded.charCodeAt(0) === 0xfeff ? '\ufeff' : '';
    const text = this.text(Buffer.from(decoded.slice(bom.length)), ct, truncated);
    const kept = text === null ? bytes : encodeWide(bom + text, w);
    return { data: Buffer.from(kept.toString('base64'), 'latin1'), bytes: total, truncated, encoding: 'base64' };
  }

  /** UTF-8 text redacted by its type, or null when nothing in it needed replacing. */
  private text(bytes: Buffer, ct: string, truncated: boolean): string | null {
    const formType = ct.includes('application/x-www-form-urlencoded');
    // One regex over the body as text. Any text but a form is searched for JSON's named
    // keys, whatever its type: clients send JSON as text/plain (sendBeacon, a fetch of
    // a string) or untyped, and pages carry it (an HTML page's embedded state).
    const searched = bytes.toString(this.fields.ascii ? 'latin1' : 'utf8');
    const escaped = searched.indexOf('\\') !== -1 && this.spelled.test(searched);
    // A body typed as a form may be JSON all the same (a mislabelled client): read as both.
    const mentioned = this.fields.mentions(searched);
    // A field named with percent-encoding (`pass%77ord`, `card+number`), as a form or URL
    // decodes it: looked for at most once, and only when asked.
    let encoded: boolean | undefined;
    const encodedName = () => (encoded ??= this.encodedMention(searched));
    // JSON naming a field only inside a string value (a URL's query, a form, lines) is read as JSON too.
    const json =
      this.fields.keyed(searched) ||
      escaped ||
      (JSON_START.test(searched) ? mentioned || encodedName() : mentioned && GRAPHQL.test(searched));
    // Text of several lines is read as lines (`name: value`, `name=value`: YAML, TOML, .env), not as one form.
    const multiLine = searched.trimEnd().indexOf('\n') !== -1;
    // A form sent with another type (`user=a&password=…` as application/json or octet-stream)
    // is read as one when it is no JSON: one line with an `=` that mentions a named field.
    const form =
      formType ||
      (!json &&
        !multiLine &&
        searched.indexOf('=') !== -1 &&
        (ct === '' || ct.startsWith('text/plain') || mentioned || encodedName()));
    // .properties names may hide behind escapes (`p\u0061ssword`): any such body is read as lines.
    const properties = propertiesTyped(ct);
    const lines =
      !formType &&
      lineTyped(ct) &&
      (properties ? mentioned || searched.indexOf('\\') !== -1 : mentioned && hasLines(searched));
    if (!json && !form && !lines && !maySpellKey(searched)) return null;
    let text = bytes.toString('utf8');
    let done = false;
    if (json) {
      // One document: its values replaced where they stand (nothing replaced, it stays as written).
      if (!truncated && parses(text)) {
        text = this.json(text, 0);
        done = true;
      }
      // Else documents a line each (NDJSON), or text that is not JSON (cut short, or JSON
      // among other text): the patterns below still find the named fields.
      if (!done) text = (text.indexOf('\n') !== -1 && this.jsonLines(text, truncated)) || this.jsonText(text);
    }
    // A form is read as one unless it was JSON after all (parsed whole, or not typed a form).
    if (form && !done && (formType || !json)) {
      if (!formType && !this.fields.mentions(text) && text.indexOf('%') === -1 && text.indexOf('+') === -1)
        text = this.scrubKeys(text);
      else text = this.params(text, 0);
    }
    if (lines && !done) text = redactLines(text, this.lineRedaction, properties);
    const out = this.scrubKeys(text, truncated);
    return out === searched && out === bytes.toString('utf8') ? null : out;
  }

  /**
   * Text of JSON documents a line each (NDJSON, JSON Lines), each redacted as one;
   * the last line of a body cut short by the patterns. Null when some whole line is
   * not a document (a document written over several lines, say).
   */
  private jsonLines(text: string, truncated: boolean): string | null {
    const lines = text.split('\n');
    const whole = truncated ? lines.length - 1 : lines.length;
    for (let i = 0; i < whole; i++) {
      const line = lines[i] as string;
      if (firstNonSpace(line) < line.length && line !== '\r' && !parses(line)) return null;
    }
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string;
      // A line naming no field (in any spelling, escapes included) has nothing to replace.
      if (!this.fields.mentions(line) && line.indexOf('\\') === -1) continue;
      lines[i] = i < whole ? this.json(line, 0) : this.jsonText(line);
    }
    return lines.join('\n');
  }

  /** A multipart body with each named part's content replaced, and JSON in other parts followed. */
  private multipart(buf: Buffer, boundary: string, depth = 0): Buffer {
    const w = this.work as Work;
    const text = buf.toString('latin1');
    let out = '';
    let last = 0;
    eachPart(text, boundary, (p) => {
      w.match();
      const content = text.slice(p.start, p.end);
      let next = content;
      const inner = /^multipart\//i.test(p.type) ? boundaryOf(p.type) : null;
      // Named when any parser's reading of its name is.
      if (p.names.some((n) => this.fields.has(n))) next = this.marker(content);
      // Parts nested in a part (multipart/mixed in form-data, RFC 2388), read as the outer ones;
      // past MAX_MULTIPART_DEPTH, a part that mentions a named field is one marker.
      else if (inner !== null) {
        if (depth < MAX_MULTIPART_DEPTH)
          next = this.multipart(Buffer.from(content, 'latin1'), inner, depth + 1).toString('latin1');
        else if (this.fields.mentions(content)) next = this.marker(content);
      } else if (this.fields.keyed(content)) {
        const utf8 = Buffer.from(content, 'latin1');
        if (isUtf8(utf8)) next = Buffer.from(this.jsonText(this.nested(utf8.toString(), 1))).toString('latin1');
      }
      if (next !== content) {
        out += text.slice(last, p.start) + next;
        last = p.end;
      }
    });
    return last === 0 ? buf : Buffer.from(out + text.slice(last), 'latin1');
  }

  /**
   * A body sent compressed (Content-Encoding), redacted inside: decoded within its
   * budget (bytes and ratio), redacted by its content type, and kept as sent when
   * nothing was replaced, else compressed again the same way. A body that cannot be
   * read (cut short, an unknown coding, corrupt, over budget) is kept as size and hash.
   */
  private encoded(
    buf: Buffer,
    total: number,
    truncated: boolean,
    contentType: string | undefined,
    coding: Coding | undefined,
    o: BodyOptions,
  ): CapturedBody {
    const b = o.budget;
    if (truncated) return omittedBody(buf, total, true, 'compressed and cut short at max_body_bytes: cannot be read');
    if (coding === undefined) return omittedBody(buf, total, false, 'content coding not known: cannot be read');
    let plain: Buffer;
    try {
      plain = coding.decode(buf, b.maxDecoded);
    } catch (e) {
      const over = (e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      return omittedBody(
        buf,
        total,
        false,
        over ? `decodes to more than ${b.maxDecoded} bytes` : 'corrupt compressed body',
      );
    }
    if (plain.length > 8192 && plain.length > b.maxRatio * buf.length)
      return omittedBody(buf, total, false, `compressed more than ${b.maxRatio} to 1`);
    const inner = this.plain(plain, plain.length, false, contentType, o);
    if (inner.encoding === 'omitted') return omittedBody(buf, total, false, reasonOf(inner));
    const base64 = (x: Buffer): CapturedBody => ({
      data: Buffer.from(x.toString('base64'), 'latin1'),
      bytes: total,
      truncated: false,
      encoding: 'base64',
    });
    if (inner.data === plain || (inner.encoding === 'base64' && !maySpellKey(plain.toString('latin1'))))
      return base64(buf);
    const redacted = inner.encoding === 'base64' ? Buffer.from(inner.data.toString('latin1'), 'base64') : inner.data;
    return base64(coding.encode(redacted));
  }
}

const reasonOf = (b: CapturedBody): string => (JSON.parse(b.data.toString()) as { reason: string }).reason;

/** A GraphQL request sent as JSON: its document's literals are read too. */
const GRAPHQL = /"(?:query|mutation)"\s*:/;
/** Text that starts as JSON does (an object or an array). */
const JSON_START = /^\s*[[{]/;
const PARAM_SEPARATORS = /([&;])/;

/** The characters of a gateway key (svc_live_ / svc_test_ and base62). */
const KEY_CHARS = 'svc_livetsABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Any key and its value in JSON text: a string (perhaps cut short, even after its
 * escape's backslash), a number, a literal, or the bracket that opens an object or array.
 */
const KEY_VALUE = /("((?:[^"\\]|\\.)*)"\s*:\s*)("(?:[^"\\]|\\.)*(?:"|\\)?|-?\d[\d.eE+-]*|true|false|null|[[{])/g;

/** Whether text is one JSON document (a stack too deep to parse is not). */
function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * What a value replaced whole is marked as: a string's text as JSON reads it (as a
 * query's or form's value is marked by its decoded text), anything else as written.
 */
function markedText(raw: string): string {
  if (raw.charCodeAt(0) !== 34) return raw;
  const close = raw.length > 1 && raw.endsWith('"') && !/(?:^|[^\\])(?:\\\\)*\\"$/.test(raw) ? 1 : 0;
  return jsonUnescape(raw.slice(1, raw.length - close));
}

/** A JSON string literal (perhaps cut short): its text, and its closing quote ('' when cut off). */
const JSON_STRING = /"((?:[^"\\]|\\.)*)("?)/g;

/**
 * Where the parameters of a URL or a form written in a string start (after a `?`, or
 * at 0 for `a=b&c=d`), or -1: a string with no spaces holding a `name=`.
 */
function paramsAt(v: string): number {
  if (v.indexOf('=') === -1 || /\s/.test(v)) return -1;
  const q = v.indexOf('?');
  if (q !== -1) return q + 1;
  return FORM_START.test(v) ? 0 : -1;
}
const FORM_START = /^[\w.[\]%-]+=[^=]*(?:&|$)/;

function firstNonSpace(s: string): number {
  let i = 0;
  while (i < s.length && (s.charCodeAt(i) === 32 || s.charCodeAt(i) === 9 || s.charCodeAt(i) === 10)) i++;
  return i;
}

/**
 * What a field name spelled with form encoding holds somewhere: a percent-encoding of
 * one of the names' letters or digits (any case), or a space written `+` or `%20`
 * between letters.
 */
function encodedNameChars(fields: readonly string[]): RegExp {
  const codes = new Set<string>();
  for (const f of fields)
    for (const c of f.toLowerCase() + f.toUpperCase()) {
      const n = c.charCodeAt(0);
      if ((n >= 48 && n <= 57) || (n >= 65 && n <= 90) || (n >= 97 && n <= 122)) codes.add(n.toString(16));
    }
  const pct = codes.size === 0 ? '' : `%(?:${[...codes].join('|')})|`;
  return new RegExp(`${pct}[a-z](?:\\+|%20)[a-z]`, 'i');
}

/** A header's name as servers compare it: in lower case, `_` read as `-`. */
function headerName(name: string): string {
  const l = name.toLowerCase();
  return l.indexOf('_') === -1 ? l : l.replace(/_/g, '-');
}

/** Text without a leading byte order mark. */
const withoutBom = (s: string): string => (s.charCodeAt(0) === 0xfeff ? s.slice(1) : s);

/**
 * Text as a form decodes it (`+` a space, percent-encodings undone), leniently: a
 * run of percent-encodings that is not UTF-8 is read a byte a character. For a look
 * for named fields only.
 */
function formRead(s: string): string {
  const t = s.indexOf('+') === -1 ? s : s.replace(/\+/g, ' ');
  if (t.indexOf('%') === -1) return t;
  return t.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
    }
  });
}
